package webtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/services/messenger/web"
)

// ClientFrom is an HTTP client whose connections come from the loopback
// address ip (127.0.0.2, …), so that a test can stand for other machines.
func ClientFrom(t testing.TB, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// NewCookie is a made-up visitor cookie.
func NewCookie() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Consumers is how many consumers the web chat's conversation stream has.
func Consumers(t testing.TB, js jetstream.JetStream) int {
	t.Helper()
	s, err := js.Stream(t.Context(), web.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

// Stream is an event stream request: open, its first line read and left
// open until Close or the end of the test, or refused.
type Stream struct {
	// Code is the answer's HTTP status; RetryAfter and Refusal (the JSON
	// error) are a refusal's.
	Code       int
	RetryAfter string
	Refusal    string

	body   io.Closer
	cancel context.CancelFunc
}

// Close ends the stream, as a closed tab does.
func (s *Stream) Close() {
	s.cancel()
	if s.body != nil {
		s.body.Close()
	}
}

// OpenStream asks the page at base for an event stream with cookie as the
// visitor cookie; with "" the request carries none of its own (the
// client's jar may add one).
func OpenStream(t testing.TB, client *http.Client, base, cookie string) *Stream {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/events", nil)
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "herald_web", Value: cookie})
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Error(err)
		return &Stream{cancel: func() {}}
	}
	s := &Stream{Code: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), cancel: cancel}
	t.Cleanup(s.Close)
	if resp.StatusCode != http.StatusOK {
		var refusal struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&refusal)
		s.Refusal = refusal.Error
		resp.Body.Close()
		return s
	}
	s.body = resp.Body
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "retry: 2000\n" {
		t.Errorf("an open stream starts with %q (%v)", line, err)
	}
	return s
}
