package bus_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
)

// stateBuckets hold a key per configured thing (a conversation, a paired
// sender, a token, a lease): no age, so nothing of them expires unasked.
var stateBuckets = map[string]bool{
	"KV_" + bus.BucketSessions: true, "KV_" + bus.BucketLeases: true, "KV_" + bus.BucketChannelState: true,
	"KV_" + bus.BucketPairing: true, "KV_" + bus.BucketStatus: true,
}

// TestEveryStreamAndBucketHasLimits: every stream and bucket of the topology
// is bounded in bytes and messages, and in age unless it holds state; their
// bytes fit what nats-server reserves for them (bus.StoreReserved), and a
// work queue refuses what it cannot hold rather than drop what it has.
func TestEveryStreamAndBucketHasLimits(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	var reserved int64
	n := 0
	for info := range js.ListStreams(t.Context()).Info() {
		c := info.Config
		n++
		reserved += c.MaxBytes
		if c.MaxBytes <= 0 || c.MaxMsgs <= 0 {
			t.Errorf("%s: MaxBytes %d, MaxMsgs %d, want both set", c.Name, c.MaxBytes, c.MaxMsgs)
		}
		if c.MaxAge <= 0 && !stateBuckets[c.Name] {
			t.Errorf("%s keeps messages forever (MaxAge 0)", c.Name)
		}
		if c.Retention == jetstream.WorkQueuePolicy && c.Discard != jetstream.DiscardNew {
			t.Errorf("%s is a work queue that drops old messages when full (discard %s), want its publishers told", c.Name, c.Discard)
		}
	}
	if n < 21 {
		t.Fatalf("listed %d streams, want the topology's 8 streams and 13 buckets", n)
	}
	if reserved != bus.StoreReserved {
		t.Errorf("the streams' MaxBytes sum to %d, bus.StoreReserved says %d", reserved, bus.StoreReserved)
	}
}

// TestSetupPutsLimitsOnAnOlderFleet: streams and buckets made by a Herald
// before the limits (no MaxMsgs, no MaxBytes, an unset discard policy) get
// them from herald setup (Repair); a service that only checks leaves them
// and says so.
func TestSetupPutsLimitsOnAnOlderFleet(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	ctx := t.Context()
	// bustest made Herald's topology: turn it back into an older fleet's.
	var names []string
	for info := range js.ListStreams(ctx).Info() {
		c := info.Config
		c.MaxMsgs, c.MaxBytes = -1, -1
		if strings.HasPrefix(c.Name, "KV_") {
			c.Discard = jetstream.DiscardNew // as nats.go makes a bucket
			if c.Name == "KV_"+bus.BucketTokens {
				c.MaxAge = 0
			}
		} else if c.Retention == jetstream.LimitsPolicy {
			c.Discard = jetstream.DiscardOld
		}
		if _, err := js.UpdateStream(ctx, c); err != nil {
			t.Fatalf("making %s an older fleet's: %v", c.Name, err)
		}
		names = append(names, c.Name)
	}

	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	if err := bus.EnsureTopology(ctx, js, bus.Topology{Replicas: 1, Log: log}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bus.StreamDeliver, "KV_" + bus.BucketDeliveries} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; c.MaxMsgs > 0 || c.MaxBytes > 0 {
			t.Errorf("%s got limits from a service's check (MaxMsgs %d, MaxBytes %d); only herald setup repairs", name, c.MaxMsgs, c.MaxBytes)
		}
	}
	if !strings.Contains(logged.String(), "run herald setup to repair it") || !strings.Contains(logged.String(), bus.BucketDeliveries) {
		t.Errorf("a service's check did not say that herald setup repairs the limits:\n%s", logged.String())
	}

	if err := bus.EnsureTopology(ctx, js, bus.Topology{Replicas: 1, Repair: true, Log: log}); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		if c.MaxMsgs <= 0 || c.MaxBytes <= 0 || (c.MaxAge <= 0 && !stateBuckets[name]) {
			t.Errorf("%s after herald setup: MaxMsgs %d, MaxBytes %d, MaxAge %s; want its limits", name, c.MaxMsgs, c.MaxBytes, c.MaxAge)
		}
	}
	ledger, err := js.Stream(ctx, "KV_"+bus.BucketDeliveries)
	if err != nil {
		t.Fatal(err)
	}
	if c := ledger.CachedInfo().Config; c.MaxMsgs != bus.LedgerMaxRecords || c.Discard != jetstream.DiscardOld || c.MaxAge != 30*24*time.Hour {
		t.Errorf("ledger after herald setup: MaxMsgs %d, discard %s, age %s; want %d records, the oldest forgotten first, 30 days", c.MaxMsgs, c.Discard, c.MaxAge, bus.LedgerMaxRecords)
	}
	// The ledger is still a bucket nats.go opens and writes.
	kv, err := js.KeyValue(ctx, bus.BucketDeliveries)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "health.k", []byte("{}")); err != nil {
		t.Fatalf("writing the repaired ledger: %v", err)
	}

	// Repaired, it stays so: a second setup changes nothing.
	logged.Reset()
	if err := bus.EnsureTopology(ctx, js, bus.Topology{Replicas: 1, Repair: true, Log: log}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logged.String(), "repairing") {
		t.Errorf("a second herald setup repaired again:\n%s", logged.String())
	}
}

// TestSmallStoreSaysWhatToRaise: on a nats-server whose store is smaller
// than the topology reserves, herald setup fails saying what to raise, not
// with nats-server's bare "insufficient storage resources".
func TestSmallStoreSaysWhatToRaise(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		JetStreamMaxStore: 1 << 30, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	err = bus.EnsureTopology(t.Context(), js, bus.Topology{Replicas: 1, Repair: true})
	if err == nil || !strings.Contains(err.Error(), "max_file_store") || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("setup on a 1 GiB store: %v, want an error naming max_file_store and what is reserved", err)
	}
}

// TestFilesStoreBoundFollowsTheConfig: nats.files_max_bytes sets what
// herald_files may hold, and herald setup (Repair) applies a change to a
// fleet made with the default.
func TestFilesStoreBoundFollowsTheConfig(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	info := func() int64 {
		s, err := js.Stream(t.Context(), bus.StreamFiles)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.MaxBytes
	}
	if got := info(); got != bus.FilesMaxBytes {
		t.Fatalf("herald_files holds %d by default, want %d", got, int64(bus.FilesMaxBytes))
	}
	if err := bus.EnsureTopology(t.Context(), js, bus.Topology{Replicas: 1, Repair: true, FilesMaxBytes: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	if got := info(); got != 256<<20 {
		t.Errorf("after setup with files_max_bytes 256 MiB herald_files holds %d", got)
	}
}
