package bus_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/envelope"
)

// A file goes into herald_files chunk by chunk and comes back whole, with
// its size and sha256; one over the limit, a changed chunk and a missing
// one are refused, each saying why.
func TestFileRoundTrip(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	ctx := context.Background()
	data := make([]byte, 3*bus.FileChunk+1234)
	_, _ = rand.Read(data)
	want := sha256.Sum256(data)

	subject := bus.FileOutSubject("health", "obj1")
	sum, err := bus.PutFile(ctx, js, subject, bytes.NewReader(data), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Size != int64(len(data)) || sum.SHA256 != hex.EncodeToString(want[:]) || !bytes.Equal(sum.Head, data[:512]) {
		t.Fatalf("sum = %d %s, want %d %x", sum.Size, sum.SHA256, len(data), want)
	}
	var got bytes.Buffer
	if err := bus.GetFile(ctx, nc, subject, sum.Size, sum.SHA256, &got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("read %d bytes, not the %d written", got.Len(), len(data))
	}
	// The Object Store's own client opens the stream as the bucket.
	if _, err := js.ObjectStore(ctx, bus.BucketFiles); err != nil {
		t.Errorf("herald_files is not an Object Store bucket: %v", err)
	}

	if _, err := bus.PutFile(ctx, js, bus.FileOutSubject("health", "big"), bytes.NewReader(data), int64(len(data)-1)); !errors.Is(err, envelope.ErrValidation) {
		t.Errorf("a file over the limit: %v, want a validation error", err)
	}

	// A chunk written again with other bytes: the file no longer matches.
	if _, err := js.Publish(ctx, subject+".1", bytes.Repeat([]byte{'x'}, bus.FileChunk)); err != nil {
		t.Fatal(err)
	}
	if err := bus.GetFile(ctx, nc, subject, sum.Size, sum.SHA256, &bytes.Buffer{}); err == nil {
		t.Error("a changed file was read back without complaint")
	}
	if err := bus.GetFile(ctx, nc, bus.FileOutSubject("health", "never"), 10, sum.SHA256, &bytes.Buffer{}); !errors.Is(err, envelope.ErrNotFound) {
		t.Errorf("a file never written: %v, want not_found", err)
	}
}

// A full herald_files refuses a new file with ErrFilesFull, an answer a
// caller can give on, rather than dropping one kept.
func TestFilesFull(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	ctx := context.Background()
	s, err := js.Stream(ctx, bus.StreamFiles)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxBytes = 3 * bus.FileChunk
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 2*bus.FileChunk)
	if _, err := bus.PutFile(ctx, js, bus.FileOutSubject("health", "a"), bytes.NewReader(data), 1<<20); err != nil {
		t.Fatal(err)
	}
	_, err = bus.PutFile(ctx, js, bus.FileOutSubject("health", "b"), bytes.NewReader(data), 1<<20)
	if !errors.Is(err, bus.ErrFilesFull) || !errors.Is(err, envelope.ErrOverload) {
		t.Fatalf("a file into a full store: %v, want ErrFilesFull", err)
	}
	if n := bustest.Msgs(t, js, bus.StreamFiles); n < 2 {
		t.Errorf("the full store kept %d chunks of the first file, want 2", n)
	}
}

// A held file (an email's part, a web chat upload) is named by its Ref and
// read back whole under its integration only; a ref of another integration,
// or one that is not a held file's, is refused.
func TestHeldFile(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	ctx := context.Background()
	data := bytes.Repeat([]byte("%PDF-1.7 held\n"), 20000)
	ref, sum, err := bus.HoldFile(ctx, js, "mail_in", bytes.NewReader(data), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bus.Held(ref) || sum.Size != int64(len(data)) {
		t.Fatalf("ref %q, size %d", ref, sum.Size)
	}
	var got bytes.Buffer
	if err := bus.GetHeld(ctx, nc, "mail_in", ref, sum.Size, &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("read back %d bytes, %v", got.Len(), err)
	}
	if err := bus.GetHeld(ctx, nc, "other", ref, sum.Size, &bytes.Buffer{}); !errors.Is(err, envelope.ErrNotFound) {
		t.Errorf("another integration's read: %v, want not_found", err)
	}
	if err := bus.GetHeld(ctx, nc, "mail_in", "BQACAgIAAxkBAAI", 10, &bytes.Buffer{}); !errors.Is(err, envelope.ErrValidation) {
		t.Errorf("a provider's ref: %v, want a validation error", err)
	}
}
