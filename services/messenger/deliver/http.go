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
