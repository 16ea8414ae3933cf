package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/bus/embedded"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/natsauth"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/switchboard"
)

// observed is one process's metrics and readiness, served on a free port
// as each binary serves its own on --http-listen.
type observed struct {
	t       *testing.T
	metrics *obs.Metrics
	health  *obs.Health
	url     string
}

func observe(t *testing.T, nc *nats.Conn) *observed {
	t.Helper()
	o := &observed{t: t, metrics: obs.NewMetrics(), health: obs.NewHealth()}
	o.health.Add("nats", obs.NATSCheck(nc))
	srv := obs.NewServer("127.0.0.1:0", o.health, o.metrics, quiet())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	o.url = srv.URL()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("obs server: %v", err)
		}
	})
	return o
}

func (o *observed) get(path string) (int, string) {
	o.t.Helper()
	resp, err := http.Get(o.url + path)
	if err != nil {
		o.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		o.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// metric is the value of one series on /metrics (0 while it has none).
func (o *observed) metric(series string) float64 {
	o.t.Helper()
	code, body := o.get("/metrics")
	if code != http.StatusOK {
		o.t.Fatalf("/metrics: %d", code)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				o.t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// readyz is /readyz's status and report.
func (o *observed) readyz() (int, obs.Report) {
	o.t.Helper()
	code, body := o.get("/readyz")
	var r obs.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		o.t.Fatalf("/readyz body %q: %v", body, err)
	}
	return code, r
}

// runFor runs f until the test ends, and fails the test if it fails.
func runFor(t *testing.T, name string, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v", name, err)
		}
	})
}

// status asks service's status endpoint.
func status[T any](t *testing.T, nc *nats.Conn, service string) T {
	t.Helper()
	msg, err := nc.Request(obs.StatusSubject(service), nil, 5*time.Second)
	if err != nil {
		t.Fatalf("status of %s: %v", service, err)
	}
	var v T
	if err := json.Unmarshal(msg.Data, &v); err != nil {
		t.Fatalf("status of %s: %s: %v", service, msg.Data, err)
	}
	return v
}

