// Package delivertest is the conformance suite every channel passes, one per
// side: Run holds the behaviours every deliver.Sender must have, RunReceiver
// those of every deliver.Receiver, each run with the provider faked at the
// wire. A channel says through Features what it can do (split long messages,
// react, thread, inject faults); the suite runs what applies and skips the
// rest by name, so a missing capability shows in the test output.
package delivertest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Features say what a sender can do; the suite skips what it cannot.
type Features struct {
	// Chunks: the channel splits a long message into several, and
	// Harness.LongMessage makes one of exactly n chunks.
	Chunks bool
	// Recipients: the channel sends to Harness.Recipient when a delivery
	// names it and to Harness.DefaultRecipient otherwise, and
	// Harness.DeliveredTo says where each message went.
	Recipients bool
	// Threads: a reply to Harness.Thread lands in that thread
	// (Harness.InThread).
	Threads bool
	// React: intent react sets a reaction on Harness.Thread's message
	// (Harness.Reactions); a channel without it refuses react as a
	// validation error.
	React bool
	// Faults are the provider failures Harness.Fail can inject.
	Faults []Fault
	// NoAnswer: the fake can take a message and then hold its answer
	// (Harness.Stall) or reset the connection instead (Harness.HangUp),
	// and can be down (Harness.Down); the sender's calls can time out
	// (Harness.NewTimeout). A message taken without the sender hearing so
	// must be a timeout, the class the messenger treats as uncertain; one
	// that never reached the provider, or that it refused, is
	// target_unavailable and is simply retried. Needs FaultUnavailable.
	NoAnswer bool
	// APIURL: the sender talks to the provider at an api_url
	// (Harness.NewAt). A redirect from it is not followed, and an api_url
	// that is not the provider's is said to be wrong.
	APIURL bool
	// RefusesEmpty: a message with nothing to show (blank, an empty code
	// block) is refused as a validation error, and no call is made.
	RefusesEmpty bool
	// Files: a delivery's files reach the provider as its wire carries
	// them (Harness.Uploaded), each provider call a chunk like a message's.
	Files bool
}

// Fault is a provider failure a harness injects into its fake.
type Fault int

// Faults, each with the class the sender must report.
const (
	// FaultRefused: the provider refuses the message itself (a bad
	// request); class validation_error.
	FaultRefused Fault = iota + 1
	// FaultNoRecipient: the provider does not know the recipient, or will
	// not let the sender write to it; class not_found or forbidden.
	FaultNoRecipient
	// FaultUnavailable: the provider fails (a 5xx, a 421); class
	// target_unavailable.
	FaultUnavailable
	// FaultRateLimit: the provider says to come back in RetryAfter; an
	// *envelope.RetryAfterError with that Wait, class overload_rejected.
	FaultRateLimit
)

// RetryAfter is the wait a FaultRateLimit asks for: longer than any sender
// waits out by itself, so the delivery is handed back.
const RetryAfter = 120 * time.Second

func (f Fault) String() string {
	switch f {
	case FaultRefused:
		return "refused"
	case FaultNoRecipient:
		return "no recipient"
	case FaultUnavailable:
		return "unavailable"
	case FaultRateLimit:
		return "rate limit"
	}
	return "unknown fault"
}

// classes are what a sender may report for each fault.
var classes = map[Fault][]string{
	FaultRefused:     {"validation_error"},
	FaultNoRecipient: {"not_found", "forbidden"},
	FaultUnavailable: {"target_unavailable"},
	FaultRateLimit:   {"overload_rejected"},
}

