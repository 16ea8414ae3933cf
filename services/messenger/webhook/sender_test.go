package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/webhook"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

var key = strings.Repeat("7", 64)

func TestSendSignedPost(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops"), "pager": srv.URL("/pager")})
	var sent []string
	r, err := s.Deliver(t.Context(), deliver.Delivery{
		Key: key, Intent: envelope.IntentSend, Butler: "health", Subject: "Dose", Message: "Dose **taken** at 08:00",
		Urgency: "high", Topic: "workflow", Level: "warn",
		Sent: func(id string) error { sent = append(sent, id); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Accepted()
	if len(got) != 1 {
		t.Fatalf("receiver accepted %d webhooks (%+v), want 1", len(got), srv.Requests())
	}
	req := got[0]
	id := envelope.DeliveryID(key)
	if req.Path != "/ops" || req.ID != id || req.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(req.Header.Get("User-Agent"), "Herald") {
		t.Errorf("request to %s with id %q and headers %v; want /ops, %s, JSON", req.Path, req.ID, req.Header, id)
	}
	if len(r.MessageIDs) != 1 || r.MessageIDs[0] != id || len(sent) != 1 || sent[0] != id {
		t.Errorf("receipt %v, Sent %v; want the delivery id %s", r.MessageIDs, sent, id)
	}
	want := map[string]any{
		"type": "notify.send", "delivery_id": id, "intent": "send", "butler": "health", "recipient": "ops",
		"subject": "Dose", "message": "Dose **taken** at 08:00", "urgency": "high", "topic": "workflow", "level": "warn",
	}
	if fmt.Sprint(req.Payload) != fmt.Sprint(want) {
		t.Errorf("body\n got %v\nwant %v", req.Payload, want)
	}
}

// An attempt whose outcome was lost is sent again as the same webhook: the
// same id and the same bytes, so a receiver keeps one.
func TestRetryIsTheSameWebhook(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	d := deliver.Delivery{Key: key, Intent: "send", Butler: "health", Message: "once", Urgency: "normal"}
	for range 2 {
		if _, err := s.Deliver(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].ID != reqs[1].ID || string(reqs[0].Body) != string(reqs[1].Body) {
		t.Fatalf("two attempts sent %d requests, ids %q/%q; want the same webhook twice", len(reqs), reqs[0].ID, reqs[len(reqs)-1].ID)
	}
	if len(srv.Accepted()) != 1 || !reqs[1].Duplicate {
		t.Errorf("the receiver kept %d; want the second recognised as a duplicate", len(srv.Accepted()))
	}
}

func TestRecipients(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	both := map[string]string{"ops": srv.URL("/ops"), "pager": srv.URL("/pager")}
	for _, tc := range []struct {
		name       string
		recipients map[string]string
		noDefault  bool
		d          deliver.Delivery
		wantPath   string // "" expects a validation error containing wantErr
		wantErr    []string
	}{
		{name: "default", recipients: both, d: deliver.Delivery{Intent: "send", Message: "x"}, wantPath: "/ops"},
		{name: "named", recipients: both, d: deliver.Delivery{Intent: "send", Message: "x", Recipient: "pager"}, wantPath: "/pager"},
		{name: "the only recipient is the default", recipients: map[string]string{"pager": srv.URL("/pager")},
			d: deliver.Delivery{Intent: "send", Message: "x"}, wantPath: "/pager"},
		{name: "reply goes to the recipient named like the sender", recipients: both,
			d: deliver.Delivery{Intent: "reply", Message: "x", Sender: "pager", Thread: "pr-1"}, wantPath: "/pager"},
		{name: "reply from an unknown sender goes to the default", recipients: both,
			d: deliver.Delivery{Intent: "reply", Message: "x", Sender: "webhook:ci", Thread: "pr-1"}, wantPath: "/ops"},
		{name: "a send ignores the sender", recipients: both,
			d: deliver.Delivery{Intent: "send", Message: "x", Sender: "pager"}, wantPath: "/ops"},
		{name: "unknown name", recipients: both, d: deliver.Delivery{Intent: "send", Message: "x", Recipient: "nope"},
			wantErr: []string{`"nope"`, `"ops", "pager"`}},
		{name: "a URL is not a name", recipients: both, d: deliver.Delivery{Intent: "send", Message: "x", Recipient: "https://evil.example.com/"},
			wantErr: []string{"is a name", `"ops", "pager"`}},
		{name: "no default among several", recipients: both, noDefault: true, d: deliver.Delivery{Intent: "send", Message: "x"},
			wantErr: []string{"default_recipient", `"ops", "pager"`}},
		{name: "no recipients", recipients: nil, d: deliver.Delivery{Intent: "send", Message: "x"},
			wantErr: []string{"no recipients"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSender(t, secret, tc.recipients, func(in *config.Integration) {
				if tc.noDefault {
					in.Settings.(*webhook.Config).Default = ""
				}
				in.Inbound.Enabled = tc.recipients == nil // a webhook that only receives
			})
			before := len(srv.Requests())
			_, err := s.Deliver(t.Context(), tc.d)
			reqs := srv.Requests()[before:]
			if tc.wantPath == "" {
				if envelope.ClassOf(err) != "validation_error" || len(reqs) != 0 {
					t.Fatalf("err %v with %d requests, want a validation_error and none", err, len(reqs))
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != 1 || reqs[0].Path != tc.wantPath || reqs[0].Payload["recipient"] != strings.TrimPrefix(tc.wantPath, "/") {
				t.Errorf("requests %+v, want one to %s", reqs, tc.wantPath)
			}
		})
	}
}

func TestReplyAndReact(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "reply", Butler: "health", Message: "Looking into it", Thread: "pr-1234", Sender: "github-actions"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Key: strings.Repeat("8", 64), Intent: "react", Butler: "health", Emoji: "👀", Thread: "pr-1234", Sender: "github-actions"}); err != nil {
		t.Fatal(err)
	}
	got := srv.Accepted()
	if len(got) != 2 {
		t.Fatalf("%d accepted, want 2", len(got))
	}
	reply, react := got[0].Payload, got[1].Payload
	if reply["type"] != "notify.reply" || reply["intent"] != "reply" || reply["thread"] != "pr-1234" || reply["sender"] != "github-actions" || reply["message"] != "Looking into it" {
		t.Errorf("reply body %v", reply)
	}
	if react["type"] != "notify.react" || react["intent"] != "react" || react["emoji"] != "👀" || react["thread"] != "pr-1234" || react["message"] != nil {
		t.Errorf("react body %v", react)
	}
	for _, d := range []deliver.Delivery{
		{Intent: "react", Thread: "pr-1"},
		{Intent: "send", Message: "  "},
		{Intent: "reply", Thread: "pr-1"},
		{Intent: "shout", Message: "x"},
	} {
		if _, err := s.Deliver(t.Context(), d); envelope.ClassOf(err) != "validation_error" {
			t.Errorf("%+v: %v, want a validation_error", d, err)
		}
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d requests, want no more for refused deliveries", n)
	}
}

func TestErrorClasses(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	for _, tc := range []struct {
		code  int
		class string
		says  string
	}{
		{301, "not_found", "redirect"},
		{400, "validation_error", "refused"},
		{401, "forbidden", secretEnv},
		{403, "forbidden", "secret"},
		{404, "not_found", "recipients.ops"},
		{408, "target_unavailable", "unavailable"},
		{409, "validation_error", "refused"},
		{410, "not_found", "no longer"},
		{413, "validation_error", "refused"},
		{422, "validation_error", "refused"},
		{425, "target_unavailable", "unavailable"},
		{429, "target_unavailable", "unavailable"},
		{500, "target_unavailable", "unavailable"},
		{502, "target_unavailable", "unavailable"},
		{503, "target_unavailable", "unavailable"},
		{504, "target_unavailable", "unavailable"},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			srv.FailNext(tc.code, 0)
			called := false
			_, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Message: "x", Sent: func(string) error { called = true; return nil }})
			if got := envelope.ClassOf(err); got != tc.class {
				t.Fatalf("%d: class %s (%v), want %s", tc.code, got, err, tc.class)
			}
			if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), `recipient "ops"`) || !strings.Contains(err.Error(), fmt.Sprint(tc.code)) {
				t.Errorf("%d: error %q should name the recipient, the status and %q", tc.code, err, tc.says)
			}
			if called {
				t.Error("Sent was called for a refused webhook")
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	for _, tc := range []struct {
		name     string
		code     int
		header   string
		min, max time.Duration
	}{
		{"429 in seconds", 429, "7", 7 * time.Second, 7 * time.Second},
		{"503 in seconds", 503, "120", 2 * time.Minute, 2 * time.Minute},
		{"503 as an HTTP date", 503, time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat), 85 * time.Second, 91 * time.Second},
		{"a date in the past waits a second", 429, "Wed, 21 Oct 2015 07:28:00 GMT", time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.FailNextWith(tc.code, tc.header)
			_, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Message: "x"})
			var ra *envelope.RetryAfterError
			if !errors.As(err, &ra) {
				t.Fatalf("err %v, want an *envelope.RetryAfterError", err)
			}
			if ra.Wait < tc.min || ra.Wait > tc.max {
				t.Errorf("wait %s, want %s to %s", ra.Wait, tc.min, tc.max)
			}
			if envelope.ClassOf(err) != "overload_rejected" || !envelope.Retryable(err) {
				t.Errorf("class %s retryable %v, want a retryable overload_rejected", envelope.ClassOf(err), envelope.Retryable(err))
			}
		})
	}
	srv.FailNextWith(503, "soon")
	_, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Message: "x"})
	var ra *envelope.RetryAfterError
	if errors.As(err, &ra) || envelope.ClassOf(err) != "target_unavailable" {
		t.Errorf("unreadable Retry-After: %v, want a plain target_unavailable", err)
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	secret := webhooktest.NewSecret()
	target := webhooktest.NewServer(t, secret)
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL("/new")+"?token=moved-token-123", http.StatusPermanentRedirect)
	}))
	t.Cleanup(moved.Close)
	s := newSender(t, secret, map[string]string{"ops": moved.URL + "/old"})
	_, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Message: "x"})
	if envelope.ClassOf(err) != "not_found" || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("err %v, want a not_found about the redirect", err)
	}
	if strings.Contains(err.Error(), "moved-token-123") || strings.Contains(err.Error(), "/new") {
		t.Errorf("the error shows the redirect's path or query: %v", err)
	}
	if n := len(target.Requests()); n != 0 {
		t.Errorf("the redirect was followed: the target got %d requests", n)
	}
}

