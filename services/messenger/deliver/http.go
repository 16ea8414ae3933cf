package deliver

import (
	"net/http"
	"slices"
	"sync"
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
