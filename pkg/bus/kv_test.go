package bus_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
)

// TestDirectKVBehavesLikeTheBucket: the subject-only client reads and writes
// what a bound bucket does, with the same errors.
func TestDirectKVBehavesLikeTheBucket(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	ctx := t.Context()
	bound, err := js.KeyValue(ctx, bus.BucketRequests)
	if err != nil {
		t.Fatal(err)
	}
	d := bus.NewDirectKV(js, bus.BucketRequests)

	if _, err := d.Get(ctx, "health.none"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	rev, err := d.Create(ctx, "health.a", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create(ctx, "health.a", []byte("again")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("second create: %v", err)
	}
	if e, err := bound.Get(ctx, "health.a"); err != nil || string(e.Value()) != "one" || e.Revision() != rev {
		t.Fatalf("bucket sees %v %v", e, err)
	}
	if _, err := d.Update(ctx, "health.a", []byte("stale"), rev+100); err == nil {
		t.Fatal("update at a wrong revision went through")
	}
	rev2, err := d.Update(ctx, "health.a", []byte("two"), rev)
	if err != nil {
		t.Fatal(err)
	}
	e, err := d.Get(ctx, "health.a")
	if err != nil || string(e.Value()) != "two" || e.Revision() != rev2 || e.Key() != "health.a" {
		t.Fatalf("read back %v %v", e, err)
	}
	if _, err := bound.Put(ctx, "health.b", []byte("by the bucket")); err != nil {
		t.Fatal(err)
	}
	if e, err := d.Get(ctx, "health.b"); err != nil || string(e.Value()) != "by the bucket" {
		t.Fatalf("read %v %v", e, err)
	}
	if err := bound.Delete(ctx, "health.b"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(ctx, "health.b"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("deleted key: %v", err)
	}
	if _, err := d.Put(ctx, "health.c", []byte("put")); err != nil {
		t.Fatal(err)
	}
}
