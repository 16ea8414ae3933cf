package delivertest

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Moved is a provider that moved: every request to URL is answered with a
// 307 pointing to the same path on Target, which counts what reaches it. A
// sender that follows no redirect leaves Target's count at 0.
type Moved struct {
	URL    string
	Target *httptest.Server
	hits   atomic.Int64
}

// NewMoved starts a Moved provider, closed when the test ends.
func NewMoved(t testing.TB) *Moved {
	t.Helper()
	m := &Moved{}
	m.Target = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.hits.Add(1)
		http.Error(w, "the redirect was followed", http.StatusTeapot)
	}))
	t.Cleanup(m.Target.Close)
	from := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, m.Target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(from.Close)
	m.URL = from.URL
	return m
}

// Followed is how many requests reached the redirect's target.
func (m *Moved) Followed() int64 { return m.hits.Load() }
