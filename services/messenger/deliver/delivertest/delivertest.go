// Package delivertest is the conformance suite every channel passes: the same
// behaviours, run against each deliver.Sender with its provider faked at the
// wire.
package delivertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Harness adapts one channel to the suite.
type Harness struct {
	// New returns a sender whose default recipient is set, talking to a
	// fresh fake provider.
	New func(t *testing.T) deliver.Sender
	// Delivered returns the text of every message the provider accepted, in
	// order (the rendered text as the provider saw it).
	Delivered func(t *testing.T) []string
	// CanReact says whether the channel supports intent react.
	CanReact bool
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("send reaches the provider and every chunk is reported", func(t *testing.T) {
		s := h.New(t)
		var sent []string
		r, err := s.Deliver(t.Context(), deliver.Delivery{Key: key(1), Intent: envelope.IntentSend, Butler: "health", Message: "Dose **taken** at 08:00", Urgency: "normal", Sent: func(id string) error {
			sent = append(sent, id)
			return nil
		}})
		if err != nil {
			t.Fatalf("deliver: %v", err)
		}
		if len(r.MessageIDs) == 0 || !slices.Equal(r.MessageIDs, sent) {
			t.Fatalf("receipt %v, Sent called with %v: want the same ids, one per chunk", r.MessageIDs, sent)
		}
		got := h.Delivered(t)
		if len(got) != 1 || !strings.Contains(got[0], "taken") || !strings.Contains(got[0], "08:00") {
			t.Fatalf("provider received %q", got)
		}
	})

	t.Run("a retry after everything was sent sends nothing", func(t *testing.T) {
		s := h.New(t)
		d := deliver.Delivery{Key: key(2), Intent: envelope.IntentSend, Butler: "health", Message: "only once", Urgency: "normal"}
		first, err := s.Deliver(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		d.Done = first.MessageIDs
		again, err := s.Deliver(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(h.Delivered(t)); n != 1 {
			t.Fatalf("provider received %d messages, want 1", n)
		}
		if !slices.Equal(again.MessageIDs, first.MessageIDs) {
			t.Fatalf("retry receipt %v, want %v", again.MessageIDs, first.MessageIDs)
		}
	})

	t.Run("a failing progress record stops the delivery", func(t *testing.T) {
		s := h.New(t)
		stop := errors.New("ledger down")
		_, err := s.Deliver(t.Context(), deliver.Delivery{Key: key(3), Intent: envelope.IntentSend, Butler: "health", Message: "x", Urgency: "normal", Sent: func(string) error { return stop }})
		if err == nil && len(h.Delivered(t)) == 0 {
			t.Fatal("nothing delivered and no error")
		}
	})

	if !h.CanReact {
		t.Run("react is refused as a validation error", func(t *testing.T) {
			_, err := h.New(t).Deliver(t.Context(), deliver.Delivery{Key: key(4), Intent: envelope.IntentReact, Butler: "health", Emoji: "👍", Thread: "1:2"})
			if envelope.ClassOf(err) != "validation_error" {
				t.Fatalf("react: %v, want a validation_error", err)
			}
			if n := len(h.Delivered(t)); n != 0 {
				t.Fatalf("provider received %d messages for a refused react", n)
			}
		})
	}

	t.Run("a cancelled context does not report success", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := h.New(t).Deliver(ctx, deliver.Delivery{Key: key(5), Intent: envelope.IntentSend, Butler: "health", Message: "too late", Urgency: "normal"})
		if err == nil {
			t.Fatal("delivered on a cancelled context")
		}
	})
}

func key(i int) string { return strings.Repeat(string(rune('a'+i)), 64) }
