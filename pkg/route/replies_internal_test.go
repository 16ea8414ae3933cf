package route

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/testkit"
)

// The one reply subscription of a butler hands each answer to the Send
// waiting for it, and tells whoever answers a request nobody waits for, at
// once and as NATS itself would, that nobody took it: the messenger then
// keeps the outcome for the butler's inbox.
func TestRepliesOneSubscriptionForEveryRequest(t *testing.T) {
	srv := bustest.RunServer(t)
	butlerNC, _ := srv.Connect()
	messengerNC, _ := srv.Connect()
	c := &Client{NC: butlerNC}
	rs, err := c.repliesFor("health")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.repliesFor("health"); again != rs {
		t.Fatal("a second Send of the same butler made a second subscription")
	}
	// A Send publishes its route on the same connection after subscribing,
	// so the server has the subscription before anyone can answer; here the
	// answers come at once from another connection: wait until it has it.
	if err := butlerNC.Flush(); err != nil {
		t.Fatal(err)
	}

	// Many requests waiting at once: each gets its own answer, and the
	// answerer sees each confirmed.
	var wg sync.WaitGroup
	for i := range 50 {
		id := fmt.Sprintf("req-%d", i)
		answers, leave := rs.wait(id)
		wg.Go(func() {
			defer leave()
			select {
			case m := <-answers:
				if string(m.Data) != "answer to "+id {
					t.Errorf("waiting for %s, got %q", id, m.Data)
				}
				_ = m.Respond(nil)
			case <-time.After(2 * bus.AnswerWait):
				t.Errorf("waiting for %s: no answer", id)
			}
		})
		wg.Go(func() {
			if _, err := messengerNC.Request(bus.ReplySubject("health", id), []byte("answer to "+id), bus.AnswerWait); err != nil {
				t.Errorf("answering %s: %v, want it confirmed", id, err)
			}
		})
	}
	wg.Wait()

	// One that waited and left ("queued"): no responders, as from the
	// server, at once and again when the switchboard relays it.
	_, leave := rs.wait("left")
	leave()
	for range 2 {
		if _, err := messengerNC.Request(bus.ReplySubject("health", "left"), []byte("late"), bus.AnswerWait); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("answering a request whose caller left: %v, want nats.ErrNoResponders", err)
		}
	}
	// A request this process never made is another's to confirm: left
	// alone, so the answerer waits, then stores the outcome.
	if _, err := messengerNC.Request(bus.ReplySubject("health", "never-asked"), []byte("late"), bus.AnswerWait); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("answering a request this process never made: %v, want nats.ErrTimeout", err)
	}
	// An answer that came as its Send gave up, never taken: the answerer
	// hears nobody took it, not a confirmation.
	answers, leave := rs.wait("racing")
	got := make(chan error, 1)
	go func() {
		_, err := messengerNC.Request(bus.ReplySubject("health", "racing"), []byte("just in time"), bus.AnswerWait)
		got <- err
	}()
	testkit.Eventually(t, bus.AnswerWait, func() bool { return len(answers) > 0 }, "the answer, before its Send leaves")
	leave()
	if err := <-got; !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("an answer its Send did not take: %v, want nats.ErrNoResponders", err)
	}
}

// Two processes of one butler (two Claude Code sessions, each with its
// stdio butler) each see every answer; each answer is confirmed by the
// process whose Send waits for it, never refused by the other.
func TestRepliesTwoProcessesOfOneButler(t *testing.T) {
	srv := bustest.RunServer(t)
	ncA, _ := srv.Connect()
	ncB, _ := srv.Connect()
	messengerNC, _ := srv.Connect()
	a, err := (&Client{NC: ncA}).repliesFor("health")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&Client{NC: ncB}).repliesFor("health"); err != nil {
		t.Fatal(err)
	}
	for _, nc := range []*nats.Conn{ncA, ncB} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		id := fmt.Sprintf("a-%d", i)
		answers, leave := a.wait(id)
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer leave()
			select {
			case m := <-answers:
				_ = m.Respond(nil)
			case <-time.After(2 * bus.AnswerWait):
				t.Errorf("process A waiting for %s: no answer", id)
			}
		}()
		if _, err := messengerNC.Request(bus.ReplySubject("health", id), []byte("answer"), bus.AnswerWait); err != nil {
			t.Errorf("answering process A's %s with process B listening too: %v, want it confirmed", id, err)
		}
		<-done
	}
}
