package obs_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/obs"
)

// TestStoreWatchFollowsTheStore: a real nats-server that refuses to store
// the probe record makes /readyz fail with check nats.store saying why,
// the gauge 0 and the counter count it; once it stores again, all is well.
func TestStoreWatchFollowsTheStore(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	m, h := obs.NewMetrics(), obs.NewHealth()
	w := obs.NewStoreWatch(nc, bus.ServiceProbeKey("switchboard"), m, h)

	w.Probe(t.Context())
	if r := h.Ready(t.Context()); !r.Ready || r.Checks[obs.StoreCheck] != "ok" {
		t.Fatalf("with the store taking writes: %+v", r)
	}
	if body := scrape(t, m); !strings.Contains(body, "herald_bus_store_ok 1") {
		t.Errorf("herald_bus_store_ok after a stored probe:\n%s", grepLines(body, "herald_bus_store"))
	}

	// The bucket's stream refuses anything new: NATS answers every write
	// with an error, as it does a store it cannot grow.
	stream, err := js.Stream(t.Context(), "KV_"+bus.BucketProbe)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	full := cfg
	full.MaxMsgs, full.Discard, full.MaxMsgsPerSubject = 1, jetstream.DiscardNew, -1
	if _, err := js.UpdateStream(t.Context(), full); err != nil {
		t.Fatal(err)
	}
	w.Probe(t.Context())
	w.Probe(t.Context())
	r := h.Ready(t.Context())
	if r.Ready || !strings.HasPrefix(r.Checks[obs.StoreCheck], "NATS cannot store") || !strings.Contains(r.Checks[obs.StoreCheck], "2 probe writes in a row") {
		t.Fatalf("with the store refusing writes: %+v", r)
	}
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "maximum messages") {
		t.Errorf("Err: %v, want NATS's own reason", err)
	}
	body := scrape(t, m)
	if !strings.Contains(body, "herald_bus_store_ok 0") || !strings.Contains(body, "herald_bus_store_failures_total 2") {
		t.Errorf("metrics with the store refusing writes:\n%s", grepLines(body, "herald_bus_store"))
	}

	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	w.Probe(t.Context())
	if r := h.Ready(t.Context()); !r.Ready {
		t.Fatalf("once the store takes writes again: %+v", r)
	}
}

// TestStoreWatchWithoutItsBucket: a fleet upgraded without herald setup has
// no herald_probe. That says nothing of the store: /readyz stays ready and
// notes how to fix it.
func TestStoreWatchWithoutItsBucket(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	if err := js.DeleteKeyValue(t.Context(), bus.BucketProbe); err != nil {
		t.Fatal(err)
	}
	h := obs.NewHealth()
	w := obs.NewStoreWatch(nc, bus.ServiceProbeKey("messenger"), nil, h)
	w.Probe(t.Context())
	r := h.Ready(t.Context())
	if !r.Ready || !strings.Contains(r.Degraded[obs.StoreCheck], "run herald setup") {
		t.Fatalf("without the bucket: %+v", r)
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
