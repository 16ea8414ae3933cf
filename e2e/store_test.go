package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
)

// TestUnconfirmedNotifyIsSaidSo: when NATS takes a notify's publish and
// never answers (a frozen server or link), the butler does not say "queued"
// of a route that lives only in its memory: it answers "not confirmed",
// class timeout, telling the model that the notification is delivered at
// most once and that calling again with the same idempotency_key is safe.
// Its /readyz names the cause meanwhile and its metric counts it. When the
// link thaws, the publish NATS held is stored and delivered once, and the
// model's retry with the same key is answered from that delivery, not sent
// again.
func TestUnconfirmedNotifyIsSaidSo(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	link := newFreezer(t, strings.TrimPrefix(f.bus.URL(), "nats://"))
	nc, err := bus.Connect("nats://"+link.addr(), "butler.health", "", f.logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	metrics := obs.NewMetrics()
	b, err := butler.New(t.Context(), butler.Options{Name: "health", Config: f.cfg, NC: nc, Log: f.logger(), Timeout: 3 * time.Second, Getenv: f.getenv, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	base := serveButler(t, b)
	c := f.connect(base+butler.MCPPath, "")

	if res := callNotify(t, c, map[string]any{"message": "before the freeze"}); res.IsError || !strings.HasPrefix(text(res), "Notification sent") {
		t.Fatalf("with NATS answering: %s", text(res))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return readyz(t, base) == http.StatusOK }, "the butler ready")

	link.freeze()
	args := map[string]any{"message": "held at the bus", "idempotency_key": "held-1"}
	res := callNotify(t, c, args)
	got := text(res)
	t.Logf("answer while frozen: %s", got)
	if !res.IsError || !strings.HasPrefix(got, "Notification not confirmed (timeout)") {
		t.Fatalf("answer while NATS does not answer: %q, want not confirmed (timeout)", got)
	}
	for _, want := range []string{"not queued", "delivered once", "same idempotency_key is safe"} {
		if !strings.Contains(got, want) {
			t.Errorf("the answer %q does not say %q", got, want)
		}
	}
	if body := structured[map[string]any](t, res); body["error"].(map[string]any)["retryable"] != true {
		t.Errorf("structured answer %v, want a retryable error", body)
	}
	testkit.Eventually(t, 15*time.Second, func() bool {
		code, rep := readyzReport(t, base)
		return code == http.StatusServiceUnavailable && strings.HasPrefix(rep.Checks[obs.StoreCheck], "NATS cannot store")
	}, "/readyz to be 503 with "+obs.StoreCheck+" saying NATS cannot store")
	if n := metricValue(t, metrics, "herald_bus_store_failures_total"); n < 1 {
		t.Errorf("herald_bus_store_failures_total %v while NATS stores nothing, want > 0", n)
	}

	link.thaw()
	// NATS took the publish before it froze: stored once it reads it, and
	// delivered once, though the model was told only "at most once".
	testkit.Eventually(t, 20*time.Second, func() bool { return countText(f.tg, "held at the bus") == 1 }, "the held publish delivered")
	testkit.Eventually(t, 15*time.Second, func() bool { return readyz(t, base) == http.StatusOK }, "/readyz 200 once NATS stores again")
	again := callNotify(t, c, args)
	if again.IsError || !strings.HasPrefix(text(again), "Notification sent") {
		t.Fatalf("the retry with the same idempotency_key: %q, want the first call's delivery", text(again))
	}
	time.Sleep(time.Second) // a second send would show by now
	if n := countText(f.tg, "held at the bus"); n != 1 {
		t.Fatalf("%q reached Telegram %d times, want once", "held at the bus", n)
	}
}

// serveButler serves b as the butler binary does (ServeHTTP, which runs its
// background work), until the test ends; it returns its base URL.
func serveButler(t *testing.T, b *butler.Butler) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- b.ServeHTTP(ctx, "127.0.0.1:0", func(url string) { ready <- url }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("butler: %v", err)
		}
	})
	select {
	case url := <-ready:
		return strings.TrimSuffix(url, butler.MCPPath)
	case err := <-done:
		t.Fatalf("butler: %v", err)
	}
	return ""
}

func readyz(t *testing.T, base string) int {
	code, _ := readyzReport(t, base)
	return code
}

func readyzReport(t *testing.T, base string) (int, obs.Report) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep obs.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	return resp.StatusCode, rep
}

// metricValue is the value of an unlabelled metric in m's exposition.
func metricValue(t *testing.T, m *obs.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		mt := mf.GetMetric()[0]
		if c := mt.GetCounter(); c != nil {
			return c.GetValue()
		}
		return mt.GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// freezer is a TCP link to a real server that can freeze: while frozen it
// reads what either side writes and holds it, as a stalled server or
// network does (the connection stays up, nothing is answered), and on thaw
// passes everything on in order.
type freezer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
}

func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fz := &freezer{ln: ln, target: target}
	fz.cond = sync.NewCond(&fz.mu)
	t.Cleanup(func() { fz.thaw(); _ = ln.Close() })
	go fz.accept()
	return fz
}

func (fz *freezer) addr() string { return fz.ln.Addr().String() }

func (fz *freezer) accept() {
	for {
		in, err := fz.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", fz.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		go fz.pipe(in, out)
		go fz.pipe(out, in)
	}
}

// pipe copies src to dst, holding each chunk while the link is frozen.
func (fz *freezer) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			fz.mu.Lock()
			for fz.frozen {
				fz.cond.Wait()
			}
			fz.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (fz *freezer) freeze() { fz.set(true) }
func (fz *freezer) thaw()   { fz.set(false) }

func (fz *freezer) set(frozen bool) {
	fz.mu.Lock()
	defer fz.mu.Unlock()
	fz.frozen = frozen
	fz.cond.Broadcast()
}
