package switchboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/switchboard"
)

// poisonYAML has channels a question cannot be answered on: the log and a
// webhook (nobody answers there), a bot that takes no inbound, and a bot
// and a mailbox with no default recipient.
const poisonYAML = `
butlers:
  - { name: health, default_channel: log }
integrations:
  - { id: audit, type: log, grants: all }
  - { id: ci, type: webhook, secret_env: CI_SECRET, recipients: { ops: "https://hooks.example.com/x" }, grants: all }
  - { id: tg_out, type: telegram, default_chat: "12345", grants: all }
  - { id: tg_nochat, type: telegram, grants: all, inbound: { allow_from: ["111"] } }
  - { id: mail, type: email, from: herald@example.com, grants: all, inbound: { listen: 127.0.0.1:0, allow_from: [me@example.com] } }
`

// TestUnanswerableQuestionIsRefusedAtOnce: a question route no answer could
// come back from, published as a butler's NATS user may publish it (past
// its ask tool's own refusal), is answered validation_error on its first
// try, dead-lettered (herald dead ls lists it) and audited, never retried
// and never sent. Before issue 37, on the log channel it failed with
// "nats: invalid key" (an empty chat made an empty key token), classed
// target_unavailable, and was retried for retry_for (24 h).
func TestUnanswerableQuestionIsRefusedAtOnce(t *testing.T) {
	nc, js := bustest.RunServer(t).Connect()
	cfg, err := config.Parse([]byte(poisonYAML))
	if err != nil {
		t.Fatal(err)
	}
	runSwitchboard(t, cfg, nc)
	store, err := approval.Open(t.Context(), js)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ channel, recipient, want string }{
		{"log", "", "log:audit cannot take an answer"},
		{"webhook:ci", "ops", "webhook:ci cannot take an answer"},
		{"telegram:tg_out", "", "telegram:tg_out takes no inbound messages"},
		{"telegram:tg_nochat", "", "needs a recipient"},
		{"email:mail", "", "needs a recipient"},
	} {
		t.Run(tt.channel, func(t *testing.T) {
			q := approval.Question{ID: approval.NewQuestionID(), Butler: "health", Question: "Deploy?", CreatedAt: time.Now().UTC()}
			if err := store.Ask(t.Context(), q); err != nil {
				t.Fatal(err)
			}
			n := envelope.NewNotify("health", envelope.Delivery{Channel: tt.channel, Recipient: tt.recipient, Message: "❓ Deploy?"}, nil)
			n.IdempotencyKey = approval.QuestionKey(q.ID)
			r := envelope.NewRoute(n)
			resp := publishRoute(t, nc, js, r)
			if resp.Error == nil || resp.Error.Class != envelope.ErrValidation.Error() || resp.Error.Retryable || !strings.Contains(resp.Error.Message, tt.want) {
				t.Fatalf("answer %+v, want a validation_error saying %q", resp.Error, tt.want)
			}
			dl := deadLetterOf(t, js, r.RequestContext.RequestID)
			if dl.Tries != 1 || dl.Class != envelope.ErrValidation.Error() || dl.Stream != bus.StreamRoute {
				t.Fatalf("dead letter %+v, want one try of HERALD_ROUTE, validation_error", dl)
			}
		})
	}
	if n := bustest.Stored(t, js, bus.StreamDeliver); n != 0 {
		t.Errorf("%d deliveries of questions nobody could answer", n)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamRoute) == 0 }, "HERALD_ROUTE empty: nothing left to retry")
}

// runSwitchboard runs a switchboard of cfg until the test ends, once its
// route consumer is bound.
func runSwitchboard(t *testing.T, cfg *config.Config, nc *nats.Conn) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	go func() { done <- switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: nc, Log: log}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("switchboard: %v", err)
		}
	})
	js, _ := jetstream.New(nc)
	testkit.Eventually(t, 20*time.Second, func() bool {
		_, err := js.Consumer(t.Context(), bus.StreamRoute, bus.ConsumerSwitchboard)
		return err == nil
	}, "the switchboard's route consumer")
}

// publishRoute stores r in HERALD_ROUTE, as a butler does when no
// switchboard took it directly, and returns the switchboard's answer on
// the butler's reply subject, which it confirms.
func publishRoute(t *testing.T, nc *nats.Conn, js jetstream.JetStream, r *envelope.Route) *envelope.RouteResponse {
	t.Helper()
	sub, err := nc.SubscribeSync(bus.ReplySubject(r.Target.Butler, r.RequestContext.RequestID))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Publish(t.Context(), js, bus.RouteSubject(r.Target.Butler), b, r.IdempotencyKey(), nil); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no answer to %s within 10s: %v", r.RequestContext.RequestID, err)
	}
	_ = m.Respond(nil)
	resp, err := envelope.DecodeTrustedResponse(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// deadLetterOf waits for the dead letter of request id, as herald dead ls
// lists it.
func deadLetterOf(t *testing.T, js jetstream.JetStream, id string) bus.DeadLetter {
	t.Helper()
	var found bus.DeadLetter
	testkit.Eventually(t, 15*time.Second, func() bool {
		dls, err := bus.DeadLetters(t.Context(), js)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dls {
			if d.RequestID == id {
				found = d
				return true
			}
		}
		return false
	}, "the dead letter of "+id)
	return found
}
