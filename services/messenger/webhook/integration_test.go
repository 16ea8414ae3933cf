package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/webhook"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// TestThroughTheMessenger runs the channel in a real messenger on a real
// NATS server: a signed POST on http_listen lands once on HERALD_INGRESS
// (a retry deduplicated, a forgery refused and audited), and a routed
// notify reaches the recipient as a webhook whose id is its delivery id.
func TestThroughTheMessenger(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	secret := webhooktest.NewSecret()
	sink := webhooktest.NewServer(t, secret)
	listen := testkit.FreeAddr(t)
	cfg, err := config.Parse(fmt.Appendf(nil, `
http_listen: %s
butlers: [{name: health, default_channel: "webhook:ci"}]
integrations:
  - id: ci
    type: webhook
    secret_env: %s
    recipients: {ops: %q}
    default_recipient: ops
    grants: all
    inbound: {allow_from: ["*"]}
`, listen, secretEnv, sink.URL("/ops")))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() {
		stopped <- messenger.Run(ctx, messenger.Options{
			// Not t.Output(): the messenger's sink flushes last_inbound
			// on a timer that may fire after Run returned.
			Config: cfg, NC: nc, Log: slog.New(slog.NewTextHandler(logs, nil)),
			Getenv:    func(k string) string { return map[string]string{secretEnv: secret}[k] },
			Channels:  map[string]deliver.Factory{"webhook": webhook.New},
			Receivers: map[string]deliver.ReceiverFactory{"webhook": webhook.NewReceiver},
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("messenger log:\n%s", logs)
		}
	})

	// Inbound.
	url := "http://" + listen + webhook.Path("ci")
	body := blob("text", "Build 812 failed", "sender", "github-actions")
	var first *webhooktest.Response
	testkit.Eventually(t, 20*time.Second, func() bool {
		first, err = webhooktest.Post(url, secret, body, webhooktest.PostOptions{ID: "msg_812"})
		return err == nil && first.Status == http.StatusOK
	}, "the endpoint to take messages")
	retry, err := webhooktest.Post(url, secret, body, webhooktest.PostOptions{ID: "msg_812"})
	if err != nil || retry.Status != http.StatusOK {
		t.Fatalf("retry: %v %+v", err, retry)
	}
	forged, err := webhooktest.Post(url, secret, blob("text", "rm -rf"), webhooktest.PostOptions{BadSignature: true})
	if err != nil || forged.Status != http.StatusUnauthorized {
		t.Fatalf("forged: %v %+v", err, forged)
	}
	if n := bustest.Msgs(t, js, bus.StreamIngress); n != 1 {
		t.Fatalf("%d messages on %s, want 1", n, bus.StreamIngress)
	}
	stream, err := js.Stream(t.Context(), bus.StreamIngress)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	in, err := envelope.DecodeIngress(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if in.NativeID != "ci:msg_812" || in.Content.Text != "Build 812 failed" || in.RequestContext.SourceSenderIdentity != "github-actions" || m.Subject != bus.IngressSubject("webhook") {
		t.Errorf("stored %s: %+v", m.Subject, in)
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return bustest.Dropped(t, js, "bad_signature") }, "the refusal in the audit log")

	// Outbound.
	n := envelope.NewNotify("health", envelope.Delivery{Channel: "webhook:ci", Message: "Build 812 is fixed"}, nil)
	r := envelope.NewRoute(n)
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	key := r.IdempotencyKey()
	if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), data, key, nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return len(sink.Accepted()) == 1 }, "the webhook")
	got := sink.Accepted()[0]
	if got.ID != envelope.DeliveryID(key) || got.Payload["message"] != "Build 812 is fixed" || got.Payload["butler"] != "health" || got.Path != "/ops" {
		t.Errorf("webhook %s %s: %v", got.Path, got.ID, got.Payload)
	}
}
