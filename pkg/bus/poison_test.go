package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
)

// TestRetriesHoldNothingOthersNeed: hundreds of routes of one butler
// failing for a reason a retry can fix (its store down for now) wait for
// their retries without holding the consumer: another butler's route,
// stored after all of them, is handled while they wait. Before issue 37 a
// message waiting for its retry held one of the consumer's 256 ack-pending
// slots (nats-server keeps a nak's delay in its pending list), and the other
// butler's route was not delivered until the flood's horizon (24 h).
func TestRetriesHoldNothingOthersNeed(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	const flood = 300 // more than the 256 slots a bounded consumer had
	var failed, others atomic.Int32
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamRoute, Durable: bus.ConsumerSwitchboard, Log: slog.New(slog.DiscardHandler),
		Handle: func(_ context.Context, m jetstream.Msg) error {
			if m.Subject() == bus.RoutePrefix+"alpha" {
				failed.Add(1)
				return fmt.Errorf("%w: alpha's store is down for now", envelope.ErrTargetUnavailable)
			}
			others.Add(1)
			return nil
		},
	})
	for i := range flood {
		if _, err := bus.Publish(t.Context(), js, bus.RoutePrefix+"alpha", []byte("x"), fmt.Sprintf("alpha-%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The flood is under way: as many failed tries as it has messages,
	// each waiting a second or more for its retry.
	testkit.Eventually(t, 15*time.Second, func() bool { return failed.Load() >= flood }, "alpha's routes failing")
	if _, err := bus.Publish(t.Context(), js, bus.RoutePrefix+"beta", []byte("x"), "beta-1", nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return others.Load() == 1 }, "beta's route handled while alpha's wait for their retries")
	if n := bustest.Msgs(t, js, bus.StreamDeadLetter); n != 0 {
		t.Fatalf("%d dead letters: a retryable failure was given up before its horizon", n)
	}
}

// TestInvalidKeyIsNotRetried: a handler's error that a retry cannot fix is
// given up at once even when the code around it called it retryable: a KV
// write NATS refuses for its key ("nats: invalid key", what an empty chat
// made of a question's record) wrapped as target_unavailable is answered
// (GiveUp) as internal_error and dead-lettered after one try, not retried
// for retry_for.
func TestInvalidKeyIsNotRetried(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	var tries atomic.Int32
	var gaveUp atomic.Value
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamRoute, Durable: bus.ConsumerSwitchboard, MinBackOff: 10 * time.Millisecond, Log: slog.New(slog.DiscardHandler),
		Handle: func(context.Context, jetstream.Msg) error {
			tries.Add(1)
			return fmt.Errorf("%w: recording question qabcdefghi: %w", envelope.ErrTargetUnavailable, jetstream.ErrInvalidKey)
		},
		GiveUp: func(_ context.Context, _ jetstream.Msg, err error) { gaveUp.Store(err) },
	})
	if _, err := bus.Publish(t.Context(), js, bus.RoutePrefix+"alpha", []byte("x"), "k-invalid", nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeadLetter) == 1 }, "the dead letter")
	if n := tries.Load(); n != 1 {
		t.Fatalf("tried %d times; a retry cannot fix an invalid key", n)
	}
	err, _ := gaveUp.Load().(error)
	if envelope.Retryable(err) || envelope.ClassOf(err) != envelope.ErrInternal.Error() || !errors.Is(err, jetstream.ErrInvalidKey) {
		t.Fatalf("GiveUp got %v (class %s), want internal_error around the invalid key", err, envelope.ClassOf(err))
	}
	s, _ := js.Stream(t.Context(), bus.StreamDeadLetter)
	m, err := s.GetLastMsgForSubject(t.Context(), bus.DeadSubject(bus.StreamRoute, bus.RoutePrefix+"alpha"))
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Header.Get(bus.HeaderErrorClass); c != "internal_error" {
		t.Fatalf("dead letter class %q, want internal_error", c)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamRoute) == 0 }, "the work queue to be empty")
}
