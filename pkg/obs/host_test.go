package obs_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/heraldhq/herald/pkg/obs"
)

// TestOperatorEndpointsCheckHost: /healthz, /readyz and /metrics answer
// loopback names, addresses and one-label service names (compose,
// Prometheus), and refuse a dotted name a web page could rebind to the
// machine; what a channel mounts (a webhook) answers any Host.
func TestOperatorEndpointsCheckHost(t *testing.T) {
	srv := obs.NewServer("0.0.0.0:8790", obs.NewHealth(), obs.NewMetrics(), nil)
	hooks := http.NewServeMux()
	hooks.Handle("POST /hooks/ci", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	srv.Mount(hooks)
	named := obs.NewServer("metrics.internal:8790", obs.NewHealth(), obs.NewMetrics(), nil)
	for _, tt := range []struct {
		srv          *obs.Server
		method, path string
		host         string
		want         int
	}{
		{srv, "GET", "/metrics", "localhost:8790", http.StatusOK},
		{srv, "GET", "/metrics", "127.0.0.1:8790", http.StatusOK},
		{srv, "GET", "/readyz", "[::1]:8790", http.StatusOK},
		{srv, "GET", "/healthz", "10.0.0.5:8790", http.StatusOK},
		{srv, "GET", "/metrics", "messenger:8790", http.StatusOK},
		{srv, "GET", "/metrics", "evil.example:8790", http.StatusMisdirectedRequest},
		{srv, "GET", "/readyz", "evil.example", http.StatusMisdirectedRequest},
		{srv, "GET", "/healthz", "Evil.Example.:8790", http.StatusMisdirectedRequest},
		{srv, "POST", "/hooks/ci", "hooks.example.com", http.StatusOK},
		{named, "GET", "/metrics", "metrics.internal:8790", http.StatusOK},
		{named, "GET", "/metrics", "other.internal:8790", http.StatusMisdirectedRequest},
	} {
		req := httptest.NewRequest(tt.method, tt.path, nil)
		req.Host = tt.host
		rec := httptest.NewRecorder()
		tt.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s %s for Host %s: %d, want %d", tt.method, tt.path, tt.host, rec.Code, tt.want)
		}
	}
}

// TestMountSwapsChannelsEndpoints: a messenger restarting on a reload
// unmounts its endpoints and mounts new ones; in between a provider is told
// to come back (503, Retry-After), and nothing mounted ever is a 404.
func TestMountSwapsChannelsEndpoints(t *testing.T) {
	srv := obs.NewServer("127.0.0.1:0", obs.NewHealth(), nil, nil)
	post := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/hooks/ci", nil))
		return rec
	}
	if rec := post(); rec.Code != http.StatusNotFound {
		t.Fatalf("nothing mounted: %d, want 404", rec.Code)
	}
	mount := func(code int) {
		mux := http.NewServeMux()
		mux.Handle("POST /hooks/ci", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
		srv.Mount(mux)
	}
	mount(http.StatusOK)
	if rec := post(); rec.Code != http.StatusOK {
		t.Fatalf("mounted: %d, want 200", rec.Code)
	}
	srv.Mount(nil)
	if rec := post(); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("while restarting: %d (Retry-After %q), want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	mount(http.StatusAccepted)
	if rec := post(); rec.Code != http.StatusAccepted {
		t.Fatalf("mounted anew: %d, want the new endpoints' 202", rec.Code)
	}
}
