package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// TestSignedReplayAfterRestart: a captured, validly signed webhook replayed
// within its signature's 5 minutes, after herald dev restarted (NATS, the
// messenger and the switchboard with it, in a process of its own), is
// answered as a duplicate with the first request id and routed nowhere.
func TestSignedReplayAfterRestart(t *testing.T) {
	addr, secret := testkit.FreeAddr(t), webhooktest.NewSecret()
	dev := startDev(t, nil, "replay", fmt.Sprintf(`
nats: { listen: "127.0.0.1:0" }
http_listen: %q
butlers:
  - { name: ops, default_channel: log, mcp_http: "127.0.0.1:0" }
integrations:
  - id: ci
    type: webhook
    secret_env: CI_SECRET
    grants: all
    inbound: { allow_from: ["*"] }
bindings:
  - { integration: ci, butler: ops }
`, addr), 0, "CI_SECRET="+secret)
	url := "http://" + addr + "/hooks/ci"
	body := []byte(`{"text": "deploy approved", "sender": "ci"}`)
	captured := webhooktest.PostOptions{ID: "msg_captured_1", Timestamp: time.Now()}
	post := func() (requestID string, duplicate bool) {
		t.Helper()
		// The messenger mounts /hooks/ci (404) and takes requests (503)
		// shortly after herald dev prints its banner.
		var r *webhooktest.Response
		var err error
		testkit.Eventually(t, 20*time.Second, func() bool {
			r, err = webhooktest.Post(url, secret, body, captured)
			return err != nil || r.Status != http.StatusNotFound && r.Status != http.StatusServiceUnavailable
		}, "the messenger to take POST /hooks/ci")
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("signed POST: %v %+v\n%s", err, r, dev.lastLines())
		}
		var a struct {
			RequestID string `json:"request_id"`
			Duplicate bool   `json:"duplicate"`
		}
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatal(err)
		}
		return a.RequestID, a.Duplicate
	}
	audited := func(kind, requestID string) int {
		n := 0
		for _, r := range streamJSON(t, dev.js, bus.StreamAudit, "herald.audit."+kind+".>") {
			if r["request_id"] == requestID {
				n++
			}
		}
		return n
	}

	first, dup := post()
	if dup || first == "" {
		t.Fatalf("first POST: request_id %q, duplicate %v", first, dup)
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return audited("routed", first) == 1 }, "the first POST routed to ops")

	dev.restart(nil, 0)
	again, dup := post()
	if !dup || again != first {
		t.Fatalf("the replay after a restart: request_id %q duplicate %v, want %q as a duplicate", again, dup, first)
	}
	testkit.Eventually(t, 20*time.Second, func() bool { return audited("dropped", first) == 1 }, "the replay audited as a dropped duplicate")
	// The switchboard would have routed it by now had it been stored.
	time.Sleep(time.Second)
	if n := audited("routed", first); n != 1 {
		t.Fatalf("request %s routed %d times", first, n)
	}
	// No model is connected: what reached ops's inbox waits there.
	inbox, err := dev.js.Stream(t.Context(), bus.StreamInbox)
	if err != nil {
		t.Fatal(err)
	}
	info, err := inbox.Info(t.Context(), jetstream.WithSubjectFilter(bus.InboxSubject("ops")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[bus.InboxSubject("ops")]; n != 1 {
		t.Fatalf("ops's inbox holds %d messages, want the first only", n)
	}
}
