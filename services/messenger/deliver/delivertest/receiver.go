package delivertest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// ReceiverFeatures say what a receiver can do; the suite skips what it
// cannot.
type ReceiverFeatures struct {
	// Threads: ReceiverHarness.SendInThread delivers a message in a
	// thread, and its ingress names it (meta thread_id).
	Threads bool
	// Refuses: ReceiverHarness.Refuse delivers something the receiver must
	// refuse (a bad signature, an auto-reply, a foreign Host), which it
	// records as dropped.
	Refuses bool
	// DropsInvalid: a message the sink refuses as invalid
	// (envelope.ErrValidation) is recorded as dropped, and the receiver goes
	// on without offering it again by itself.
	DropsInvalid bool
}

// ReceiverHarness adapts one channel's receiver to the suite.
type ReceiverHarness struct {
	// Start builds a receiver talking to a fresh fake provider and runs it
	// with sink until the test ends (Receive does that); it returns once
	// Send can reach it.
	Start func(t *testing.T, sink *Sink)
	// Send makes the provider deliver text from Sender, and returns
	// redeliver, which makes it deliver the very same message again, as
	// the provider does when the receiver did not confirm it (a webhook's
	// retry, a mail server's retry after 451, a page posting again). For a
	// receiver that fetches again by itself what it did not confirm (a
	// poller), redeliver does nothing.
	Send func(t *testing.T, text string) (redeliver func(t *testing.T))
	// Sender returns the source_sender_identity of what Send delivers
	// (after Start).
	Sender   func() string
	Features ReceiverFeatures
	// SendInThread makes the provider deliver text as a message in a
	// thread (Threads).
	SendInThread func(t *testing.T, text string)
	// Refuse makes the provider deliver something the receiver must refuse
	// (Refuses).
	Refuse func(t *testing.T)
}

// snakeCase is the shape of a drop reason.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// waitFor is how long the suite waits for a receiver to act.
const waitFor = 20 * time.Second

// RunReceiver runs the receiver suite.
func RunReceiver(t *testing.T, h ReceiverHarness) {
	runIngress(t, h)
	runReceiveThreads(t, h)
	runRefuses(t, h)
	runDropsInvalid(t, h)
}

// runIngress: a message is stored once, as one ingress with one native id,
// however often the provider delivers it.
func runIngress(t *testing.T, h ReceiverHarness) {
	t.Run("a message is one ingress with its sender, native id and meta", func(t *testing.T) {
		sink := NewSink()
		h.Start(t, sink)
		h.Send(t, "hello from the suite")
		in := sink.WaitStored(t, 1)[0]
		checkIngress(t, in, "hello from the suite", h.Sender())
		sink.Wait(t, "a running status", func() bool {
			for _, s := range sink.Statuses() {
				if s.State == deliver.StateRunning {
					return true
				}
			}
			return false
		})
	})

	t.Run("a message the sink did not store is delivered again with the same native id", func(t *testing.T) {
		sink := NewSink()
		sink.FailNext(1, errors.New("bus down"))
		h.Start(t, sink)
		redeliver := h.Send(t, "store me")
		sink.Wait(t, "the failed attempt", func() bool { return len(sink.Attempts()) >= 1 })
		redeliver(t)
		stored := sink.WaitStored(t, 1)
		checkOneNativeID(t, sink.Attempts())
		if stored[0].Content.Text != "store me" {
			t.Errorf("stored %q, want %q", stored[0].Content.Text, "store me")
		}
	})

	t.Run("a message delivered twice has one native id", func(t *testing.T) {
		sink := NewSink()
		h.Start(t, sink)
		redeliver := h.Send(t, "twice")
		sink.WaitStored(t, 1)
		redeliver(t)
		h.Send(t, "after")
		sink.Wait(t, "the next message", func() bool {
			s := sink.Stored()
			return len(s) > 0 && s[len(s)-1].Content.Text == "after"
		})
		var twice []*envelope.Ingress
		for _, in := range sink.Attempts() {
			if in.Content.Text == "twice" {
				twice = append(twice, in)
			}
		}
		checkOneNativeID(t, twice)
	})
}

