package butler_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
)

// askConfig has a channel of each kind ask must refuse (log and webhook,
// where nobody answers; a Telegram bot with no inbound; mail with no
// default address) next to web, which takes answers.
const askConfig = `
butlers:
  - { name: health, default_channel: log }
integrations:
  - { id: audit, type: log, grants: all }
  - { id: ci, type: webhook, secret_env: CI_SECRET, recipients: { ops: "https://hooks.example.com/x" }, grants: all }
  - { id: tg, type: telegram, token_env: TG_TOKEN, default_chat: "12345", grants: all }
  - { id: mail, type: email, smtp_url_env: SMTP_URL, from: herald@example.com, grants: all, inbound: { listen: 127.0.0.1:0, domains: [example.com], allow_from: [alice@example.com] } }
  - { id: web, type: web, listen: 127.0.0.1:0, grants: all }
`

// TestAskRefusesChannelsNobodyAnswers: ask on a channel no answer can come
// back from is refused at the call, with a sentence naming the channels
// that can take one, and nothing is asked: no question is recorded and no
// route published. Before issue 37 each such call was answered "Asked" and
// its route retried in the switchboard for a day.
func TestAskRefusesChannelsNobodyAnswers(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	cfg, err := config.Parse([]byte(askConfig))
	if err != nil {
		t.Fatal(err)
	}
	c := askButler(t, cfg, nc)
	for _, tt := range []struct {
		name string
		args map[string]any
		want string
		// others: the refusal names the channels that can take an answer.
		others bool
	}{
		{"log by default", map[string]any{"question": "Deploy?"}, "log:audit cannot take an answer", true},
		{"log named", map[string]any{"question": "Deploy?", "channel": "log"}, "log:audit cannot take an answer", true},
		{"webhook", map[string]any{"question": "Deploy?", "channel": "webhook:ci", "recipient": "ops"}, "webhook:ci cannot take an answer", true},
		{"no inbound", map[string]any{"question": "Deploy?", "channel": "telegram"}, "telegram:tg takes no inbound messages", true},
		{"no recipient, no default", map[string]any{"question": "Deploy?", "channel": "email"}, "ask on email:mail needs a recipient", false},
		{"web needs a visitor", map[string]any{"question": "Deploy?", "channel": "web"}, "ask on web:web needs a recipient", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := c.Call("ask", tt.args)
			got := text(res)
			if !res.IsError || !strings.Contains(got, "validation_error") || !strings.Contains(got, tt.want) {
				t.Fatalf("ask %v: %q (isError %v), want a validation_error saying %q", tt.args, got, res.IsError, tt.want)
			}
			if tt.others && !strings.Contains(got, "yours: email:mail, web:web") {
				t.Errorf("the refusal %q does not name the channels that can take an answer", got)
			}
		})
	}
	if n := bustest.Stored(t, js, bus.StreamRoute); n != 0 {
		t.Errorf("%d routes published for refused questions", n)
	}
	kv, err := js.KeyValue(t.Context(), bus.BucketApprovals)
	if err != nil {
		t.Fatal(err)
	}
	if keys, _ := kv.ListKeys(t.Context()); keys != nil {
		for k := range keys.Keys() {
			t.Errorf("a refused question left record %s", k)
		}
	}
}

// askButler runs butler health of cfg over stdio until the test ends and
// returns a client connected to it.
func askButler(t *testing.T, cfg *config.Config, nc *nats.Conn) *butlertest.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b, err := butler.New(ctx, butler.Options{Name: "health", Config: cfg, NC: nc, Log: slog.New(slog.DiscardHandler), Timeout: 2 * time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { _ = b.ServeStdio(ctx, serverIn, serverOut) })
	// Closing the reader too ends a write the test no longer reads.
	t.Cleanup(func() { _ = clientOut.Close(); _ = clientIn.Close(); cancel(); wg.Wait() })
	return butlertest.ConnectIO(t, clientIn, clientOut, "2025-06-18", butlertest.Hello{})
}
