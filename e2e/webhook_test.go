package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/webhook"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// withWebhook adds the integration "ci" (a webhook both ways, bound to
// health) to the fleet, on a free http_listen, and returns the fake receiver
// and the inbound URL.
func withWebhook(t *testing.T, f *fleet) (*webhooktest.Server, string, string) {
	t.Helper()
	secret := webhooktest.NewSecret()
	rcv := webhooktest.NewServer(t, secret)
	f.env["CI_WEBHOOK_SECRET"] = secret
	addr := testkit.FreeAddr(t)
	f.cfg.HTTPListen = addr
	f.cfg.Integrations = append(f.cfg.Integrations, config.Integration{ID: "ci", Type: "webhook", Grants: config.Grants{All: true}, OnUncertain: "resend", Inbound: config.Inbound{Enabled: true, DMPolicy: "allowlist", AllowFrom: []string{config.AllowAnyone}}, Settings: &webhook.Config{SecretEnv: "CI_WEBHOOK_SECRET", Recipients: map[string]string{"ops": rcv.URL("/alerts")}, Default: "ops"}})
	f.cfg.Bindings = append(f.cfg.Bindings, config.Binding{Integration: "ci", Butler: "health"})
	if err := f.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return rcv, secret, "http://" + addr + "/hooks/ci"
}

// TestWebhookOut: a notify to `webhook` arrives at the receiver as a signed
// Standard Webhooks POST whose webhook-id is the delivery_id.
func TestWebhookOut(t *testing.T) {
	f := newFleet(t)
	rcv, _, _ := withWebhook(t, f)
	f.start("switchboard", "messenger")
	res := f.notify("health", map[string]any{"channel": "webhook", "message": "deploy **done**", "urgency": "high"})
	m := sentRE.FindStringSubmatch(text(res))
	if res.IsError || m == nil || m[1] != "webhook:ci" {
		t.Fatalf("notify: %s", text(res))
	}
	reqs := rcv.Accepted()
	if len(reqs) != 1 || !reqs[0].Verified || reqs[0].Path != "/alerts" || reqs[0].ID != m[2] {
		t.Fatalf("receiver got %+v, want one verified POST to /alerts with webhook-id %s", reqs, m[2])
	}
	if p := reqs[0].Payload; p["message"] != "deploy **done**" || p["butler"] != "health" || p["urgency"] != "high" || p["delivery_id"] != m[2] {
		t.Fatalf("payload %v", p)
	}
}

// TestWebhookIn: a signed POST reaches the bound butler's model as a channel
// notification; a bad signature, a stale timestamp and a replayed webhook-id
// with another body are refused and audited.
func TestWebhookIn(t *testing.T) {
	f := newFleet(t)
	_, secret, url := withWebhook(t, f)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	body := []byte(`{"text": "CI failed on main: 3 tests", "sender": "ci", "pipeline": "build-42"}`)
	var resp *webhooktest.Response
	testkit.Eventually(t, 10*time.Second, func() bool {
		r, err := webhooktest.Post(url, secret, body, webhooktest.PostOptions{})
		resp = r
		return err == nil && r.Status == http.StatusOK
	}, "the hook endpoint to take a signed POST")
	n := c.Wait(butler.MethodChannel, 1)[0]
	m := meta(n)
	if n["content"] != "CI failed on main: 3 tests" || m["source_channel"] != "webhook" || m["pipeline"] != "build-42" || m["integration"] != "ci" {
		t.Fatalf("notification %v", n)
	}
	for _, tt := range []struct {
		name string
		body []byte
		opts webhooktest.PostOptions
		want int
	}{
		{"bad signature", body, webhooktest.PostOptions{BadSignature: true}, http.StatusUnauthorized},
		{"stale timestamp", body, webhooktest.PostOptions{Timestamp: time.Now().Add(-time.Hour)}, http.StatusUnauthorized},
		{"replayed id, other body", []byte(`{"text": "rm -rf"}`), webhooktest.PostOptions{ID: resp.ID}, http.StatusConflict},
	} {
		r, err := webhooktest.Post(url, secret, tt.body, tt.opts)
		if err != nil || r.Status != tt.want {
			t.Errorf("%s: %v %+v, want %d", tt.name, err, r, tt.want)
		}
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(f.audit("dropped")) >= 3 }, "the refusals audited")
	var reasons []string
	for _, d := range f.audit("dropped") {
		reasons = append(reasons, fmt.Sprint(d["reason"]))
	}
	for _, want := range []string{"bad_signature", "stale_timestamp", "replayed_id"} {
		if !strings.Contains(strings.Join(reasons, " "), want) {
			t.Errorf("no %s among the dropped records %v", want, reasons)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if got := c.Notifications(butler.MethodChannel); len(got) != 1 {
		b, _ := json.Marshal(got)
		t.Fatalf("%d notifications, want only the signed one: %s", len(got), b)
	}
}