// runReceiveThreads: a message in a thread names it (Threads).
func runReceiveThreads(t *testing.T, h ReceiverHarness) {
	if lacks(t, h.Features.Threads, "Threads", "the channel has no threads") {
		return
	}
	t.Run("a message in a thread names it", func(t *testing.T) {
		sink := NewSink()
		h.Start(t, sink)
		h.SendInThread(t, "in a thread")
		in := sink.WaitStored(t, 1)[0]
		checkIngress(t, in, "in a thread", h.Sender())
		if in.Meta["thread_id"] == "" || in.RequestContext.SourceThreadIdentity == "" {
			t.Errorf("meta thread_id %q, source_thread_identity %q; want both set", in.Meta["thread_id"], in.RequestContext.SourceThreadIdentity)
		}
	})
}

// runRefuses: what the receiver must refuse is dropped with a reason
// (Refuses).
func runRefuses(t *testing.T, h ReceiverHarness) {
	if lacks(t, h.Features.Refuses, "Refuses", "the channel refuses nothing on arrival") {
		return
	}
	t.Run("what the receiver must refuse is dropped with a reason", func(t *testing.T) {
		sink := NewSink()
		h.Start(t, sink)
		h.Refuse(t)
		drops := sink.WaitDropped(t, 1)
		checkReason(t, drops[0])
		if got := sink.Stored(); len(got) != 0 {
			t.Errorf("stored %d ingresses of a refused message", len(got))
		}
	})
}

// runDropsInvalid: a message the sink refuses as invalid is dropped, and
// the receiver goes on (DropsInvalid).
func runDropsInvalid(t *testing.T, h ReceiverHarness) {
	if lacks(t, h.Features.DropsInvalid, "DropsInvalid", "the channel answers an invalid message to its sender instead") {
		return
	}
	t.Run("a message the sink refuses as invalid is dropped, and the next one stored", func(t *testing.T) {
		sink := NewSink()
		sink.FailNext(1, fmt.Errorf("%w: the suite refuses it", envelope.ErrValidation))
		h.Start(t, sink)
		// No redeliver: a provider retrying it is refused again by the
		// bus; what matters is that the receiver goes on by itself.
		h.Send(t, "invalid")
		checkReason(t, sink.WaitDropped(t, 1)[0])
		h.Send(t, "valid")
		sink.Wait(t, "the next message", func() bool {
			s := sink.Stored()
			return len(s) > 0 && s[len(s)-1].Content.Text == "valid"
		})
		for _, in := range sink.Stored() {
			if in.Content.Text == "invalid" {
				t.Errorf("the invalid message was stored after it was dropped")
			}
		}
	})
}

// Receive runs r with sink until the test ends, and returns once r reports
// that it is running.
func Receive(t *testing.T, r deliver.Receiver, sink *Sink) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Receive(ctx, sink) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Receive: %v", err)
		}
	})
	sink.Wait(t, "a running status", func() bool {
		for _, st := range sink.Statuses() {
			if st.State == deliver.StateRunning {
				return true
			}
		}
		return false
	})
}

func checkIngress(t *testing.T, in *envelope.Ingress, text, sender string) {
	t.Helper()
	if err := envelope.Check(schemas.Ingress, in); err != nil {
		t.Errorf("not a valid ingress.v1: %v", err)
	}
	rc := in.RequestContext
	if in.Content.Text != text {
		t.Errorf("text %q, want %q", in.Content.Text, text)
	}
	if rc.SourceSenderIdentity != sender {
		t.Errorf("source_sender_identity %q, want %q", rc.SourceSenderIdentity, sender)
	}
	if in.NativeID == "" || in.IntegrationID == "" || rc.SourceChannel == "" || rc.SourceEndpointIdentity == "" || rc.SourceThreadIdentity == "" || rc.RequestID == "" {
		t.Errorf("native_id %q, integration %q, request_context %+v: want all set", in.NativeID, in.IntegrationID, rc)
	}
	for _, k := range []string{"chat_id", "user_id", "message_id"} {
		if in.Meta[k] == "" {
			t.Errorf("meta %s missing: %v", k, in.Meta)
		}
	}
}

func checkOneNativeID(t *testing.T, ins []*envelope.Ingress) {
	t.Helper()
	if len(ins) == 0 {
		t.Fatal("no ingress")
	}
	for _, in := range ins[1:] {
		if in.NativeID != ins[0].NativeID {
			t.Fatalf("one message offered with native ids %q and %q: the sink cannot deduplicate it", ins[0].NativeID, in.NativeID)
		}
	}
}

