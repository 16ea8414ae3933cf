package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/webhook"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// answer is the JSON the endpoint answers with.
type answer struct {
	OK        bool   `json:"ok"`
	RequestID string `json:"request_id"`
	Duplicate bool   `json:"duplicate"`
	Error     string `json:"error"`
}

func post(t *testing.T, ib *testReceiver, body []byte, opts webhooktest.PostOptions) (*webhooktest.Response, answer) {
	t.Helper()
	resp, err := webhooktest.Post(ib.url, ib.secret, body, opts)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if err := json.Unmarshal(resp.Body, &a); err != nil {
		t.Fatalf("answer %d %q is not JSON: %v", resp.Status, resp.Body, err)
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	return resp, a
}

func TestReceiveSigned(t *testing.T) {
	ib := newInbound(t, webhooktest.NewSecret(), true)
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	body := []byte(`{"text":"Build 812 failed on main","sender":"github-actions","thread":"pr-1234","chat":"alerts",` +
		`"repo":"herald","run-url":"https://ci.example.com/run/812","attempt":2,"labels":["ci"],"kind":"delivery_failed"}`)
	resp, a := post(t, ib, body, webhooktest.PostOptions{ID: "msg_812", Timestamp: at})
	if resp.Status != http.StatusOK || !a.OK || a.RequestID == "" {
		t.Fatalf("answer %d %+v, want 200 ok with a request_id", resp.Status, a)
	}
	got, dropped := ib.rec.got()
	if len(got) != 1 || len(dropped) != 0 {
		t.Fatalf("%d ingress, dropped %v; want 1, none", len(got), dropped)
	}
	in := got[0]
	rc := in.RequestContext
	if in.IntegrationID != "ci" || rc.SourceChannel != "webhook" || rc.SourceEndpointIdentity != "ci" ||
		rc.SourceSenderIdentity != "github-actions" || rc.SourceThreadIdentity != "pr-1234" || rc.RequestID != a.RequestID ||
		in.Content.Text != "Build 812 failed on main" || in.NativeID != "ci:msg_812" {
		t.Errorf("ingress %+v", in)
	}
	want := map[string]string{
		"chat_id": "alerts", "user_id": "github-actions", "message_id": "msg_812", "ts": fmt.Sprint(at.Unix()),
		"thread_id": "pr-1234", "webhook_auth": "signature", "repo": "herald", "run_url": "https://ci.example.com/run/812",
	}
	if fmt.Sprint(in.Meta) != fmt.Sprint(want) {
		t.Errorf("meta\n got %v\nwant %v", in.Meta, want)
	}
}

func TestReceiveDefaults(t *testing.T) {
	ib := newInbound(t, webhooktest.NewSecret(), true)
	resp, _ := post(t, ib, blob("text", "disk 91% full", "source", "grafana"), webhooktest.PostOptions{ID: "msg_1"})
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d", resp.Status)
	}
	resp, _ = post(t, ib, blob("text", "hello"), webhooktest.PostOptions{ID: "msg_2"})
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d", resp.Status)
	}
	got, _ := ib.rec.got()
	if len(got) != 2 {
		t.Fatalf("%d ingress", len(got))
	}
	if rc := got[0].RequestContext; rc.SourceSenderIdentity != "grafana" || got[0].Meta["user_id"] != "grafana" {
		t.Errorf("source: sender %q, want grafana", rc.SourceSenderIdentity)
	}
	in := got[1]
	if rc := in.RequestContext; rc.SourceSenderIdentity != "webhook:ci" || rc.SourceThreadIdentity != "msg_2" ||
		in.Meta["chat_id"] != "ci" || in.Meta["thread_id"] != "" {
		t.Errorf("defaults: %+v meta %v; want sender webhook:ci, thread msg_2 (the id), chat_id ci, no thread_id", rc, in.Meta)
	}
}