// Harness adapts one channel's sender to the suite.
type Harness struct {
	// New returns a sender whose default recipient is set, talking to a
	// fresh fake provider; if nil, NewTimeout with no timeout (0, the
	// channel's own).
	New func(t *testing.T) deliver.Sender
	// Delivered returns the text of every message the provider accepted, in
	// order (the rendered text as the provider saw it); reactions are not
	// messages.
	Delivered func(t *testing.T) []string
	Features  Features

	// LongMessage returns markdown the channel sends as exactly n chunks
	// (Chunks).
	LongMessage func(n int) string
	// DefaultRecipient is where New's sender sends a delivery without a
	// recipient, as DeliveredTo names it (Recipients).
	DefaultRecipient string
	// Recipient returns another recipient the fake accepts, as DeliveredTo
	// names it (Recipients).
	Recipient func(t *testing.T) string
	// DeliveredTo returns the recipient of every message the provider
	// accepted, in order (Recipients).
	DeliveredTo func(t *testing.T) []string
	// Thread returns the source_thread_identity of a message the fake knows,
	// to reply or react to (Threads, React).
	Thread func(t *testing.T) string
	// InThread reports, for every message the provider accepted, whether it
	// landed in the thread of Thread (Threads).
	InThread func(t *testing.T) []bool
	// Reactions returns how many reactions the provider accepted (React).
	Reactions func(t *testing.T) int
	// Fail makes the fake's next provider call fail with f (Faults).
	Fail func(t *testing.T, f Fault)

	// NewTimeout is New with the sender's calls to the provider timing out
	// after timeout (NoAnswer).
	NewTimeout func(t *testing.T, timeout time.Duration) deliver.Sender
	// Stall makes the fake take the next message and hold its answer until
	// release is closed (NoAnswer).
	Stall func(t *testing.T, release <-chan struct{})
	// HangUp makes the fake take the next message and then reset the
	// connection instead of answering (NoAnswer).
	HangUp func(t *testing.T)
	// Down makes the fake unreachable (NoAnswer).
	Down func(t *testing.T)

	// NewAt is New with the sender's api_url set to url, a provider
	// elsewhere (APIURL).
	NewAt func(t *testing.T, url string) deliver.Sender
	// NotJSON, if set, is what the sender's error says of an answer that is
	// not the provider's JSON, such as a login page; the suite then checks
	// that an api_url answering 404 is not_found naming api_url, and one
	// answering a page is target_unavailable saying NotJSON (APIURL).
	NotJSON string

	// Calls, if set, returns how many calls the provider received,
	// accepted or not (RefusesEmpty; else Delivered counts).
	Calls func(t *testing.T) int

	// Uploaded returns every file the provider took, in order (Files).
	Uploaded func(t *testing.T) []Upload

	// Secrets, if set, returns what no error of the sender may show: a
	// token, a password, the secret part of a URL.
	Secrets func(t *testing.T) []string
}

// Run runs the sender suite.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		h.New = func(t *testing.T) deliver.Sender { return h.NewTimeout(t, 0) }
	}
	runSend(t, h)
	runChunks(t, h)
	runRecipients(t, h)
	runThreads(t, h)
	runReact(t, h)
	runFaults(t, h)
	runNoAnswer(t, h)
	runAPIURL(t, h)
	runRefusesEmpty(t, h)
	runFiles(t, h)
	runCancelled(t, h)
}