// Webhook URLs carry tokens (user:password@, a path like Slack's, a query);
// the secret signs. None of them may reach an error or a log line, even
// when the receiver echoes them back.
func TestSecretsNeverShown(t *testing.T) {
	secret := webhooktest.NewSecret()
	b64 := strings.TrimPrefix(secret, "whsec_")
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		status := http.StatusBadRequest
		if r.URL.Query().Get("status") == "401" {
			status = http.StatusUnauthorized
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "bad request to %s by %s:%s signed %s with %s (%s)", r.URL.String(), user, pass, r.Header.Get("webhook-signature"), secret, b64)
	}))
	t.Cleanup(echo.Close)
	host := strings.TrimPrefix(echo.URL, "http://")
	secrets := []string{secret, b64, "hunter2pass", "T0KEN-IN-PATH-123", "sekrit-query-value", "sekrit%2Dquery"}
	check := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows %q: %s", what, s, text)
			}
		}
	}
	logs := &testkit.Buffer{}
	in := config.Integration{ID: "ci", Type: "webhook", Settings: &webhook.Config{SecretEnv: secretEnv, Default: "ops", Recipients: map[string]string{
		"ops":    "http://admin:hunter2pass@" + host + "/services/T0KEN-IN-PATH-123?token=sekrit-query-value",
		"denied": "http://" + host + "/services/T0KEN-IN-PATH-123?status=401&token=sekrit-query-value",
		"closed": "http://admin:hunter2pass@127.0.0.1:1/services/T0KEN-IN-PATH-123?token=sekrit-query-value",
	}}}
	s, err := webhook.New(in, env(t, secret, logs))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ops", "denied", "closed"} {
		_, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Message: "x", Recipient: name})
		if err == nil {
			t.Fatalf("%s: delivered", name)
		}
		check("the error for "+name, err.Error())
		if !strings.Contains(err.Error(), "http://"+strings.Split(host, ":")[0]) && name != "closed" {
			t.Errorf("the error for %s does not name the host: %v", name, err)
		}
	}
	// A bad secret or URL at start-up.
	for _, edit := range []func(*config.Integration){
		func(in *config.Integration) {
			in.Settings.(*webhook.Config).Recipients = map[string]string{"ops": "ftp://admin:hunter2pass@x/T0KEN-IN-PATH-123"}
		},
		func(in *config.Integration) {
			in.Settings.(*webhook.Config).Recipients = map[string]string{"ops": "http://[::1%zone/T0KEN-IN-PATH-123"}
		},
	} {
		bad := in
		edit(&bad)
		if _, err := webhook.New(bad, env(t, secret, logs)); err == nil {
			t.Error("a bad URL was accepted")
		} else {
			check("the start-up error", err.Error())
		}
	}
	short := "whsec_" + b64[:20]
	if _, err := webhook.New(in, env(t, short, logs)); err == nil {
		t.Error("a short secret was accepted")
	} else {
		check("the secret error", err.Error())
		if strings.Contains(err.Error(), b64[:20]) {
			t.Errorf("the secret error shows the secret: %v", err)
		}
	}
	check("the log", logs.String())
}

