package deliver_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
)

// botToken is a secret of the shape providers put in URLs and headers.
const botToken = "123456:AAsecret-token_never-shown"

// call makes one call with a Caller scrubbing botToken, as a sender does,
// with the token in the URL's path and query and in a header.
func call(t *testing.T, c deliver.Caller, base string) (*deliver.Answer, error) {
	t.Helper()
	if c.Client == nil {
		c.Client = deliver.NewClient(callTimeout)
	}
	c.Secrets = deliver.NewScrubber("<token>", botToken)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/bot"+botToken+"/sendMessage?key="+botToken, strings.NewReader(`{"text":"Dose taken"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+botToken)
	return c.Do(req)
}

// answering is a provider answering every call with status, header and body.
func answering(t *testing.T, status int, header http.Header, body string) string {
	t.Helper()
	return provider(t, func(w http.ResponseWriter, _ <-chan struct{}) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
}

// TestCallerAnswers: over real connections, a 2xx is the answer; any other
// status is a *CallError holding the answer, its status and its
// Retry-After, in seconds or as an HTTP date, at least a second.
func TestCallerAnswers(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		header     http.Header
		body       string
		class      error // nil: the answer
		retryAfter [2]time.Duration
		limited    bool // a rate limit (RateLimited)
	}{
		{name: "200", status: http.StatusOK, body: `{"ok":true}`},
		{name: "202 with a Retry-After it does not need", status: http.StatusAccepted, header: http.Header{"Retry-After": {"5"}}},
		{
			name: "429 with Retry-After in seconds", status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"7"}},
			body: `{"ok":false,"error":"ratelimited"}`, class: envelope.ErrTargetUnavailable,
			retryAfter: [2]time.Duration{7 * time.Second, 7 * time.Second}, limited: true,
		},
		{
			name: "429 with Retry-After as an HTTP date", status: http.StatusTooManyRequests,
			header: http.Header{"Retry-After": {time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)}},
			class:  envelope.ErrTargetUnavailable, retryAfter: [2]time.Duration{85 * time.Second, 91 * time.Second}, limited: true,
		},
		{
			name: "429 without Retry-After waits a second", status: http.StatusTooManyRequests,
			class: envelope.ErrTargetUnavailable, limited: true,
		},
		{
			name: "503 with a date in the past waits a second", status: http.StatusServiceUnavailable,
			header: http.Header{"Retry-After": {"Wed, 21 Oct 2015 07:28:00 GMT"}},
			class:  envelope.ErrTargetUnavailable, retryAfter: [2]time.Duration{time.Second, time.Second},
		},
		{
			name: "503 with an unreadable Retry-After", status: http.StatusServiceUnavailable, header: http.Header{"Retry-After": {"soon"}},
			class: envelope.ErrTargetUnavailable,
		},
		{name: "400", status: http.StatusBadRequest, body: `{"message":"Invalid Form Body"}`, class: envelope.ErrValidation},
		{name: "403", status: http.StatusForbidden, class: envelope.ErrForbidden},
		{name: "410", status: http.StatusGone, class: envelope.ErrNotFound},
		{name: "a 304 is no redirect to follow, but not delivered either", status: http.StatusNotModified, class: envelope.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ans, err := call(t, deliver.Caller{}, answering(t, tt.status, tt.header, tt.body))
			if tt.class == nil {
				if err != nil || ans.Status != tt.status || string(ans.Body) != tt.body {
					t.Fatalf("Do = %+v, %v; want the answer %d %q", ans, err, tt.status, tt.body)
				}
				return
			}
			failed, ok := errors.AsType[*deliver.CallError](err)
			if ans != nil || !ok {
				t.Fatalf("Do = %+v, %v; want a *CallError", ans, err)
			}
			if failed.Status != tt.status || failed.Answer == nil || failed.Answer.Status != tt.status || string(failed.Answer.Body) != tt.body {
				t.Errorf("CallError %+v, want status %d with the answer %q", failed, tt.status, tt.body)
			}
			if failed.RetryAfter < tt.retryAfter[0] || failed.RetryAfter > tt.retryAfter[1] {
				t.Errorf("RetryAfter = %s, want %s to %s", failed.RetryAfter, tt.retryAfter[0], tt.retryAfter[1])
			}
			if wait, limited := deliver.RateLimited(err); limited != tt.limited || limited && wait != max(failed.RetryAfter, time.Second) {
				t.Errorf("RateLimited = %s, %v; want %v, Retry-After or a second", wait, limited, tt.limited)
			}
			if failed.Unknown || failed.Class() != tt.class {
				t.Errorf("Unknown %v, class %v; want known, %v", failed.Unknown, failed.Class(), tt.class)
			}
			if !strings.Contains(err.Error(), fmt.Sprint(tt.status)) {
				t.Errorf("error %q does not name the status", err)
			}
		})
	}
}

