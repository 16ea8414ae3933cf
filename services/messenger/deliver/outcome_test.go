package deliver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
)

// callTimeout is the client's timeout in these tests: what a provider that
// answers later than this looks like, without waiting 30 seconds.
const callTimeout = 200 * time.Millisecond

// provider starts a fake provider whose handler reads each request whole
// and then does what answer does; a handler blocked on the returned
// channel is released when the test ends.
func provider(t *testing.T, answer func(w http.ResponseWriter, release <-chan struct{})) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		answer(w, release)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: handlers return, then the server closes
	return srv.URL
}

// closedPort is an address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	return "http://" + testkit.FreeAddr(t)
}

// post makes one provider call as a sender does, reading the answer whole,
// and reports whether the request was written, and its error.
func post(ctx context.Context, client *http.Client, url string) (bool, error) {
	ctx, written := deliver.TraceWrites(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"text":"Dose taken"}`))
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return written(), err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return true, err
	}
	if resp.StatusCode != http.StatusOK {
		return true, fmt.Errorf("answered %d", resp.StatusCode)
	}
	return true, nil
}

// TestOutcomeUnknown: over real connections, a call the provider may have
// carried out without saying so (its answer came too late, or not at all,
// or only in part) is unknown; one that cannot have reached it, or that it
// answered, is not.
func TestOutcomeUnknown(t *testing.T) {
	hang := func(w http.ResponseWriter, release <-chan struct{}) { <-release }
	tests := []struct {
		name    string
		url     func(t *testing.T) string
		ctx     func(t *testing.T) context.Context
		unknown bool
	}{
		{
			name:    "answer after the client's timeout",
			url:     func(t *testing.T) string { return provider(t, hang) },
			unknown: true,
		},
		{
			name: "connection reset after the request was read",
			url: func(t *testing.T) string {
				return provider(t, func(w http.ResponseWriter, _ <-chan struct{}) { delivertest.HangUp(w) })
			},
			unknown: true,
		},
		{
			name: "answer cut short",
			url: func(t *testing.T) string {
				return provider(t, func(w http.ResponseWriter, _ <-chan struct{}) {
					w.Header().Set("Content-Length", "100")
					_, _ = io.WriteString(w, `{"ok":true,`)
					http.NewResponseController(w).Flush()
					delivertest.HangUp(w)
				})
			},
			unknown: true,
		},
		{
			name: "answer's body slower than the client's timeout",
			url: func(t *testing.T) string {
				return provider(t, func(w http.ResponseWriter, release <-chan struct{}) {
					w.WriteHeader(http.StatusOK)
					http.NewResponseController(w).Flush()
					<-release
				})
			},
			unknown: true,
		},
		{
			name: "delivery's deadline while waiting for the answer",
			url:  func(t *testing.T) string { return provider(t, hang) },
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), callTimeout/4)
				t.Cleanup(cancel)
				return ctx
			},
			unknown: true,
		},
		{
			name: "delivery stopped before the call",
			url:  func(t *testing.T) string { return provider(t, hang) },
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx
			},
		},
		{name: "connection refused", url: closedPort},
		{
			name: "TLS handshake refused",
			url: func(t *testing.T) string {
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
				srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
				srv.StartTLS()
				t.Cleanup(srv.Close)
				return srv.URL // its certificate is not trusted
			},
		},
		{
			name: "a complete 503",
			url: func(t *testing.T) string {
				return provider(t, func(w http.ResponseWriter, _ <-chan struct{}) {
					http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
				})
			},
		},
		{name: "a redirect", url: func(t *testing.T) string { return delivertest.NewMoved(t).URL }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx(t)
			}
			written, err := post(ctx, deliver.NewClient(callTimeout), tt.url(t))
			if err == nil {
				t.Fatal("the call succeeded")
			}
			if got := deliver.OutcomeUnknown(err, written); got != tt.unknown {
				t.Errorf("OutcomeUnknown(%v, written %v) = %v, want %v", err, written, got, tt.unknown)
			}
		})
	}
}

// TestOutcomeUnknownWithoutHTTP: the errors of a session that is not HTTP
// (SMTP after the end of the mail) are judged the same way.
func TestOutcomeUnknownWithoutHTTP(t *testing.T) {
	deadline := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		name    string
		err     error
		written bool
		want    bool
	}{
		{"read deadline", deadline, true, true},
		{"connection closed", io.EOF, true, true},
		{"closed under the reader", fmt.Errorf("reading the reply: %w", net.ErrClosed), true, true},
		{"garbled reply", textproto.ProtocolError("short response: 25"), true, true},
		{"a reply refusing", errors.New("554 5.7.1 message refused"), true, false},
		{"before anything was written", deadline, false, false},
		{"no error", nil, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deliver.OutcomeUnknown(tt.err, tt.written); got != tt.want {
				t.Errorf("OutcomeUnknown(%v, %v) = %v, want %v", tt.err, tt.written, got, tt.want)
			}
		})
	}
}
