package deliver

import (
	"net/http"
	"sync"
)

// HTTP is where the receivers of channels that push to Herald (webhooks,
// Slack's Events API) mount their endpoints, in their factories; the
// messenger serves it on http_listen when anything is mounted.
type HTTP struct {
	mu  sync.Mutex
	mux *http.ServeMux
	n   int
}

// NewHTTP is an empty set of endpoints.
func NewHTTP() *HTTP { return &HTTP{mux: http.NewServeMux()} }

// Handle mounts handler at pattern ("POST /hooks/ci").
func (h *HTTP) Handle(pattern string, handler http.Handler) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mux.Handle(pattern, handler)
	h.n++
}

// Empty reports whether nothing is mounted.
func (h *HTTP) Empty() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n == 0
}

// ServeHTTP serves the mounted endpoints.
func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }
