package switchboard_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/switchboard"
)

// startObserved runs a switchboard recording to m and h until the test ends.
func (f *fleet) startObserved(t *testing.T, m *obs.Metrics, h *obs.Health) {
	t.Helper()
	nc, _ := f.srv.Connect()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() {
		done <- switchboard.Run(ctx, switchboard.Options{Config: f.cfg, NC: nc, Log: log, Metrics: m, Health: h})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("switchboard stopped with %v", err)
		}
	})
}

// TestInboundCounted: every inbound message is counted once, accepted or
// dropped with the reason its audit record gives, and an approver's verdict
// is counted as an answer.
func TestInboundCounted(t *testing.T) {
	f := newFleet(t)
	m, h := obs.NewMetrics(), obs.NewHealth()
	f.startObserved(t, m, h)
	store := f.approvals(t)
	now := time.Now()
	if err := store.Create(t.Context(), approval.Request{ID: "abcde", Butler: "health", Session: "s", ToolName: "Bash", CreatedAt: now, ExpiresAt: now.Add(approval.DefaultTTL)}); err != nil {
		t.Fatal(err)
	}
	if err := store.MarkSent(t.Context(), "health", "abcde", "tg_main", "111"); err != nil {
		t.Fatal(err)
	}

	f.handled(t,
		f.send(t, "telegram", telegram("tg_main", "111", "", "", "hello")),
		f.send(t, "telegram", telegram("tg_main", "111", "", "", "no abcde")),
		f.send(t, "telegram", telegram("tg_strict", "999", "", "", "let me in")),
		f.send(t, "telegram", telegram("tg_strict", "998", "", "", "me too")),
		f.send(t, "telegram", telegram("nosuch", "111", "", "", "hello?")),
	)
	want := []string{
		`herald_inbound_total{channel="telegram:tg_main",reason="",result="accepted"} 2`,
		`herald_inbound_total{channel="telegram:tg_strict",reason="sender_not_allowed",result="dropped"} 2`,
		`herald_inbound_total{channel="telegram:nosuch",reason="unknown_integration",result="dropped"} 1`,
		`herald_approvals_answered_total{butler="health",verdict="deny"} 1`,
	}
	var body string
	testkit.Eventually(t, 20*time.Second, func() bool {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body = rec.Body.String()
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	}, "the inbound messages counted")
	if strings.Count(body, "herald_inbound_total{") != 3 {
		t.Errorf("other inbound series than the three sent:\n%s", body)
	}
	if r := h.Ready(t.Context()); !r.Ready || r.Checks[switchboard.HealthCheck] != "ok" {
		t.Errorf("readiness with the switchboard running: %+v", r)
	}
}