func TestReceiveBearer(t *testing.T) {
	ib := newInbound(t, webhooktest.NewSecret(), true)
	resp, a := post(t, ib, blob("text", "deploy done"), webhooktest.PostOptions{Bearer: true, ID: "deploy-77"})
	if resp.Status != http.StatusOK || !a.OK {
		t.Fatalf("answer %d %+v", resp.Status, a)
	}
	again, b := post(t, ib, blob("text", "deploy done"), webhooktest.PostOptions{Bearer: true, ID: "deploy-77"})
	if again.Status != http.StatusOK || !b.Duplicate || b.RequestID != a.RequestID {
		t.Errorf("repeat with the same webhook-id: %d %+v, want a duplicate answered like the first", again.Status, b)
	}
	// Without an id, every request is a message of its own.
	for range 2 {
		if resp, _ := post(t, ib, blob("text", "ping"), webhooktest.PostOptions{Bearer: true, NoID: true}); resp.Status != http.StatusOK {
			t.Fatalf("status %d", resp.Status)
		}
	}
	got, _ := ib.rec.got()
	if len(got) != 3 {
		t.Fatalf("%d ingress, want 3", len(got))
	}
	if got[0].Meta["webhook_auth"] != "bearer" || got[0].NativeID != "ci:deploy-77" || got[0].Meta["ts"] == "" {
		t.Errorf("bearer ingress meta %v native %q", got[0].Meta, got[0].NativeID)
	}
	if got[1].NativeID == got[2].NativeID || !strings.HasPrefix(got[1].Meta["message_id"], "hook_") {
		t.Errorf("requests without an id: native ids %q, %q; want distinct hook_ ids", got[1].NativeID, got[2].NativeID)
	}
}

