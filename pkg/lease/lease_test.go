package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/lease"
	"github.com/heraldhq/herald/pkg/testkit"
)

const key = "telegram.7000000001"

// jobs is a singleton job run by contenders: it counts how many run at once.
type jobs struct {
	running atomic.Int32
	most    atomic.Int32
	starts  chan string // the holder of each start
	stops   chan string
}

func newJobs() *jobs {
	return &jobs{starts: make(chan string, 100), stops: make(chan string, 100)}
}

// job runs until its context ends.
func (j *jobs) job(holder string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		n := j.running.Add(1)
		for m := j.most.Load(); n > m && !j.most.CompareAndSwap(m, n); m = j.most.Load() {
		}
		j.starts <- holder
		<-ctx.Done()
		j.running.Add(-1)
		j.stops <- holder
		return nil
	}
}

// contender is one replica: its own connection to NATS, its lease, its Run.
type contender struct {
	nc     *nats.Conn
	lease  *lease.Lease
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // what Run returned
	mu     sync.Mutex
	others []string // holders seen while standing by
}

func (c *contender) standbys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.others...)
}

// start runs a contender named holder for the job of j.
func start(t *testing.T, srv *bustest.Server, holder string, ttl time.Duration, j *jobs, edit ...func(*lease.Lease)) *contender {
	t.Helper()
	nc, js := srv.Connect()
	kv, err := js.KeyValue(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	c := &contender{nc: nc, done: make(chan struct{})}
	c.lease = &lease.Lease{
		KV: kv, Key: key, Holder: holder, TTL: ttl,
		OnStandby: func(other string) {
			c.mu.Lock()
			c.others = append(c.others, other)
			c.mu.Unlock()
		},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})).With("test_holder", holder),
	}
	for _, e := range edit {
		e(c.lease)
	}
	ctx, cancel := context.WithCancel(t.Context())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		c.err = c.lease.Run(ctx, j.job(holder))
	}()
	t.Cleanup(func() {
		cancel()
		<-c.done
	})
	return c
}