// TestCallerOutcome: a call the provider may have carried out without
// saying so is Unknown, class timeout; one that cannot have reached it, or
// that it answered, is not. The verdict is deliver.OutcomeUnknown's, made
// by the Caller itself.
func TestCallerOutcome(t *testing.T) {
	cutShort := func(t *testing.T) string {
		return provider(t, func(w http.ResponseWriter, _ <-chan struct{}) {
			w.Header().Set("Content-Length", "100")
			_, _ = io.WriteString(w, `{"ok":true,`)
			http.NewResponseController(w).Flush()
			delivertest.HangUp(w)
		})
	}
	tests := []struct {
		name    string
		caller  deliver.Caller
		url     func(t *testing.T) string
		unknown bool
		status  int
	}{
		{
			name: "a hang-up after the request was written",
			url: func(t *testing.T) string {
				return provider(t, func(w http.ResponseWriter, _ <-chan struct{}) { delivertest.HangUp(w) })
			},
			unknown: true,
		},
		{
			name: "an answer later than the client's timeout",
			url: func(t *testing.T) string {
				return provider(t, func(_ http.ResponseWriter, release <-chan struct{}) { <-release })
			},
			unknown: true,
		},
		{name: "an answer cut short", url: cutShort, unknown: true, status: http.StatusOK},
		{name: "a refused connection", url: closedPort},
		{name: "a redirect", url: func(t *testing.T) string { return delivertest.NewMoved(t).URL }, status: http.StatusTemporaryRedirect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, tt.caller, tt.url(t))
			failed, ok := errors.AsType[*deliver.CallError](err)
			if !ok {
				t.Fatalf("Do: %v, want a *CallError", err)
			}
			if failed.Unknown != tt.unknown || failed.Status != tt.status || failed.Answer != nil {
				t.Errorf("CallError %+v (%v): want Unknown %v, status %d, no answer", failed, failed, tt.unknown, tt.status)
			}
			want := envelope.ErrTargetUnavailable
			switch {
			case tt.unknown:
				want = envelope.ErrTimeout
			case tt.status != 0:
				want = envelope.ErrNotFound
			}
			if failed.Class() != want {
				t.Errorf("class %v, want %v", failed.Class(), want)
			}
		})
	}

	t.Run("an answer cut short when the status is the answer", func(t *testing.T) {
		ans, err := call(t, deliver.Caller{StatusAnswers: true}, cutShort(t))
		if err != nil || ans.Status != http.StatusOK || string(ans.Body) != `{"ok":true,` {
			t.Fatalf("Do = %+v, %v; want the 200 with what came of its body", ans, err)
		}
	})
}