// TestOpsDiscoveryAndMetrics: every running part answers $SRV.PING under its
// design name and its status endpoint, and the switchboard's
// herald_notifies_routed_total moves by exactly one per notify.
func TestOpsDiscoveryAndMetrics(t *testing.T) {
	f := newFleet(t)
	o := observe(t, f.nc)
	runFor(t, "switchboard", func(ctx context.Context) error {
		return switchboard.Run(ctx, switchboard.Options{Config: f.cfg, NC: f.nc, Log: f.logger(), Metrics: o.metrics, Health: o.health})
	})
	runFor(t, "messenger", func(ctx context.Context) error {
		return messenger.Run(ctx, messenger.Options{Config: f.cfg, NC: f.nc, Log: f.logger(), Getenv: f.getenv, Metrics: o.metrics, Health: o.health})
	})
	f.waitConsumers("switchboard", "messenger")
	f.listen("health") // the butler's background work, which answers discovery

	want := []string{obs.ServiceSwitchboard, obs.ServiceMessenger, obs.ServiceButler("health")}
	var names map[string]int
	testkit.Eventually(t, 10*time.Second, func() bool {
		names = bustest.Ping(t, f.nc)
		for _, n := range want {
			if names[n] == 0 {
				return false
			}
		}
		return true
	}, "$SRV.PING answered by "+strings.Join(want, ", "))

	// An integration that cannot work (tg_broken's token variable is unset)
	// is down; the others are up.
	if up, down := o.metric(`herald_integration_up{integration="telegram:tg_main"}`), o.metric(`herald_integration_up{integration="telegram:tg_broken"}`); up != 1 || down != 0 {
		t.Errorf("herald_integration_up: tg_main %v, tg_broken %v; want 1 and 0", up, down)
	}
	if _, body := o.get("/metrics"); !strings.Contains(body, `herald_integration_up{integration="telegram:tg_broken"} 0`) {
		t.Errorf("/metrics does not serve tg_broken as down")
	}

	sb := status[switchboard.Status](t, f.nc, obs.ServiceSwitchboard)
	if sb.Service != obs.ServiceSwitchboard || len(sb.Butlers) != 2 || len(sb.Consumers) != 3 {
		t.Errorf("switchboard status: %+v", sb)
	}
	for _, c := range sb.Consumers {
		if c.Error != "" {
			t.Errorf("switchboard status: consumer %s/%s: %s", c.Stream, c.Consumer, c.Error)
		}
	}
	var hb butler.Status
	testkit.Eventually(t, 10*time.Second, func() bool {
		hb = status[butler.Status](t, f.nc, obs.ServiceButler("health"))
		return hb.Listening == 1 // the client f.listen connected, once its GET stream is open
	}, "the butler's status to count its listening client")
	if hb.Butler != "health" || hb.Inbox.Consumer != bus.ConsumerInbox("health") || hb.Inbox.Error != "" || len(hb.Channels) == 0 {
		t.Errorf("butler status: %+v", hb)
	}

	ms := status[messenger.Status](t, f.nc, obs.ServiceMessenger)
	if ms.Service != obs.ServiceMessenger || !slices.Contains(ms.Integrations, "log:audit_log") || len(ms.Consumers) != 1 || ms.Consumers[0].Error != "" {
		t.Errorf("messenger status: %+v", ms)
	}

	series := `herald_notifies_routed_total{butler="health",channel="log:audit_log"}`
	delivered := `herald_deliveries_total{butler="health",channel="log:audit_log",class="",outcome="delivered"}`
	before, deliveredBefore := o.metric(series), o.metric(delivered)
	for i := 1; i <= 3; i++ {
		if res := f.notify("health", map[string]any{"channel": "log", "message": "counted " + strconv.Itoa(i)}); res.IsError {
			t.Fatalf("notify: %s", text(res))
		}
		// The switchboard counts before it forwards and the messenger
		// before it answers, so the answer comes after both.
		if got := o.metric(series); got != before+float64(i) {
			t.Fatalf("after %d notifies %s is %v, want %v", i, series, got, before+float64(i))
		}
		if got := o.metric(delivered); got != deliveredBefore+float64(i) {
			t.Fatalf("after %d notifies %s is %v, want %v", i, delivered, got, deliveredBefore+float64(i))
		}
	}
	if got := o.metric(`herald_provider_call_seconds_count{channel="log:audit_log"}`); got != deliveredBefore+3 {
		t.Errorf("provider calls timed: %v, want one per delivery (%v)", got, deliveredBefore+3)
	}
	// A refusal is counted once, by class, and routes nothing: the fleet
	// has no Slack integration.
	if res := f.notify("health", map[string]any{"channel": "slack", "message": "no such channel"}); !res.IsError {
		t.Fatalf("notify on an unconfigured channel: %s", text(res))
	}
	if got := o.metric(`herald_notifies_refused_total{butler="health",class="not_found"}`); got != 1 {
		t.Errorf("refused (not_found): %v, want 1", got)
	}
	if got := o.metric(series); got != before+3 {
		t.Errorf("a refused notify moved %s to %v", series, got)
	}
	// The refusal is answered before its message is settled, so the lag
	// reaches 0 a moment after the answer.
	testkit.Eventually(t, 10*time.Second, func() bool {
		return o.metric(`herald_consumer_pending{consumer="switchboard",stream="HERALD_ROUTE"}`) == 0
	}, "no route waiting for the switchboard after every answer")
	// The integration whose secret is missing makes the process not ready,
	// named with its variable, while every other check passes (the
	// operator's ready_when_degraded would keep it ready: compose's fleet).
	code, r := o.readyz()
	if code != http.StatusServiceUnavailable || r.Ready || r.Checks[switchboard.HealthCheck] != "ok" || r.Checks[messenger.HealthCheck] != "ok" || r.Checks["nats"] != "ok" {
		t.Errorf("readyz: %d %+v, want 503 with every check but the broken integration ok", code, r)
	}
	if !strings.Contains(r.Checks["integration.tg_broken"], "UNSET_TOKEN_VARIABLE") || len(r.Degraded) != 0 {
		t.Errorf("readyz: %+v, want integration.tg_broken failing, naming UNSET_TOKEN_VARIABLE", r)
	}
}