func checkReason(t *testing.T, d Drop) {
	t.Helper()
	if !snakeCase.MatchString(d.Reason) {
		t.Errorf("dropped with reason %q, want a short snake_case reason", d.Reason)
	}
	if d.Ingress == nil {
		t.Errorf("dropped with no ingress (partly filled will do)")
	}
}

// Drop is one call of Sink.Dropped.
type Drop struct {
	Ingress *envelope.Ingress
	Reason  string
}

// Sink is a deliver.Sink that records what a receiver hands it and can be
// told to fail.
type Sink struct {
	// Before, if set, runs first on every Ingress, with the sink locked;
	// its error refuses the ingress (an attempt, not stored). Set it before
	// the sink is used.
	Before func(in *envelope.Ingress) error

	changed  testkit.Signal
	mu       sync.Mutex
	attempts []*envelope.Ingress
	stored   []*envelope.Ingress
	drops    []Drop
	statuses []deliver.Status
	fails    []error
}

// NewSink returns an empty Sink.
func NewSink() *Sink { return &Sink{} }

// FailNext makes the next n calls of Ingress return err.
func (s *Sink) FailNext(n int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fails = append(s.fails, err)
	}
}

// Ingress records in, stored unless a failure was asked for.
func (s *Sink) Ingress(_ context.Context, in *envelope.Ingress) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed.Notify()
	s.attempts = append(s.attempts, in)
	if s.Before != nil {
		if err := s.Before(in); err != nil {
			return err
		}
	}
	if len(s.fails) > 0 {
		err := s.fails[0]
		s.fails = s.fails[1:]
		return err
	}
	s.stored = append(s.stored, in)
	return nil
}

// Dropped records a drop.
func (s *Sink) Dropped(_ context.Context, in *envelope.Ingress, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed.Notify()
	s.drops = append(s.drops, Drop{Ingress: in, Reason: reason})
}

// Status records a status.
func (s *Sink) Status(st deliver.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed.Notify()
	s.statuses = append(s.statuses, st)
}

// Attempts is every ingress offered, stored or not.
func (s *Sink) Attempts() []*envelope.Ingress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*envelope.Ingress(nil), s.attempts...)
}

// Stored is every ingress stored.
func (s *Sink) Stored() []*envelope.Ingress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*envelope.Ingress(nil), s.stored...)
}

// Drops is every drop.
func (s *Sink) Drops() []Drop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Drop(nil), s.drops...)
}

// Reasons is the reason of every drop.
func (s *Sink) Reasons() []string {
	var out []string
	for _, d := range s.Drops() {
		out = append(out, d.Reason)
	}
	return out
}

// StateAfter reports whether a status with state (and detail, unless "")
// was reported after the first one with state after.
func (s *Sink) StateAfter(after, state, detail string) bool {
	st := s.Statuses()
	i := slices.IndexFunc(st, func(s deliver.Status) bool { return s.State == after })
	return i >= 0 && slices.ContainsFunc(st[i+1:], func(s deliver.Status) bool {
		return s.State == state && (detail == "" || s.Detail == detail)
	})
}

// Statuses is every status reported.
func (s *Sink) Statuses() []deliver.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]deliver.Status(nil), s.statuses...)
}

// Wait waits until cond holds, failing the test after a while.
func (s *Sink) Wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !s.changed.Wait(waitFor, cond) {
		t.Fatalf("no %s after %s: %d offered, %d stored, drops %v", what, waitFor, len(s.Attempts()), len(s.Stored()), s.Drops())
	}
}

// WaitStored waits until n ingresses are stored and returns them.
func (s *Sink) WaitStored(t testing.TB, n int) []*envelope.Ingress {
	t.Helper()
	s.Wait(t, fmt.Sprintf("%d stored", n), func() bool { return len(s.Stored()) >= n })
	return s.Stored()
}

// WaitDropped waits until n drops are recorded and returns them.
func (s *Sink) WaitDropped(t testing.TB, n int) []Drop {
	t.Helper()
	s.Wait(t, fmt.Sprintf("%d dropped", n), func() bool { return len(s.Drops()) >= n })
	return s.Drops()
}
