package obs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/bus/embedded"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/testkit"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost"+path, nil))
	return rec.Code, rec.Body.String()
}

func TestReadyzFollowsItsChecks(t *testing.T) {
	h := obs.NewHealth()
	consumers := obs.NewState()
	h.Add("consumers", consumers.Check)
	h.Add("always", func(context.Context) error { return nil })
	srv := obs.NewServer("127.0.0.1:0", h, nil, nil).Handler()

	tests := []struct {
		name     string
		state    error
		wantCode int
		want     obs.Report
	}{
		{"starting", obs.ErrStarting, http.StatusServiceUnavailable, obs.Report{Ready: false, Checks: map[string]string{"consumers": "starting", "always": "ok"}}},
		{"running", nil, http.StatusOK, obs.Report{Ready: true, Checks: map[string]string{"consumers": "ok", "always": "ok"}}},
		{"stopped", fmt.Errorf("%w: routes: consumer deleted", obs.ErrStopped), http.StatusServiceUnavailable, obs.Report{Ready: false, Checks: map[string]string{"consumers": "stopped: routes: consumer deleted", "always": "ok"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			consumers.Set(tt.state)
			code, body := get(t, srv, "/readyz")
			var got obs.Report
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if code != tt.wantCode {
				t.Errorf("status %d, want %d", code, tt.wantCode)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("report %+v, want %+v", got, tt.want)
			}
			// Alive whatever readiness says.
			if code, body := get(t, srv, "/healthz"); code != http.StatusOK || body != "ok\n" {
				t.Errorf("healthz: %d %q", code, body)
			}
		})
	}
}

// TestReadyzNamesAPartThatCannotWork: an integration that cannot work
// makes /readyz 503, naming it and why, unless the operator chose
// "degraded but ready"; cleared (a reload fixed it), the process is ready.
func TestReadyzNamesAPartThatCannotWork(t *testing.T) {
	h := obs.NewHealth()
	h.Add("nats", func(context.Context) error { return nil })
	srv := obs.NewServer("127.0.0.1:0", h, nil, nil).Handler()
	why := `email integration "mail": SMTP_URL is not set`
	h.Unable("integration.mail", why)

	steps := []struct {
		name     string
		ready    bool // ReadyWhenUnable
		clear    bool
		wantCode int
		want     obs.Report
	}{
		{"strict", false, false, http.StatusServiceUnavailable, obs.Report{Ready: false, Checks: map[string]string{"nats": "ok", "integration.mail": why}}},
		{"degraded but ready", true, false, http.StatusOK, obs.Report{Ready: true, Checks: map[string]string{"nats": "ok"}, Degraded: map[string]string{"integration.mail": why}}},
		{"fixed", false, true, http.StatusOK, obs.Report{Ready: true, Checks: map[string]string{"nats": "ok"}}},
	}
	for _, st := range steps {
		h.ReadyWhenUnable(st.ready)
		if st.clear {
			h.Unable("integration.mail", "")
		}
		code, body := get(t, srv, "/readyz")
		var got obs.Report
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("%s: body %q: %v", st.name, body, err)
		}
		if code != st.wantCode || !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: %d %+v, want %d %+v", st.name, code, got, st.wantCode, st.want)
		}
	}
}

func TestNilHealthIsReadyAndNilMetricsRecordNothing(t *testing.T) {
	var h *obs.Health
	h.Add("x", func(context.Context) error { return errors.New("never asked") })
	if code, _ := get(t, obs.NewServer("127.0.0.1:0", h, nil, nil).Handler(), "/readyz"); code != http.StatusOK {
		t.Fatalf("readyz %d", code)
	}
	var m *obs.Metrics
	m.Routed("b", "log:log")
	m.Delivery("b", "log:log", obs.OutcomeDelivered, "", time.Now())
	m.WatchConsumers(nil, obs.Consumer{Stream: "S", Durable: "d"})()
	if code, _ := get(t, obs.NewServer("127.0.0.1:0", nil, m, nil).Handler(), "/metrics"); code != http.StatusNotFound {
		t.Fatalf("/metrics of nil Metrics: %d, want 404", code)
	}
}