// stop stops c and waits for its Run to return.
func (c *contender) stop(t *testing.T) {
	t.Helper()
	c.cancel()
	select {
	case <-c.done:
		if c.err != nil {
			t.Errorf("Run returned %v, want nil after a stop", c.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func next(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case h := <-ch:
		return h
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s within 20s", what)
		return ""
	}
}

func TestExactlyOneHolderRuns(t *testing.T) {
	srv := bustest.RunServer(t)
	j := newJobs()
	const ttl = time.Second
	a := start(t, srv, "a", ttl, j)
	b := start(t, srv, "b", ttl, j)

	first := next(t, j.starts, "start")
	standby := map[string]*contender{"a": b, "b": a}[first]
	// The other stands by for several TTLs, seeing who holds the key, while
	// the holder keeps renewing it.
	deadline := time.Now().Add(3 * ttl)
	for time.Now().Before(deadline) {
		select {
		case h := <-j.starts:
			t.Fatalf("%s started while %s held the lease", h, first)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if got := standby.standbys(); len(got) == 0 || got[len(got)-1] != first {
		t.Errorf("the standby saw holders %v, want %s", got, first)
	}
	if m := j.most.Load(); m != 1 {
		t.Errorf("%d jobs ran at once, want 1", m)
	}
}

func TestGracefulStopHandsOverAtOnce(t *testing.T) {
	srv := bustest.RunServer(t)
	j := newJobs()
	// A TTL far longer than the test waits: only a release lets b in.
	const ttl = 5 * time.Minute
	a := holdThenStandBy(t, srv, ttl, j)
	a.stop(t)
	handedOver(t, j)
}

// holdThenStandBy starts a, edited by edit, waits until it holds the lease
// (alone), then starts b and waits until it stands by; it returns a.
func holdThenStandBy(t *testing.T, srv *bustest.Server, ttl time.Duration, j *jobs, edit ...func(*lease.Lease)) *contender {
	t.Helper()
	a := start(t, srv, "a", ttl, j, edit...)
	if h := next(t, j.starts, "start"); h != "a" {
		t.Fatalf("%s started first, want a (it started alone)", h)
	}
	b := start(t, srv, "b", ttl, j)
	testkit.Eventually(t, 20*time.Second, func() bool { return len(b.standbys()) > 0 }, "b to stand by")
	return a
}

// handedOver checks that a stopped and then b took over, never both
// running at once.
func handedOver(t *testing.T, j *jobs) {
	t.Helper()
	if h := next(t, j.stops, "stop"); h != "a" {
		t.Fatalf("%s stopped, want a", h)
	}
	if h := next(t, j.starts, "takeover"); h != "b" {
		t.Fatalf("%s started, want b", h)
	}
	if m := j.most.Load(); m != 1 {
		t.Errorf("%d jobs ran at once, want 1", m)
	}
}

func TestCrashTakeover(t *testing.T) {
	tests := []struct {
		name  string
		crash func(c *contender)
	}{
		{
			// The process dies: nothing releases the key.
			name:  "holder dies without releasing",
			crash: func(c *contender) { c.cancel() },
		},
		{
			// The holder loses NATS: it cannot renew, so it must stop the
			// job on its own, before the others may take over.
			name:  "holder cut off from NATS",
			crash: func(c *contender) { c.nc.Close() },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := bustest.RunServer(t)
			_, js := srv.Connect()
			kv, err := js.KeyValue(t.Context(), bus.BucketLeases)
			if err != nil {
				t.Fatal(err)
			}
			ops := watchOps(t, kv)
			j := newJobs()
			const ttl = 1500 * time.Millisecond
			a := holdThenStandBy(t, srv, ttl, j, lease.SkipRelease)
			tt.crash(a)
			handedOver(t, j)
			// b took the key over when it expired; nobody deleted it.
			for _, op := range ops() {
				if op != jetstream.KeyValuePut {
					t.Errorf("key operations %v, want only puts (no release)", ops())
					break
				}
			}
			e, err := kv.Get(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				Holder    string    `json:"holder"`
				ExpiresAt time.Time `json:"expires_at"`
			}
			if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.Holder != "b" || rec.ExpiresAt.IsZero() {
				t.Errorf("key = %s (%v), want b's with an expiry", e.Value(), err)
			}
		})
	}
}

func TestLostLeaseStopsJobAtOnce(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	kv, err := js.KeyValue(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Second
	causes := make(chan error, 10)
	starts := make(chan struct{}, 10)
	l := &lease.Lease{KV: kv, Key: key, Holder: "a", TTL: ttl, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- l.Run(ctx, func(ctx context.Context) error {
			starts <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil
		})
	}()
	defer func() { cancel(); <-done }()
	<-starts

	// Someone else writes the key (an operator, a replica that wrongly
	// thought it expired): a's next renewal fails and its job stops.
	if _, err := kv.Put(t.Context(), key, []byte(`{"holder":"intruder"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-causes:
		if !errors.Is(err, lease.ErrLost) {
			t.Errorf("job context ended with %v, want lease.ErrLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job kept running after the lease was lost")
	}
	// The intruder never renews: a takes the key back after a TTL.
	select {
	case <-starts:
	case <-time.After(20 * time.Second):
		t.Fatal("a did not take the lease back")
	}
}

func TestJobEndingReleases(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	kv, err := js.KeyValue(t.Context(), bus.BucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	errJob := errors.New("job failed")
	l := &lease.Lease{KV: kv, Key: key, Holder: "a", TTL: time.Minute}
	if err := l.Run(t.Context(), func(context.Context) error { return errJob }); !errors.Is(err, errJob) {
		t.Fatalf("Run = %v, want the job's error", err)
	}
	if _, err := kv.Get(t.Context(), key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("after the job ended the key is still held (err %v)", err)
	}
	if err := (&lease.Lease{KV: kv, Key: key, Holder: "a"}).Run(t.Context(), nil); err == nil {
		t.Error("Run with no TTL: no error")
	}
}

// TestNeverTwoHolders starts and stops contenders at random, cleanly and by
// crashing, and checks that the job never runs twice at once.
func TestNeverTwoHolders(t *testing.T) {
	srv := bustest.RunServer(t)
	j := newJobs()
	const ttl = 600 * time.Millisecond
	names := []string{"a", "b", "c"}
	live := map[string]*contender{}
	for _, n := range names {
		live[n] = start(t, srv, n, ttl, j)
	}
	go func() {
		for range j.stops {
		}
	}()
	started := 0
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-j.starts:
			started++
		case <-time.After(time.Duration(50+rand.IntN(200)) * time.Millisecond):
		}
		n := names[rand.IntN(len(names))]
		if rand.IntN(2) == 0 {
			live[n].nc.Close() // cut off: its renewals fail
		}
		live[n].stop(t)
		if rand.IntN(3) == 0 {
			live[n] = start(t, srv, n, ttl, j, lease.SkipRelease)
		} else {
			live[n] = start(t, srv, n, ttl, j)
		}
	}
	if m := j.most.Load(); m != 1 {
		t.Errorf("%d jobs ran at once, want 1", m)
	}
	if started < 3 {
		t.Errorf("the job started %d times, want it handed over several times", started)
	}
}

// watchOps records the operations on key from now on.
func watchOps(t *testing.T, kv jetstream.KeyValue) func() []jetstream.KeyValueOp {
	t.Helper()
	w, err := kv.Watch(t.Context(), key, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	var mu sync.Mutex
	var ops []jetstream.KeyValueOp
	go func() {
		for e := range w.Updates() {
			if e != nil {
				mu.Lock()
				ops = append(ops, e.Operation())
				mu.Unlock()
			}
		}
	}()
	return func() []jetstream.KeyValueOp {
		mu.Lock()
		defer mu.Unlock()
		return append([]jetstream.KeyValueOp(nil), ops...)
	}
}

// TestGoneHolderIsTakenOverAtOnce: a holder that dies without releasing,
// which Gone says has stopped, is taken over at once, not after the TTL;
// while Gone says nothing, the standby waits.
func TestGoneHolderIsTakenOverAtOnce(t *testing.T) {
	srv := bustest.RunServer(t)
	j := newJobs()
	const ttl = 5 * time.Minute // far longer than the test waits
	var aGone atomic.Bool
	a := start(t, srv, "a", ttl, j, lease.SkipRelease)
	if h := next(t, j.starts, "start"); h != "a" {
		t.Fatalf("%s started first, want a", h)
	}
	b := start(t, srv, "b", ttl, j, func(l *lease.Lease) {
		l.Gone = func(_ context.Context, holder string) bool { return holder == "a" && aGone.Load() }
	})
	testkit.Eventually(t, 20*time.Second, func() bool { return len(b.standbys()) > 0 }, "b to stand by")
	a.cancel() // dies: the key stays
	if h := next(t, j.stops, "stop"); h != "a" {
		t.Fatalf("%s stopped, want a", h)
	}
	select {
	case h := <-j.starts:
		t.Fatalf("%s started while a's presence still said it runs", h)
	case <-time.After(time.Second):
	}
	aGone.Store(true)
	if h := next(t, j.starts, "takeover"); h != "b" {
		t.Fatalf("%s started, want b", h)
	}
}