// runSend holds what every send does: reach the provider, report every
// message, and stop cleanly when the ledger fails.
func runSend(t *testing.T, h Harness) {
	t.Run("send reaches the provider and every chunk is reported", func(t *testing.T) {
		s := h.New(t)
		var sent []string
		r, err := s.Deliver(t.Context(), send(1, "Dose **taken** at 08:00", func(id string) error {
			sent = append(sent, id)
			return nil
		}))
		if err != nil {
			t.Fatalf("deliver: %v", err)
		}
		if len(r.MessageIDs) != 1 || !slices.Equal(r.MessageIDs, sent) || r.MessageIDs[0] == "" {
			t.Fatalf("receipt %v, Sent called with %v: want the same one id", r.MessageIDs, sent)
		}
		got := h.Delivered(t)
		if len(got) != 1 || !strings.Contains(got[0], "taken") || !strings.Contains(got[0], "08:00") {
			t.Fatalf("provider received %q", got)
		}
	})

	t.Run("a retry after everything was sent sends nothing", func(t *testing.T) {
		s := h.New(t)
		d := send(2, "only once", nil)
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

	t.Run("a failing Begin sends nothing", func(t *testing.T) {
		s := h.New(t)
		stop := errors.New("ledger down")
		d := send(3, "never", nil)
		d.Begin = func() error { return stop }
		_, err := s.Deliver(t.Context(), d)
		if !errors.Is(err, stop) {
			t.Fatalf("deliver: %v, want Begin's error", err)
		}
		if got := h.Delivered(t); len(got) != 0 {
			t.Fatalf("provider received %q after Begin failed", got)
		}
	})

	t.Run("a failing progress record stops the delivery", func(t *testing.T) {
		s := h.New(t)
		md := "x"
		if h.Features.Chunks {
			md = h.LongMessage(3)
		}
		stop := errors.New("ledger down")
		calls := 0
		_, err := s.Deliver(t.Context(), send(4, md, func(string) error { calls++; return stop }))
		if !errors.Is(err, stop) {
			t.Fatalf("deliver: %v, want the progress record's error", err)
		}
		if got := h.Delivered(t); len(got) != 1 || calls != 1 {
			t.Fatalf("provider received %d messages, Sent called %d times; want the first chunk only", len(got), calls)
		}
	})
}

// runChunks: a long message goes out in chunks, and a resumed delivery
// sends only those not done (Chunks).
func runChunks(t *testing.T, h Harness) {
	if lacks(t, h.Features.Chunks, "Chunks", "the channel sends every message whole") {
		return
	}
	t.Run("a long message goes out in chunks, each reported", func(t *testing.T) {
		s := h.New(t)
		var sent []string
		r, err := s.Deliver(t.Context(), send(5, h.LongMessage(3), func(id string) error { sent = append(sent, id); return nil }))
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Delivered(t); len(got) != 3 || len(r.MessageIDs) != 3 || !slices.Equal(r.MessageIDs, sent) {
			t.Fatalf("provider received %d messages, receipt %v, Sent %v; want 3 chunks, each reported", len(got), r.MessageIDs, sent)
		}
	})

	t.Run("a resumed delivery sends only the chunks not done", func(t *testing.T) {
		md := h.LongMessage(3)
		if _, err := h.New(t).Deliver(t.Context(), send(6, md, nil)); err != nil {
			t.Fatal(err)
		}
		whole := h.Delivered(t)

		s := h.New(t)
		var sent []string
		d := send(6, md, func(id string) error { sent = append(sent, id); return nil })
		d.Done = []string{"earlier-chunk-1"}
		r, err := s.Deliver(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.Delivered(t); !slices.Equal(got, whole[1:]) {
			t.Fatalf("provider received %d messages %.200q, want chunks 2 and 3 of %d", len(got), got, len(whole))
		}
		if len(r.MessageIDs) != 3 || r.MessageIDs[0] != "earlier-chunk-1" || !slices.Equal(r.MessageIDs[1:], sent) {
			t.Fatalf("receipt %v, Sent %v; want the done chunk's id then the two sent", r.MessageIDs, sent)
		}
	})
}

// runRecipients: a delivery goes to its recipient, else to the default
// (Recipients).
func runRecipients(t *testing.T, h Harness) {
	if lacks(t, h.Features.Recipients, "Recipients", "the channel has one recipient") {
		return
	}
	t.Run("a delivery goes to its recipient, else to the default", func(t *testing.T) {
		s := h.New(t)
		if _, err := s.Deliver(t.Context(), send(7, "to the default", nil)); err != nil {
			t.Fatal(err)
		}
		d := send(8, "to someone else", nil)
		d.Recipient = h.Recipient(t)
		if _, err := s.Deliver(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		if got, want := h.DeliveredTo(t), []string{h.DefaultRecipient, d.Recipient}; !slices.Equal(got, want) {
			t.Fatalf("messages went to %q, want %q", got, want)
		}
	})
}

// runThreads: a reply lands in its thread (Threads).
func runThreads(t *testing.T, h Harness) {
	if lacks(t, h.Features.Threads, "Threads", "the channel has no threads") {
		return
	}
	t.Run("a reply lands in the thread it answers", func(t *testing.T) {
		s := h.New(t)
		if _, err := s.Deliver(t.Context(), send(9, "not a reply", nil)); err != nil {
			t.Fatal(err)
		}
		d := send(10, "a reply", nil)
		d.Intent, d.Thread = envelope.IntentReply, h.Thread(t)
		if _, err := s.Deliver(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		if got := h.InThread(t); !slices.Equal(got, []bool{false, true}) {
			t.Fatalf("in the thread: %v, want [false true] (the send outside it, the reply in it)", got)
		}
	})
}

// runReact: react sets one reaction (React), or is refused.
func runReact(t *testing.T, h Harness) {
	if h.Features.React {
		t.Run("react sets one reaction and sends no message", func(t *testing.T) {
			s := h.New(t)
			d := deliver.Delivery{Key: key(11), Intent: envelope.IntentReact, Butler: "health", Emoji: "👍", Thread: h.Thread(t)}
			r, err := s.Deliver(t.Context(), d)
			if err != nil {
				t.Fatal(err)
			}
			if n := h.Reactions(t); n != 1 {
				t.Fatalf("provider accepted %d reactions, want 1", n)
			}
			if got := h.Delivered(t); len(got) != 0 {
				t.Fatalf("provider received messages %q for a react", got)
			}
			d.Done = r.MessageIDs
			if _, err := s.Deliver(t.Context(), d); err != nil {
				t.Fatal(err)
			}
			if n := h.Reactions(t); n != 1 {
				t.Fatalf("a retry of a done react: %d reactions, want still 1", n)
			}
		})
	} else {
		t.Run("react is refused as a validation error", func(t *testing.T) {
			_, err := h.New(t).Deliver(t.Context(), deliver.Delivery{Key: key(11), Intent: envelope.IntentReact, Butler: "health", Emoji: "👍", Thread: "1:2"})
			if envelope.ClassOf(err) != "validation_error" {
				t.Fatalf("react: %v, want a validation_error", err)
			}
			if n := len(h.Delivered(t)); n != 0 {
				t.Fatalf("provider received %d messages for a refused react", n)
			}
		})
	}
}

// runFaults: each provider fault is reported in its class (Faults).
func runFaults(t *testing.T, h Harness) {
	for _, f := range []Fault{FaultRefused, FaultNoRecipient, FaultUnavailable, FaultRateLimit} {
		if !slices.Contains(h.Features.Faults, f) {
			t.Run("fault "+f.String(), func(t *testing.T) { t.Skip("the fake cannot inject it") })
			continue
		}
		t.Run("fault "+f.String()+" is reported as "+strings.Join(classes[f], " or "), func(t *testing.T) {
			s := h.New(t)
			h.Fail(t, f)
			_, err := s.Deliver(t.Context(), send(12, "x", nil))
			if !slices.Contains(classes[f], envelope.ClassOf(err)) {
				t.Fatalf("deliver: %v (class %s), want class %s", err, envelope.ClassOf(err), strings.Join(classes[f], " or "))
			}
			if f == FaultRateLimit {
				var ra *envelope.RetryAfterError
				if !errors.As(err, &ra) || ra.Wait != RetryAfter {
					t.Fatalf("deliver: %v, want an *envelope.RetryAfterError with Wait %s", err, RetryAfter)
				}
			}
			if got := h.Delivered(t); len(got) != 0 {
				t.Fatalf("provider accepted %q despite the fault", got)
			}
			checkSecrets(t, h, err)
		})
	}
}

// runNoAnswer: a message the provider may have taken without the sender
// hearing so is a timeout (NoAnswer).
func runNoAnswer(t *testing.T, h Harness) {
	if lacks(t, h.Features.NoAnswer, "NoAnswer", "the fake cannot take a message without answering") {
		return
	}
	for _, tt := range []struct {
		name  string
		fault func(t *testing.T)
		class string
		taken int // messages the provider holds afterwards
	}{
		{"a message taken, answered after the sender's timeout, is a timeout", func(t *testing.T) {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			h.Stall(t, release)
		}, "timeout", 1},
		{"a message taken, the connection reset before the answer, is a timeout", h.HangUp, "timeout", 1},
		{"a provider down is target_unavailable", h.Down, "target_unavailable", 0},
		{"a provider failing is target_unavailable", func(t *testing.T) { h.Fail(t, FaultUnavailable) }, "target_unavailable", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := h.NewTimeout(t, 300*time.Millisecond)
			tt.fault(t)
			_, err := s.Deliver(t.Context(), send(14, "Dose taken", nil))
			t.Log(err)
			if got := envelope.ClassOf(err); got != tt.class {
				t.Fatalf("deliver: %v (class %s), want %s", err, got, tt.class)
			}
			if n := len(h.Delivered(t)); n != tt.taken {
				t.Errorf("the provider holds %d messages, want %d", n, tt.taken)
			}
			checkSecrets(t, h, err)
		})
	}
	t.Run("a delivery whose context ends while the provider holds its answer is a timeout", func(t *testing.T) {
		s := h.NewTimeout(t, 0)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		h.Stall(t, release)
		// The deadline passes once the provider holds the message, not at a
		// set time: passed before the message went out, the delivery is
		// rightly target_unavailable, as a loaded machine showed.
		ctx := NewDeadline(t)
		done := make(chan error, 1)
		go func() {
			_, err := s.Deliver(ctx, send(15, "x", nil))
			done <- err
		}()
		testkit.Eventually(t, 10*time.Second, func() bool { return len(h.Delivered(t)) > 0 }, "the provider taking the message")
		ctx.Pass()
		if err := <-done; envelope.ClassOf(err) != "timeout" {
			t.Errorf("deliver: %v, want timeout (the provider may have the message)", err)
		}
	})
}

// runAPIURL: the sender does not follow a redirect from its api_url, and
// names an api_url that is not the provider's (APIURL).
func runAPIURL(t *testing.T, h Harness) {
	if lacks(t, h.Features.APIURL, "APIURL", "the sender has no api_url") {
		return
	}
	t.Run("a redirect from the api_url is not followed", func(t *testing.T) {
		moved := NewMoved(t)
		_, err := h.NewAt(t, moved.URL).Deliver(t.Context(), send(16, "secret plans", nil))
		if envelope.ClassOf(err) != "not_found" || !strings.Contains(err.Error(), "307") || !strings.Contains(err.Error(), moved.Target.URL) || !strings.Contains(err.Error(), "api_url") {
			t.Fatalf("deliver: %v, want not_found naming the 307, where it pointed and api_url", err)
		}
		if n := moved.Followed(); n != 0 {
			t.Fatalf("the redirect was followed %d times", n)
		}
		checkSecrets(t, h, err)
	})
	t.Run("an api_url that is not the provider's is named", func(t *testing.T) {
		if h.NotJSON == "" {
			t.Skip("the harness does not say how the sender names an answer not the provider's")
		}
		other := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(other.Close)
		_, err := h.NewAt(t, other.URL+"/nothing").Deliver(t.Context(), send(17, "x", nil))
		if envelope.ClassOf(err) != "not_found" || !strings.Contains(err.Error(), "api_url") {
			t.Errorf("deliver: %v, want not_found naming api_url", err)
		}
		page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>login</html>")) }))
		t.Cleanup(page.Close)
		_, err = h.NewAt(t, page.URL).Deliver(t.Context(), send(18, "x", nil))
		if envelope.ClassOf(err) != "target_unavailable" || !strings.Contains(err.Error(), h.NotJSON) {
			t.Errorf("deliver: %v, want target_unavailable saying %q", err, h.NotJSON)
		}
	})
}

// runRefusesEmpty: an empty message is refused and nothing sent
// (RefusesEmpty).
func runRefusesEmpty(t *testing.T, h Harness) {
	if lacks(t, h.Features.RefusesEmpty, "RefusesEmpty", "the channel sends a message as it is") {
		return
	}
	t.Run("an empty message is refused, nothing sent", func(t *testing.T) {
		s := h.New(t)
		for i, md := range []string{"", "  \n ", "```\n```"} {
			_, err := s.Deliver(t.Context(), send(19+i, md, nil))
			if envelope.ClassOf(err) != "validation_error" {
				t.Errorf("deliver %q: %v, want validation_error", md, err)
			}
		}
		calls := len(h.Delivered(t))
		if h.Calls != nil {
			calls = h.Calls(t)
		}
		if calls != 0 {
			t.Errorf("%d calls for empty messages", calls)
		}
	})
}

// runCancelled: a cancelled context does not report success.
func runCancelled(t *testing.T, h Harness) {
	t.Run("a cancelled context does not report success", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := h.New(t).Deliver(ctx, send(13, "too late", nil))
		if err == nil {
			t.Fatal("delivered on a cancelled context")
		}
	})
}

// lacks reports whether the harness lacks a feature (has is false), and
// if so says so in a skipped subtest named for it, so that a missing
// capability shows in the test output.
func lacks(t *testing.T, has bool, feature, why string) bool {
	t.Helper()
	if !has {
		t.Run(feature, func(t *testing.T) { t.Skip(why) })
	}
	return !has
}

// checkSecrets fails t if err shows one of h's secrets.
func checkSecrets(t *testing.T, h Harness, err error) {
	t.Helper()
	if h.Secrets == nil || err == nil {
		return
	}
	for _, secret := range h.Secrets(t) {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows a secret", err)
		}
	}
}

// send is a send of md with idempotency key i.
func send(i int, md string, sent func(string) error) deliver.Delivery {
	return deliver.Delivery{Key: key(i), Intent: envelope.IntentSend, Butler: "health", Message: md, Urgency: "normal", Sent: sent}
}

func key(i int) string { return strings.Repeat(string(rune('a'+i)), 64) }