func TestReceiveRefusals(t *testing.T) {
	secret := webhooktest.NewSecret()
	for _, tc := range []struct {
		name   string
		secret string // what the poster signs with; "" is the right one
		opts   webhooktest.PostOptions
		reason string
	}{
		{"bad signature", "", webhooktest.PostOptions{BadSignature: true}, webhook.ReasonBadSignature},
		{"signed with another secret", webhooktest.NewSecret(), webhooktest.PostOptions{}, webhook.ReasonBadSignature},
		{"old timestamp", "", webhooktest.PostOptions{Timestamp: time.Now().Add(-6 * time.Minute)}, webhook.ReasonStaleTimestamp},
		{"future timestamp", "", webhooktest.PostOptions{Timestamp: time.Now().Add(6 * time.Minute)}, webhook.ReasonStaleTimestamp},
		{"unsigned", "", webhooktest.PostOptions{Unsigned: true}, webhook.ReasonUnsigned},
		{"wrong bearer", webhooktest.NewSecret(), webhooktest.PostOptions{Bearer: true}, webhook.ReasonBadToken},
		{"not a bearer", "", webhooktest.PostOptions{Unsigned: true, Header: http.Header{"Authorization": {"Basic " + secret}}}, webhook.ReasonBadToken},
		{"full stop in the id", "", webhooktest.PostOptions{ID: "msg.1"}, webhook.ReasonBadSignature},
		{"timestamp not a number", "", webhooktest.PostOptions{Header: http.Header{"Webhook-Timestamp": {"yesterday"}}}, webhook.ReasonBadSignature},
		{"signature of another body", "", webhooktest.PostOptions{Header: http.Header{"Webhook-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}}}, webhook.ReasonBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ib := newInbound(t, secret, true)
			signer := cmpOr(tc.secret, secret)
			resp, err := webhooktest.Post(ib.url, signer, blob("text", "let me in"), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("status %d (%s), want 401 with WWW-Authenticate", resp.Status, resp.Body)
			}
			if bytes.Contains(resp.Body, []byte(strings.TrimPrefix(secret, "whsec_"))) {
				t.Errorf("the answer shows the secret: %s", resp.Body)
			}
			got, dropped := ib.rec.got()
			if len(got) != 0 || len(dropped) != 1 || dropped[0] != tc.reason {
				t.Errorf("%d ingress, dropped %v; want none and [%s]", len(got), dropped, tc.reason)
			}
			if strings.Contains(ib.logs.String(), strings.TrimPrefix(secret, "whsec_")) {
				t.Error("the log shows the secret")
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestReceiveRetryAndReplay(t *testing.T) {
	ib := newInbound(t, webhooktest.NewSecret(), true)
	first, a := post(t, ib, blob("text", "Build 812 failed"), webhooktest.PostOptions{ID: "msg_812"})
	// A retry: same id and body, signed again later.
	retry, b := post(t, ib, blob("text", "Build 812 failed"), webhooktest.PostOptions{ID: "msg_812", Timestamp: time.Now().Add(30 * time.Second)})
	// A replay with another body: whoever holds the secret, the id is taken.
	replay, c := post(t, ib, blob("text", "Build 812 passed"), webhooktest.PostOptions{ID: "msg_812"})
	if first.Status != 200 || retry.Status != 200 || replay.Status != http.StatusConflict {
		t.Fatalf("statuses %d, %d, %d; want 200, 200, 409", first.Status, retry.Status, replay.Status)
	}
	if !b.Duplicate || b.RequestID != a.RequestID || c.OK || !strings.Contains(c.Error, "msg_812") {
		t.Errorf("answers %+v, %+v; want the retry answered as the first, the replay refused naming the id", b, c)
	}
	got, dropped := ib.rec.got()
	if len(got) != 1 || len(dropped) != 1 || dropped[0] != webhook.ReasonReplayedID {
		t.Errorf("%d ingress, dropped %v; want 1 and [replayed_id]", len(got), dropped)
	}
}

// Many copies of one webhook at once (a sender's parallel retries) are
// stored once and all answered with its request_id.
func TestReceiveConcurrentCopies(t *testing.T) {
	ib := newInbound(t, webhooktest.NewSecret(), true)
	hold := make(chan struct{})
	ib.rec.mu.Lock()
	ib.rec.hold = hold
	ib.rec.mu.Unlock()
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			resp, err := webhooktest.Post(ib.url, ib.secret, blob("text", "once"), webhooktest.PostOptions{ID: "msg_same"})
			if err != nil {
				t.Error(err)
				return
			}
			var a answer
			_ = json.Unmarshal(resp.Body, &a)
			if resp.Status != 200 {
				t.Errorf("status %d %+v", resp.Status, a)
			}
			ids[i] = a.RequestID
		})
	}
	// Hold the first copy in the sink while the others arrive (the pause
	// only gives a wrong receiver the chance to show itself).
	if !ib.rec.changed.Wait(20*time.Second, func() bool {
		ib.rec.mu.Lock()
		defer ib.rec.mu.Unlock()
		return ib.rec.entered > 0
	}) {
		t.Fatal("no copy reached the sink within 20s")
	}
	time.Sleep(200 * time.Millisecond)
	close(hold)
	wg.Wait()
	got, _ := ib.rec.got()
	ib.rec.mu.Lock()
	entered := ib.rec.entered
	ib.rec.mu.Unlock()
	if len(got) != 1 || entered != 1 {
		t.Fatalf("%d ingress from %d calls, want 1 from 1", len(got), entered)
	}
	for _, id := range ids {
		if id != got[0].RequestContext.RequestID {
			t.Errorf("answered request_ids %v, want all %s", ids, got[0].RequestContext.RequestID)
			break
		}
	}
}

func TestReceiveBadBody(t *testing.T) {
	ib := newInbound(t, webhooktest.NewSecret(), true)
	for _, body := range []string{`{}`, `{"text":""}`, `{"text":"   "}`, `{"text":5}`, `{"message":"x"}`, `[]`, `hello`, ``} {
		resp, a := post(t, ib, []byte(body), webhooktest.PostOptions{})
		if resp.Status != http.StatusBadRequest || a.OK || !strings.Contains(a.Error, "text") {
			t.Errorf("%q: %d %+v, want 400 naming text", body, resp.Status, a)
		}
	}
	got, dropped := ib.rec.got()
	if len(got) != 0 || len(dropped) != 0 {
		t.Errorf("%d ingress, dropped %v; want none", len(got), dropped)
	}
}

func TestReceiveUnavailableUntilRunning(t *testing.T) {
	ib := newInbound(t, webhooktest.NewSecret(), false)
	resp, a := post(t, ib, blob("text", "early"), webhooktest.PostOptions{ID: "msg_early"})
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || a.OK {
		t.Fatalf("before Receive: %d %+v, want 503 with Retry-After", resp.Status, a)
	}
	ib.start(t)
	if st := ib.rec.waitState(t, deliver.StateRunning); st.Integration != "ci" || st.Channel != "webhook" || !strings.Contains(st.Detail, "/hooks/ci") {
		t.Errorf("status %+v", st)
	}
	if resp, _ := post(t, ib, blob("text", "early"), webhooktest.PostOptions{ID: "msg_early"}); resp.Status != http.StatusOK {
		t.Fatalf("running: %d, want 200", resp.Status)
	}
	ib.stop()
	if resp, _ := post(t, ib, blob("text", "late"), webhooktest.PostOptions{}); resp.Status != http.StatusServiceUnavailable {
		t.Errorf("after Receive returned: %d, want 503", resp.Status)
	}
	if got, _ := ib.rec.got(); len(got) != 1 {
		t.Errorf("%d ingress, want 1", len(got))
	}
}

func TestReceiveBodyTooLarge(t *testing.T) {
	ib := newInbound(t, webhooktest.NewSecret(), true)
	body := append(append([]byte(`{"text":"`), bytes.Repeat([]byte("x"), webhook.MaxBody)...), `"}`...)
	resp, a := post(t, ib, body, webhooktest.PostOptions{})
	if resp.Status != http.StatusRequestEntityTooLarge || a.OK {
		t.Errorf("%d %+v, want 413", resp.Status, a)
	}
	// Just under the limit is taken.
	body = append(append([]byte(`{"text":"`), bytes.Repeat([]byte("y"), webhook.MaxBody-12)...), `"}`...)
	if resp, a := post(t, ib, body, webhooktest.PostOptions{}); resp.Status != http.StatusOK {
		t.Errorf("%d bytes: %d %+v, want 200", len(body), resp.Status, a)
	}
	got, _ := ib.rec.got()
	if len(got) != 1 || len(got[0].Content.Text) > 262144 {
		t.Errorf("%d ingress, text %d bytes; want one, cut to ingress.v1's limit", len(got), len(got[0].Content.Text))
	}
}

func TestReceiveSinkFailure(t *testing.T) {
	ib := newInbound(t, webhooktest.NewSecret(), true)
	ib.rec.fail(1, fmt.Errorf("%w: the bus is down", envelope.ErrTargetUnavailable))
	resp, a := post(t, ib, blob("text", "keep me"), webhooktest.PostOptions{ID: "msg_keep"})
	if resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || a.OK {
		t.Fatalf("bus down: %d %+v, want 503 with Retry-After", resp.Status, a)
	}
	// The sender's retry is stored: the failed attempt was not remembered.
	if resp, _ := post(t, ib, blob("text", "keep me"), webhooktest.PostOptions{ID: "msg_keep"}); resp.Status != http.StatusOK {
		t.Fatalf("retry: %d, want 200", resp.Status)
	}
	ib.rec.fail(1, fmt.Errorf("%w: not an ingress", envelope.ErrValidation))
	if resp, _ := post(t, ib, blob("text", "never valid"), webhooktest.PostOptions{}); resp.Status != http.StatusBadRequest {
		t.Errorf("invalid: %d, want 400", resp.Status)
	}
	got, dropped := ib.rec.got()
	if len(got) != 1 || got[0].Content.Text != "keep me" || len(dropped) != 1 || dropped[0] != webhook.ReasonInvalid {
		t.Errorf("%d ingress, dropped %v; want the retried one, and [invalid]", len(got), dropped)
	}
}

func TestNewReceiver(t *testing.T) {
	secret := webhooktest.NewSecret()
	in := config.Integration{ID: "ci", Type: "webhook", Settings: &webhook.Config{SecretEnv: secretEnv}}
	if r, err := webhook.NewReceiver(in, env(t, secret, nil)); r != nil || err != nil {
		t.Errorf("no inbound: %v, %v; want nil, nil", r, err)
	}
	in.Inbound.Enabled = true
	if _, err := webhook.NewReceiver(in, env(t, "", nil)); err == nil || !strings.Contains(err.Error(), secretEnv) {
		t.Errorf("no secret: %v, want an error naming %s", err, secretEnv)
	}
	// Without an HTTP listener it says so in its status.
	r, err := webhook.NewReceiver(in, env(t, secret, nil))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Receive(ctx, rec) }()
	if st := rec.waitState(t, deliver.StateError); !strings.Contains(st.Detail, "HTTP") {
		t.Errorf("status %+v", st)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

func TestPath(t *testing.T) {
	if got := webhook.Path("int_gXuDla4UZipcm2tg3McPX"); got != "/hooks/int_gXuDla4UZipcm2tg3McPX" {
		t.Errorf("Path = %q", got)
	}
}