// TestReadyzWhenNATSStops: the standard NATS check fails while the server is
// gone and passes again once the connection is back.
func TestReadyzWhenNATSStops(t *testing.T) {
	dir := t.TempDir()
	srv, err := embedded.RunServer(embedded.Options{Port: -1, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	port := srv.Addr().(*net.TCPAddr).Port
	nc, err := bus.Connect(srv.ClientURL(), "obs-test", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	h := obs.NewHealth()
	h.Add("nats", obs.NATSCheck(nc))
	if r := h.Ready(t.Context()); !r.Ready {
		t.Fatalf("with NATS up: %+v", r)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	testkit.Eventually(t, 10*time.Second, func() bool { return !h.Ready(t.Context()).Ready }, "readiness to fail without NATS")
	if r := h.Ready(t.Context()); !strings.Contains(r.Checks["nats"], "NATS is") {
		t.Errorf("nats check without NATS: %q", r.Checks["nats"])
	}
	srv, err = embedded.RunServer(embedded.Options{Port: port, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	testkit.Eventually(t, 20*time.Second, func() bool { return h.Ready(t.Context()).Ready }, "readiness once NATS is back")
}

// scrape is the /metrics exposition.
func scrape(t *testing.T, m *obs.Metrics) string {
	t.Helper()
	code, body := get(t, obs.NewServer("127.0.0.1:0", nil, m, nil).Handler(), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	return body
}

// TestMetricsExposition: every metric the dashboard is built on is exposed
// under its contract name, with its labels, once recorded.
func TestMetricsExposition(t *testing.T) {
	m := obs.NewMetrics()
	m.Routed("health", "telegram:tg_main")
	m.Refused("health", "forbidden")
	m.Delivery("health", "telegram:tg_main", obs.OutcomeFailed, "auth", time.Now().Add(-3*time.Second))
	m.ProviderCall("telegram:tg_main", 120*time.Millisecond)
	m.Retry("telegram:tg_main")
	m.DeadLetter(bus.StreamDeliver)
	m.Inbound("telegram:tg_main", obs.InboundDropped, "rate_limited")
	m.ApprovalAsked("health")
	m.ApprovalAnswered("health", "allow")
	m.NotifyCall("health", obs.CallOK)
	body := scrape(t, m)
	for _, want := range []string{
		`herald_notifies_routed_total{butler="health",channel="telegram:tg_main"} 1`,
		`herald_notifies_refused_total{butler="health",class="forbidden"} 1`,
		`herald_deliveries_total{butler="health",channel="telegram:tg_main",class="auth",outcome="failed"} 1`,
		`herald_delivery_seconds_count{channel="telegram:tg_main"} 1`,
		`herald_delivery_seconds_bucket{channel="telegram:tg_main",le="2.5"} 0`,
		`herald_delivery_seconds_bucket{channel="telegram:tg_main",le="5"} 1`,
		`herald_provider_call_seconds_count{channel="telegram:tg_main"} 1`,
		`herald_delivery_retries_total{channel="telegram:tg_main"} 1`,
		`herald_dead_letters_total{stream="HERALD_DELIVER"} 1`,
		`herald_inbound_total{channel="telegram:tg_main",reason="rate_limited",result="dropped"} 1`,
		`herald_approvals_asked_total{butler="health"} 1`,
		`herald_approvals_answered_total{butler="health",verdict="allow"} 1`,
		`herald_notify_calls_total{butler="health",result="ok"} 1`,
		"go_goroutines ",
		"process_start_time_seconds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in /metrics", want)
		}
	}
}

// TestMetricsStartAtZero: the series a configuration names are served at 0
// before their first event, so a rate or an alert over them sees them.
func TestMetricsStartAtZero(t *testing.T) {
	m := obs.NewMetrics()
	m.Init(obs.Known{
		Routed:    map[string][]string{"health": {"telegram:tg_main"}},
		Delivered: map[string][]string{"health": {"telegram:tg_main"}},
		Butlers:   []string{"health"}, Receiving: []string{"telegram:tg_main"}, Streams: []string{bus.StreamDeliver},
	})
	body := scrape(t, m)
	for _, want := range []string{
		`herald_notifies_routed_total{butler="health",channel="telegram:tg_main"} 0`,
		`herald_deliveries_total{butler="health",channel="telegram:tg_main",class="",outcome="delivered"} 0`,
		`herald_delivery_retries_total{channel="telegram:tg_main"} 0`,
		`herald_notify_calls_total{butler="health",result="error"} 0`,
		`herald_approvals_asked_total{butler="health"} 0`,
		`herald_inbound_total{channel="telegram:tg_main",reason="",result="accepted"} 0`,
		`herald_dead_letters_total{stream="HERALD_DELIVER"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in /metrics before any event", want)
		}
	}
}

// TestConsumerPending: herald_consumer_pending is the consumer's lag as NATS
// reports it at scrape time, both what was never delivered and what waits
// for its ack.
func TestConsumerPending(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	ctx := t.Context()
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.StreamRoute, jetstream.ConsumerConfig{Durable: "lagtest", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := js.Publish(ctx, bus.RouteSubject("health"), fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// One taken and not acked: still pending.
	if _, err := cons.Next(); err != nil {
		t.Fatal(err)
	}
	m := obs.NewMetrics()
	stop := m.WatchConsumers(js, obs.Consumer{Stream: bus.StreamRoute, Durable: "lagtest"}, obs.Consumer{Stream: bus.StreamRoute, Durable: "nosuch"})
	body := scrape(t, m)
	if want := `herald_consumer_pending{consumer="lagtest",stream="HERALD_ROUTE"} 3`; !strings.Contains(body, want) {
		t.Errorf("no %s in /metrics", want)
	}
	if strings.Contains(body, `consumer="nosuch"`) {
		t.Error("a consumer NATS does not know is reported")
	}
	st := obs.Lag(ctx, js, obs.Consumer{Stream: bus.StreamRoute, Durable: "lagtest"}, obs.Consumer{Stream: bus.StreamRoute, Durable: "nosuch"})
	if st[0].Pending != 3 || st[0].Error != "" || st[1].Error == "" {
		t.Errorf("Lag: %+v", st)
	}
	if err := obs.ConsumerCheck(js, obs.Consumer{Stream: bus.StreamRoute, Durable: "nosuch"})(ctx); err == nil {
		t.Error("ConsumerCheck passes for a consumer that does not exist")
	}
	stop()
	if strings.Contains(scrape(t, m), "herald_consumer_pending{") {
		t.Error("still reported after stop")
	}
}

// TestServiceDiscovery: a service added with AddService answers $SRV.PING
// (all services, and by name) and its status endpoint with its status.
func TestServiceDiscovery(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	svc, err := obs.AddService(nc, obs.ServiceSwitchboard, "0.1.0", func() any { return map[string]any{"butlers": 2} })
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	// Its subscriptions reach the server before another connection asks.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	client, _ := srv.Connect()
	for _, subject := range []string{"$SRV.PING", "$SRV.PING." + obs.ServiceSwitchboard} {
		msg, err := client.Request(subject, nil, 2*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		var ping micro.Ping
		if err := json.Unmarshal(msg.Data, &ping); err != nil || ping.Name != obs.ServiceSwitchboard || ping.Version != "0.1.0" || ping.Type != micro.PingResponseType {
			t.Errorf("%s answered %s (%v)", subject, msg.Data, err)
		}
	}
	msg, err := client.Request("$SRV.INFO."+obs.ServiceSwitchboard, nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil || len(info.Endpoints) != 1 || info.Endpoints[0].Subject != "herald.status.switchboard" {
		t.Errorf("info: %s (%v)", msg.Data, err)
	}
	msg, err = client.Request(obs.StatusSubject(obs.ServiceSwitchboard), nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The service's own fields, and its process beside them.
	var st struct {
		Butlers int               `json:"butlers"`
		Process obs.ProcessStatus `json:"process"`
	}
	if err := json.Unmarshal(msg.Data, &st); err != nil || st.Butlers != 2 || st.Process.Service != obs.ServiceSwitchboard || st.Process.Version != "0.1.0" ||
		st.Process.PID != os.Getpid() || st.Process.Started.IsZero() || !st.Process.Ready {
		t.Errorf("status: %s (%v)", msg.Data, err)
	}
	if err := svc.Stop(); err != nil {
		t.Fatal(err)
	}
	// Stop unsubscribes; Flush returns once the server has taken that.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Request("$SRV.PING."+obs.ServiceSwitchboard, nil, 200*time.Millisecond); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("a stopped service still answers: %v", err)
	}
}

// TestManyServicesOnOneConnection: a process with many services (herald dev
// with a service per butler) answers a scatter-gather $SRV.PING once per
// service, counts each service's status requests in its STATS, stops each on
// its own, and does not spend a goroutine per subscription.
func TestManyServicesOnOneConnection(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	client, _ := srv.Connect()
	const n = 50
	before := runtime.NumGoroutine()
	var svcs []*obs.Service
	for i := range n {
		svc, err := obs.AddService(nc, obs.ServiceButler(fmt.Sprintf("b%02d", i)), "0.1.0", func() any { return i })
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	if grown := runtime.NumGoroutine() - before; grown > 5 {
		t.Errorf("%d services took %d goroutines", n, grown)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	got := bustest.Ping(t, client)
	if len(got) != n {
		t.Fatalf("%d services answered $SRV.PING, want %d", len(got), n)
	}
	for name, k := range got {
		if k != 1 {
			t.Errorf("%s answered %d times", name, k)
		}
	}
	name := obs.ServiceButler("b07")
	if msg, err := client.Request(obs.StatusSubject(name), nil, 2*time.Second); err != nil || !strings.HasSuffix(string(msg.Data), `,"status":7}`) {
		t.Fatalf("status of %s: %v %s", name, err, msg.Data)
	}
	msg, err := client.Request("$SRV.STATS."+name, nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil || st.Name != name || len(st.Endpoints) != 1 || st.Endpoints[0].NumRequests != 1 {
		t.Fatalf("stats of %s: %s (%v)", name, msg.Data, err)
	}
	if _, err := client.Request("$SRV.PING."+name+"."+st.ID, nil, 2*time.Second); err != nil {
		t.Fatalf("ping by instance id: %v", err)
	}
	for _, svc := range svcs[:n/2] {
		if err := svc.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := bustest.Ping(t, client); len(got) != n-n/2 {
		t.Fatalf("%d services answered after %d of %d stopped", len(got), n/2, n)
	}
	for _, svc := range svcs[n/2:] {
		_ = svc.Stop()
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Request("$SRV.PING", nil, 200*time.Millisecond); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("after every service stopped, $SRV.PING: %v", err)
	}
}

// TestServerMountsAndStops: mounted handlers are served beside the
// standard paths, and Serve returns once stopped.
func TestServerMountsAndStops(t *testing.T) {
	s := obs.NewServer("127.0.0.1:0", obs.NewHealth(), obs.NewMetrics(), nil)
	s.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hook "+r.URL.Path) }))
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	resp, err := http.Post(s.URL()+"/hooks/ci", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "hook /hooks/ci" {
		t.Errorf("hook: %d %q", resp.StatusCode, b)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(s.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := http.Get(s.URL() + "/healthz"); err == nil {
		t.Error("still serving after stop")
	}
}

func TestServerAddressTaken(t *testing.T) {
	a := obs.NewServer("127.0.0.1:0", nil, nil, nil)
	if err := a.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	b := obs.NewServer(strings.TrimPrefix(a.URL(), "http://"), nil, nil, nil)
	if err := b.Serve(t.Context()); err == nil || !strings.Contains(err.Error(), "http_listen") {
		t.Fatalf("second listener on one address: %v", err)
	}
}

func TestRequestIDTime(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	id := envelope.NewRequestID()
	after := time.Now()
	if got := obs.RequestIDTime(id); got.Before(before) || got.After(after) {
		t.Errorf("RequestIDTime(%s) = %v, want between %v and %v", id, got, before, after)
	}
	for _, id := range []string{"", "given:123", "3b241101-e2bb-4255-8caf-4136c566a962", "zzzzzzzz-zzzz-7zzz-8zzz-zzzzzzzzzzzz"} {
		if got := obs.RequestIDTime(id); !got.IsZero() {
			t.Errorf("RequestIDTime(%q) = %v, want zero", id, got)
		}
	}
}
