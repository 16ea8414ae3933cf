package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
)

// poisonFlood is how many routes a flooding butler sends: more than the 256
// ack-pending slots the route and delivery consumers had before issue 37.
const poisonFlood = 300

// TestPoisonQuestionsHoldNoOtherRoute is issue 37's attack: 300 questions
// on the log channel, recorded and published by health as its NATS user may
// (its ask tool refuses them at the call: shown first), each failing in the
// switchboard. Each is answered validation_error and dead-lettered (herald
// dead ls lists all 300) at once, and finance's route, stored behind them,
// is delivered. Before, each failed with "nats: invalid key", was retried
// for retry_for, and held one of HERALD_ROUTE's 256 slots: finance's
// route waited for the flood's horizon (24 h).
func TestPoisonQuestionsHoldNoOtherRoute(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	if res := f.listen("health").Call("ask", map[string]any{"question": "Deploy?", "channel": "log"}); !res.IsError || !strings.Contains(text(res), "cannot take an answer") {
		t.Fatalf("ask on log: %q (isError %v), want it refused at the call", text(res), res.IsError)
	}
	answers := f.countAnswers("health")
	store, err := approval.Open(t.Context(), f.js)
	if err != nil {
		t.Fatal(err)
	}
	for i := range poisonFlood {
		q := approval.Question{ID: approval.NewQuestionID(), Butler: "health", Question: fmt.Sprintf("Deploy %d?", i), CreatedAt: time.Now().UTC()}
		if err := store.Ask(t.Context(), q); err != nil {
			t.Fatal(err)
		}
		n := envelope.NewNotify("health", envelope.Delivery{Channel: "log", Message: "❓ " + q.Question}, nil)
		n.IdempotencyKey = approval.QuestionKey(q.ID)
		f.storeRoute(envelope.NewRoute(n))
	}
	// Finance's route went to the stream too (no switchboard took it
	// directly): it comes after the whole flood.
	f.storeRoute(envelope.NewRoute(envelope.NewNotify("finance", envelope.Delivery{Message: "Invoice 42 is due"}, nil)))
	f.mailWith(t, "Invoice 42 is due", 15*time.Second, "finance's mail, behind 300 poison routes")
	testkit.Eventually(t, 15*time.Second, func() bool { return answers.count(envelope.ErrValidation.Error()) == poisonFlood }, "300 answers of validation_error")
	if other := answers.others(envelope.ErrValidation.Error()); len(other) > 0 {
		t.Fatalf("answers other than validation_error: %v", other)
	}
	testkit.Eventually(t, 15*time.Second, func() bool {
		dls, err := bus.DeadLetters(t.Context(), f.js)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range dls {
			if d.Stream == bus.StreamRoute && d.Class == envelope.ErrValidation.Error() && d.Tries == 1 {
				n++
			}
		}
		return n == poisonFlood
	}, "herald dead ls to list the 300 questions, each tried once")
}

// TestFloodOfRetriesHoldsNoOtherDelivery: health floods its Telegram bot,
// which answers every send 429 with retry_after 120 s, so each of its 300
// deliveries waits two minutes for its retry; finance's notify by email,
// made while they wait, is delivered. Before issue 37, each waiting
// delivery held one of HERALD_DELIVER's 256 ack-pending slots and
// finance's waited as long as the flood was retried (up to retry_for).
func TestFloodOfRetriesHoldsNoOtherDelivery(t *testing.T) {
	f := newFleet(t)
	f.tg.FailNext("sendMessage", 10*poisonFlood, 429, "Too Many Requests: retry after 120", 120)
	f.start("switchboard", "messenger")
	for i := range poisonFlood {
		f.storeRoute(envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram", Message: fmt.Sprintf("flood %d", i)}, nil)))
	}
	// 256 sends refused: the flood holds every slot a bounded consumer had.
	testkit.Eventually(t, 30*time.Second, func() bool { return len(f.tg.Calls("sendMessage")) >= 256 }, "health's flood refused by Telegram")
	res := f.listen("finance").Call("notify", map[string]any{"message": "Payroll ran"})
	f.mailWith(t, "Payroll ran", 15*time.Second, "finance's mail while health's 300 deliveries wait for their retries")
	if res.IsError {
		t.Fatalf("finance's notify: %q", text(res))
	}
	if n := len(f.tg.Accepted("sendMessage")); n != 0 {
		t.Fatalf("%d of health's sends accepted inside Telegram's retry_after", n)
	}
}

// storeRoute stores r in HERALD_ROUTE as its butler's route client does
// when no switchboard routed it directly.
func (f *fleet) storeRoute(r *envelope.Route) {
	f.t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := bus.Publish(f.t.Context(), f.js, bus.RouteSubject(r.Target.Butler), b, r.IdempotencyKey(), nil); err != nil {
		f.t.Fatal(err)
	}
}

// answerLog records the answers the switchboard sends butler's callers,
// taking each as a waiting caller does.
type answerLog struct {
	mu      sync.Mutex
	classes []string
}

// countAnswers takes every answer to butler's routes from now on.
func (f *fleet) countAnswers(butler string) *answerLog {
	f.t.Helper()
	l := &answerLog{}
	sub, err := f.nc.Subscribe(bus.ReplySubject(butler, "*"), func(m *nats.Msg) {
		_ = m.Respond(nil)
		class := "ok"
		if resp, err := envelope.DecodeTrustedResponse(m.Data); err != nil {
			class = "undecodable"
		} else if resp.Error != nil {
			class = resp.Error.Class
		}
		l.mu.Lock()
		l.classes = append(l.classes, class)
		l.mu.Unlock()
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := f.nc.Flush(); err != nil {
		f.t.Fatal(err)
	}
	return l
}

// count is how many answers had class.
func (l *answerLog) count(class string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.classes {
		if c == class {
			n++
		}
	}
	return n
}

// others are the classes of the answers that did not have class.
func (l *answerLog) others(class string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.classes {
		if c != class {
			out = append(out, c)
		}
	}
	return out
}
