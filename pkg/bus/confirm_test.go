package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/testkit"
)

// TestAckWaitsForConfirms: a handler's message is acked only once what the
// handler published without waiting (bus.Confirms) is confirmed; one NATS
// did not confirm leaves the message to be redelivered and redone.
func TestAckWaitsForConfirms(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	confirms := make(chan func(error), 4)
	var tries atomic.Int32
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", AckWait: time.Second,
		Handle: func(ctx context.Context, _ jetstream.Msg) error {
			tries.Add(1)
			confirms <- bus.ConfirmsOf(ctx).Add()
			return nil
		},
	})
	if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte("x"), "k1", nil); err != nil {
		t.Fatal(err)
	}
	first := <-confirms
	time.Sleep(300 * time.Millisecond) // past the ack linger
	if n := bustest.Msgs(t, js, bus.StreamDeliver); n != 1 {
		t.Fatalf("%d messages in the work queue while its record is unconfirmed, want 1 (not acked)", n)
	}
	first(errors.New("no space left on device"))
	second := <-confirms // redelivered after its ack wait, and redone
	if n := tries.Load(); n != 2 {
		t.Fatalf("handled %d times, want 2", n)
	}
	second(nil)
	testkit.Eventually(t, 5*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeliver) == 0 }, "the message to be acked once confirmed")
}

// TestConfirmsThen: Then reports at once when nothing is pending, once
// everything is confirmed, at the first failure, or when its wait passes.
func TestConfirmsThen(t *testing.T) {
	for _, tt := range []struct {
		name    string
		adds    int
		confirm []error // one per add, in order; fewer leaves the rest pending
		wantErr bool
	}{
		{name: "none pending", adds: 0},
		{name: "all confirmed", adds: 3, confirm: []error{nil, nil, nil}},
		{name: "one refused", adds: 2, confirm: []error{nil, errors.New("refused")}, wantErr: true},
		{name: "one never answered", adds: 2, confirm: []error{nil}, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &bus.Confirms{}
			var fs []func(error)
			for range tt.adds {
				fs = append(fs, c.Add())
			}
			got := make(chan error, 1)
			c.Then(100*time.Millisecond, func(err error) { got <- err })
			for i, err := range tt.confirm {
				fs[i](err)
				fs[i](fmt.Errorf("a second answer is ignored"))
			}
			select {
			case err := <-got:
				if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, bus.ErrUnconfirmed)) {
					t.Fatalf("Then reported %v, want error %v (ErrUnconfirmed)", err, tt.wantErr)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Then never reported")
			}
			if len(got) != 0 {
				t.Fatal("Then reported twice")
			}
		})
	}
}