// TestOpsReadyzFollowsNATS: /readyz answers 503, naming NATS, while the
// server is gone, and 200 again once it is back; the switchboard runs on.
func TestOpsReadyzFollowsNATS(t *testing.T) {
	dir := t.TempDir()
	srv, err := embedded.RunServer(embedded.Options{Port: -1, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	port := srv.Addr().(*net.TCPAddr).Port
	nc, err := bus.Connect(srv.ClientURL(), natsauth.ConnSwitchboard, "", quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte("butlers:\n  - { name: health }\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.NATS.URL = srv.ClientURL()
	if err := bus.EnsureTopology(t.Context(), js, bus.Topology{Replicas: 1, Repair: true, Butlers: cfg.ButlerNames()}); err != nil {
		t.Fatal(err)
	}
	o := observe(t, nc)
	runFor(t, "switchboard", func(ctx context.Context) error {
		return switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: nc, Log: quiet(), Metrics: o.metrics, Health: o.health})
	})
	ready := func() bool { code, _ := o.readyz(); return code == http.StatusOK }
	testkit.Eventually(t, 20*time.Second, ready, "/readyz 200 with the switchboard running")

	srv.Shutdown()
	srv.WaitForShutdown()
	testkit.Eventually(t, 20*time.Second, func() bool { return !ready() }, "/readyz 503 with NATS gone")
	if code, r := o.readyz(); code != http.StatusServiceUnavailable || r.Ready || r.Checks["nats"] == "ok" {
		t.Errorf("readyz without NATS: %d %+v", code, r)
	}

	srv, err = embedded.RunServer(embedded.Options{Port: port, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, ready, "/readyz 200 once NATS is back")
}

// TestOpsDiscoveryUnderLeastPrivilege: with the permissions `herald
// nats-auth` generates, each service answers discovery and status as its
// own user, only the operator can ask, and the services' readiness checks
// (JetStream account info, their consumers' info) are allowed.
func TestOpsDiscoveryUnderLeastPrivilege(t *testing.T) {
	cfg, err := config.Parse([]byte("butlers:\n  - { name: health }\n  - { name: finance }\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := runSecureNATS(t, cfg)
	ctx := t.Context()
	_, adminJS, _ := s.conn("setup", natsauth.ConnCLI)
	if err := bus.EnsureTopology(ctx, adminJS, bus.Topology{Replicas: 1, Repair: true, Butlers: cfg.ButlerNames()}); err != nil {
		t.Fatal(err)
	}

	sbNC, _, sbRefused := s.conn("switchboard", natsauth.ConnSwitchboard)
	sbHealth := obs.NewHealth()
	sbHealth.Add("nats", obs.NATSCheck(sbNC))
	runFor(t, "switchboard", func(ctx context.Context) error {
		return switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: sbNC, Log: quiet(), Health: sbHealth})
	})
	hNC, _, hRefused := s.conn("butler-health", natsauth.ConnButler("health"))
	b, err := butler.New(ctx, butler.Options{Name: "health", Config: cfg, NC: hNC, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	runFor(t, "butler", b.Run)
	// The messenger's user may answer as herald-messenger (the messenger
	// itself registers once it is wired to obs).
	mNC, _, mRefused := s.conn("messenger", natsauth.ConnMessenger)
	svc, err := obs.AddService(mNC, obs.ServiceMessenger, obs.Version, func() any { return map[string]string{"service": obs.ServiceMessenger} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })

	opNC, _, _ := s.conn("operator", natsauth.ConnCLI)
	services := []string{obs.ServiceSwitchboard, obs.ServiceMessenger, obs.ServiceButler("health")}
	testkit.Eventually(t, 10*time.Second, func() bool {
		names := bustest.Ping(t, opNC)
		for _, n := range services {
			if names[n] == 0 {
				return false
			}
		}
		return true
	}, "the operator's $SRV.PING answered by every service")
	for _, name := range services {
		for _, verb := range []string{"PING", "INFO", "STATS"} {
			if _, err := opNC.Request("$SRV."+verb+"."+name, nil, 5*time.Second); err != nil {
				t.Errorf("$SRV.%s.%s: %v", verb, name, err)
			}
		}
		if st := status[map[string]any](t, opNC, name); st["service"] != name {
			t.Errorf("status of %s: %v", name, st)
		}
	}

	if r := sbHealth.Ready(ctx); !r.Ready {
		t.Errorf("the switchboard's readiness under its own permissions: %+v", r)
	}
	mcp := httptest.NewServer(b.Handler())
	t.Cleanup(mcp.Close)
	testkit.Eventually(t, 10*time.Second, func() bool {
		resp, err := http.Get(mcp.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "the butler's /readyz under its own permissions")

	// Each may write its own probe record (nats.store ok, no note), and a
	// butler no other's: that is noted, not taken as a full store.
	for key, nc := range map[string]*nats.Conn{bus.ServiceProbeKey(natsauth.ConnSwitchboard): sbNC, bus.ServiceProbeKey(natsauth.ConnMessenger): mNC, bus.ButlerProbeKey("health"): hNC} {
		h := obs.NewHealth()
		obs.NewStoreWatch(nc, key, nil, h).Probe(ctx)
		if r := h.Ready(ctx); !r.Ready || r.Checks[obs.StoreCheck] != "ok" || r.Degraded[obs.StoreCheck] != "" {
			t.Errorf("probe %s under its own permissions: %+v", key, r)
		}
	}
	other := obs.NewHealth()
	obs.NewStoreWatch(hNC, bus.ButlerProbeKey("finance"), nil, other).Probe(ctx)
	if r := other.Ready(ctx); !r.Ready || !strings.Contains(r.Degraded[obs.StoreCheck], "does not let this user write") {
		t.Errorf("butler health probing finance's key: %+v, want ready with a note that NATS refused it", r)
	}

	for name, r := range map[string]*refusals{"switchboard": sbRefused, "butler-health": hRefused, "messenger": mRefused} {
		r.mu.Lock()
		for _, e := range r.errs {
			if strings.Contains(e, "$SRV") || strings.Contains(e, "herald.status") || strings.Contains(e, "$JS.API.INFO") || strings.Contains(e, "_INBOX."+natsauth.ConnCLI) {
				t.Errorf("%s was refused: %s", name, e)
			}
		}
		r.mu.Unlock()
	}
	// Asking is the operator's: a butler may not ping the fleet.
	_ = hNC.PublishRequest("$SRV.PING", hNC.NewInbox(), nil)
	if !hRefused.of("$SRV.PING") {
		t.Error("butler health's $SRV.PING was not refused")
	}
}