// TestCallerRedirect: a 3xx is followed nowhere; with NewClient it is a
// Redirect saying where it pointed, with a client that hands the 3xx back
// an answer of that status. Both are not_found.
func TestCallerRedirect(t *testing.T) {
	moved := delivertest.NewMoved(t)
	_, err := call(t, deliver.Caller{}, moved.URL)
	failed, _ := errors.AsType[*deliver.CallError](err)
	if failed == nil || failed.Redirect == nil || failed.Redirect.Status != http.StatusTemporaryRedirect ||
		!strings.HasPrefix(failed.Redirect.Location, moved.Target.URL+"/bot<token>/sendMessage") {
		t.Fatalf("Do: %+v, want a Redirect of 307 pointing to the target, scrubbed", failed)
	}
	if _, ok := errors.AsType[*deliver.RedirectError](err); !ok || failed.Class() != envelope.ErrNotFound {
		t.Errorf("errors.As finds no RedirectError in %v, or class %v is not not_found", err, failed.Class())
	}

	keeps := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	_, err = call(t, deliver.Caller{Client: keeps}, moved.URL)
	failed, _ = errors.AsType[*deliver.CallError](err)
	if failed == nil || failed.Redirect != nil || failed.Answer == nil || failed.Status != http.StatusTemporaryRedirect || failed.Class() != envelope.ErrNotFound {
		t.Fatalf("Do with a client keeping 3xx: %+v, want the 307 as an answer, not_found", failed)
	}
	if n := moved.Followed(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

// TestCallerScrubs: what a provider echoes of the request (its URL, its
// Authorization header), in its answer or where it redirects, and what a
// transport error quotes, never shows a secret in a CallError.
func TestCallerScrubs(t *testing.T) {
	echo := func(status int) func(t *testing.T) string {
		return func(t *testing.T) string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if status/100 == 3 {
					http.Redirect(w, r, r.URL.String()+"&again="+r.Header.Get("Authorization"), status)
					return
				}
				w.WriteHeader(status)
				_, _ = fmt.Fprintf(w, "no such bot\n\tat %s\nwith %s", r.URL, r.Header.Get("Authorization"))
			}))
			t.Cleanup(srv.Close)
			return srv.URL
		}
	}
	for name, url := range map[string]func(t *testing.T) string{
		"an answer echoing the request":  echo(http.StatusNotFound),
		"a redirect echoing the request": echo(http.StatusFound),
		"a refused connection":           closedPort,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := call(t, deliver.Caller{}, url(t))
			if err == nil {
				t.Fatal("the call succeeded")
			}
			_, secret, _ := strings.Cut(botToken, ":")
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows the token", err)
			}
			if failed, _ := errors.AsType[*deliver.CallError](err); failed.Says != "" && !strings.Contains(failed.Says, "/bot<token>/sendMessage?key=<token> with Bearer <token>") {
				t.Errorf("Says %q, want the answer on one line with the token scrubbed", failed.Says)
			}
		})
	}
}

// TestCallerBoundsTheAnswer: no more than MaxAnswer of an answer is held.
func TestCallerBoundsTheAnswer(t *testing.T) {
	ans, err := call(t, deliver.Caller{MaxAnswer: 10}, answering(t, http.StatusOK, nil, strings.Repeat("a", 100)))
	if err != nil || len(ans.Body) != 10 {
		t.Fatalf("Do = %+v, %v; want the first 10 bytes of the answer", ans, err)
	}
}

// TestStatusClass: the class of each status, as every HTTP channel
// reports it.
func TestStatusClass(t *testing.T) {
	for _, tt := range []struct {
		statuses []int
		class    error
	}{
		{[]int{300, 301, 302, 307, 308}, envelope.ErrNotFound},
		{[]int{401, 403}, envelope.ErrForbidden},
		{[]int{404, 410}, envelope.ErrNotFound},
		{[]int{408, 425, 429, 500, 502, 503, 504, 0}, envelope.ErrTargetUnavailable},
		{[]int{400, 405, 409, 413, 422}, envelope.ErrValidation},
	} {
		for _, status := range tt.statuses {
			if got := deliver.StatusClass(status); got != tt.class {
				t.Errorf("StatusClass(%d) = %v, want %v", status, got, tt.class)
			}
		}
	}
}

// TestParseRetryAfter: seconds or an HTTP date, at least a second.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		header string
		wait   time.Duration
		ok     bool
	}{
		{"120", 2 * time.Minute, true},
		{" 7 ", 7 * time.Second, true},
		{"0", time.Second, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), time.Second, true},
		{"99999999999999", 1 << 31 * time.Second, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		if wait, ok := deliver.ParseRetryAfter(tt.header, now); wait != tt.wait || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %s, %v; want %s, %v", tt.header, wait, ok, tt.wait, tt.ok)
		}
	}
}

// ExampleCaller is a REST provider's call as a channel makes it: the token
// in a header, a refusal classified by its status, and no token in the
// error, though the provider echoed it.
func ExampleCaller() {
	const token = "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprintf(w, `{"message": "Missing Permissions for %s", "code": 50013}`, r.Header.Get("Authorization"))
	}))
	defer api.Close()

	c := deliver.Caller{Client: deliver.NewClient(30 * time.Second), Secrets: deliver.NewScrubber("<token>", token)}
	req, err := http.NewRequest(http.MethodPost, api.URL+"/api/v10/channels/42/messages", strings.NewReader(`{"content":"Dose taken"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	req.Header.Set("Authorization", "Bot "+token)
	_, err = c.Do(req)
	if failed, ok := errors.AsType[*deliver.CallError](err); ok {
		fmt.Println(failed.Class(), failed.Unknown)
		fmt.Println(failed)
	}
	// Output:
	// forbidden false
	// HTTP 403 Forbidden: {"message": "Missing Permissions for Bot <token>", "code": 50013}
}
