package deliver

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// HTTP is where the receivers of channels that push to Herald (webhooks,
// Slack's Events API) mount their endpoints, in their factories; the
// messenger mounts them on the process's listener (http_listen).
type HTTP struct {
	mu       sync.Mutex
	mux      *http.ServeMux
	patterns []string
}

// NewHTTP is an empty set of endpoints.
func NewHTTP() *HTTP { return &HTTP{mux: http.NewServeMux()} }

// Handle mounts handler at pattern ("POST /hooks/ci").
func (h *HTTP) Handle(pattern string, handler http.Handler) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mux.Handle(pattern, handler)
	h.patterns = append(h.patterns, pattern)
}

// Patterns are the mounted patterns, in the order they were mounted.
func (h *HTTP) Patterns() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.patterns)
}

// ServeHTTP serves the mounted endpoints.
func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// ProviderConns is how many idle connections to one provider host a sender
// keeps: as many as the messenger delivers at once (bus.DefaultConcurrency).
// net/http keeps 2 by default, so 64 deliveries at once to one API would
// close and dial connections all the time.
const ProviderConns = 64

// NewTransport is a transport for a sender's calls to its provider: the
// default one (proxy from the environment, timeouts, HTTP/2) keeping
// ProviderConns idle connections per host. Each integration has its own, so
// one provider's connections never serve another's.
func NewTransport() *http.Transport {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment}
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = ProviderConns
	return t
}

// RedirectError is a provider's answer pointing elsewhere (a 3xx). Senders
// follow no redirect: the chat id, the text and for 307/308 the whole body
// would go wherever the answer points, and a provider that moved is a
// configuration to fix (api_url), not a hop to take. Nothing is re-sent.
type RedirectError struct {
	Status   int    // the provider's status code
	Location string // where it pointed, its password redacted; a Caller scrubs its secrets from it
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("answered %d %s pointing to %s; Herald follows no redirect", e.Status, http.StatusText(e.Status), e.Location)
}

// NewClient is a sender's HTTP client for calls to its provider: its own
// NewTransport, the timeout of one call, and no redirect followed (a 3xx
// ends the call with a *RedirectError).
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: NewTransport(), CheckRedirect: refuseRedirect}
}

func refuseRedirect(next *http.Request, _ []*http.Request) error {
	e := &RedirectError{Location: next.URL.Redacted()}
	if next.Response != nil {
		e.Status = next.Response.StatusCode
	}
	return e
}
