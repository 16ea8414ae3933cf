package messenger_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// scripted is a receiver that hands over a fixed script, then waits.
type scripted struct{ done chan struct{} }

func (s *scripted) Receive(ctx context.Context, sink deliver.Sink) error {
	sink.Status(deliver.Status{State: deliver.StateRunning, Detail: "scripted"})
	msg := func(native string) *envelope.Ingress {
		return envelope.NewIngress("", "telegram", "tg_in", "42", "42:1", "hello", native, map[string]string{"chat_id": "42"})
	}
	for _, in := range []*envelope.Ingress{msg("1:100"), msg("1:100"), msg("1:101")} {
		if err := sink.Ingress(ctx, in); err != nil {
			return err
		}
	}
	bad := msg("1:102")
	bad.Meta["not-a-key"] = "x"
	if err := sink.Ingress(ctx, bad); err != nil {
		return errors.New("a malformed message must not stall the receiver")
	}
	sink.Dropped(ctx, msg("1:103"), "auto_submitted")
	close(s.done)
	<-ctx.Done()
	return nil
}

func TestReceiversFeedTheIngressStream(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	cfg, err := config.Parse([]byte("integrations: [{id: tg_in, type: telegram, token_env: T, inbound: {allow_from: ['42']}}]"))
	if err != nil {
		t.Fatal(err)
	}
	r := &scripted{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() {
		stopped <- messenger.Run(ctx, messenger.Options{Config: cfg, NC: nc, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Getenv:    func(string) string { return "1:secret" },
			Receivers: map[string]deliver.ReceiverFactory{"telegram": func(config.Integration, deliver.Env) (deliver.Receiver, error) { return r, nil }},
		})
	}()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver did not run")
	}
	if n := bustest.Msgs(t, js, bus.StreamIngress); n != 2 {
		t.Fatalf("%d messages in %s, want 2 (the repeat deduplicated, the malformed one dropped)", n, bus.StreamIngress)
	}
	// Audit records are stored a moment after the message is handled.
	for _, want := range []string{"malformed", "auto_submitted"} {
		testkit.Eventually(t, 5*time.Second, func() bool { return bustest.Dropped(t, js, want) }, "the audit record for the "+want+" drop")
	}
	kv, _ := js.KeyValue(t.Context(), bus.BucketStatus)
	var st deliver.Status
	deadline := time.Now().Add(5 * time.Second)
	for st.LastInbound.IsZero() && time.Now().Before(deadline) {
		if e, err := kv.Get(t.Context(), "tg_in"); err == nil {
			_ = json.Unmarshal(e.Value(), &st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.State != deliver.StateRunning || st.LastInbound.IsZero() || st.Channel != "telegram" {
		t.Fatalf("status %+v", st)
	}
	cancel()
	if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestUnimplementedChannelIsAnErrorAtStart: a configured integration whose
// type this messenger cannot deliver stops it at start, naming it, instead
// of failing the first notify.
func TestUnimplementedChannelIsAnErrorAtStart(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	cfg, err := config.Parse([]byte("integrations: [{id: mystery, type: slack, token_env: T, grants: all}]"))
	if err != nil {
		t.Fatal(err)
	}
	err = messenger.Run(t.Context(), messenger.Options{Config: cfg, NC: nc, Channels: map[string]deliver.Factory{"slack": nil}})
	if err == nil || !strings.Contains(err.Error(), `"mystery"`) || !strings.Contains(err.Error(), "no implementation") {
		t.Fatalf("Run = %v, want an error naming the integration", err)
	}
}