func TestUnreachable(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	srv.Close()
	_, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Message: "x"})
	if envelope.ClassOf(err) != "target_unavailable" || !envelope.Retryable(err) {
		t.Errorf("err %v, want a retryable target_unavailable", err)
	}
}

func TestDeadline(t *testing.T) {
	secret := webhooktest.NewSecret()
	// The deadline passes once the receiver has the whole webhook (before
	// its body is read, the POST may rightly not have gone out).
	ctx := delivertest.NewDeadline(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		ctx.Pass()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	s := newSender(t, secret, map[string]string{"ops": slow.URL})
	called := 0
	_, err := s.Deliver(ctx, deliver.Delivery{Key: key, Intent: "send", Message: "x", Begin: func() error { called++; return nil }})
	if envelope.ClassOf(err) != "timeout" || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want a timeout", err)
	}
	if called != 1 {
		t.Errorf("Begin called %d times, want 1: the call was made, its outcome is unknown", called)
	}
}

func TestBeginFailureSendsNothing(t *testing.T) {
	secret := webhooktest.NewSecret()
	srv := webhooktest.NewServer(t, secret)
	s := newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
	stop := errors.New("ledger down")
	_, err := s.Deliver(t.Context(), deliver.Delivery{Key: key, Intent: "send", Message: "x", Begin: func() error { return stop }})
	if !errors.Is(err, stop) {
		t.Errorf("err %v, want Begin's", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.Deliver(ctx, deliver.Delivery{Key: key, Intent: "send", Message: "x", Begin: func() error { t.Error("Begin called on a cancelled context"); return nil }})
	if envelope.ClassOf(err) != "target_unavailable" {
		t.Errorf("cancelled: %v, want target_unavailable: nothing was sent, so nothing is uncertain", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	secret := webhooktest.NewSecret()
	for _, tc := range []struct {
		name   string
		edit   func(*config.Integration)
		secret string
		want   string
	}{
		{"no secret_env", func(in *config.Integration) { in.Settings.(*webhook.Config).SecretEnv = "" }, secret, "secret_env"},
		{"secret_env unset", nil, "", secretEnv},
		{"not a secret", nil, "hunter2", "whsec_"},
		{"not http", func(in *config.Integration) { in.Settings.(*webhook.Config).Recipients["ops"] = "ftp://x/y" }, secret, "recipients.ops"},
		{"no host", func(in *config.Integration) { in.Settings.(*webhook.Config).Recipients["ops"] = "https:///y" }, secret, "recipients.ops"},
		{"relative", func(in *config.Integration) { in.Settings.(*webhook.Config).Recipients["ops"] = "/hooks/y" }, secret, "recipients.ops"},
		{"default names none", func(in *config.Integration) { in.Settings.(*webhook.Config).Default = "pager" }, secret, `default_recipient "pager"`},
		{"empty name", func(in *config.Integration) { in.Settings.(*webhook.Config).Recipients[" "] = "https://x/y" }, secret, "not a recipient name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := config.Integration{ID: "ci", Type: "webhook", Settings: &webhook.Config{SecretEnv: secretEnv, Default: "ops", Recipients: map[string]string{"ops": "https://hooks.example.com/herald"}}}
			if tc.edit != nil {
				tc.edit(&in)
			}
			_, err := webhook.New(in, env(t, tc.secret, nil))
			if err == nil || !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want a config.ErrInvalid naming %q", err, tc.want)
			}
		})
	}
	// Inbound only: no recipients is fine.
	in := config.Integration{ID: "ci", Type: "webhook", Inbound: config.Inbound{Enabled: true}, Settings: &webhook.Config{SecretEnv: secretEnv}}
	if _, err := webhook.New(in, env(t, secret, nil)); err != nil {
		t.Errorf("an integration without recipients: %v", err)
	}
}

func TestClose(t *testing.T) {
	secret := webhooktest.NewSecret()
	s := newSender(t, secret, map[string]string{"ops": "https://hooks.example.com/x"})
	c, ok := s.(deliver.Closer)
	if !ok {
		t.Fatal("the sender is not a deliver.Closer")
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}
