package butler_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
)

// TestReadiness: a butler's /readyz is 503 until its background work runs,
// 200 while it does (NATS answering, its inbox there), 503 once it stopped;
// /healthz says it is alive throughout.
func TestReadiness(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	b, err := butler.New(t.Context(), butler.Options{Name: "assistant", Config: config.Default(), NC: nc, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b.Handler())
	t.Cleanup(hs.Close)
	readyz := func() (int, obs.Report) {
		t.Helper()
		resp, err := http.Get(hs.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r obs.Report
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, r
	}
	check := butler.HealthCheck("assistant")
	if code, r := readyz(); code != http.StatusServiceUnavailable || r.Checks[check] != obs.ErrStarting.Error() || r.Checks["nats"] != "ok" {
		t.Fatalf("before Run: %d %+v", code, r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, func() bool { code, _ := readyz(); return code == http.StatusOK }, "ready while running")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code, r := readyz(); code != http.StatusServiceUnavailable || r.Checks[check] != obs.ErrStopped.Error() {
		t.Fatalf("after Run: %d %+v", code, r)
	}
	resp, err := http.Get(hs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz after Run: %d", resp.StatusCode)
	}
}

// TestNotifyCallsCounted: each call of a sending tool is counted by result;
// a call the tool refuses is an error.
func TestNotifyCallsCounted(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	m := obs.NewMetrics()
	b, err := butler.New(t.Context(), butler.Options{Name: "assistant", Config: config.Default(), NC: nc, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewInProcessClient(b.MCPServer())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := butlertest.Initialize(t, c, "2025-06-18", butlertest.Hello{}); err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"notify", map[string]any{"message": "hi", "bogus": true}},
		{"reply", map[string]any{"request_id": "nosuch", "message": "hi"}},
	} {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = call.tool, call.args
		res, err := c.CallTool(t.Context(), req)
		if err != nil || !res.IsError {
			t.Fatalf("%s %v: %v %+v", call.tool, call.args, err, res)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := `herald_notify_calls_total{butler="assistant",result="error"} 2`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("no %s in /metrics", want)
	}
}
