package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/route"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/switchboard"
)

// The benchmark's knobs. Each has a default that keeps one `make bench` on a
// two-core machine within about five minutes; the environment variables change
// them for a longer or a narrower look.
var (
	// benchWindow is how many requests are in flight at once in the
	// closed-loop rows (BENCH_WINDOW): MCP sessions for the MCP rows.
	benchWindow = envInt("BENCH_WINDOW", 64)
	// benchFor is how long each throughput or open-loop row runs (BENCH_FOR).
	benchFor = envDuration("BENCH_FOR", 8*time.Second)
	// benchRate is the offered rate of the open-loop rows (BENCH_RATE, per s).
	benchRate = envInt("BENCH_RATE", 1000)
	// benchInboundPerMin and benchInboundFor shape the inbound row
	// (BENCH_INBOUND_PER_MIN, BENCH_INBOUND_FOR).
	benchInboundPerMin = envInt("BENCH_INBOUND_PER_MIN", 10000)
	benchInboundFor    = envDuration("BENCH_INBOUND_FOR", time.Minute)
	// benchButlers are the fleet sizes of the scale rows (BENCH_BUTLERS=100,1000).
	benchButlers = envInts("BENCH_BUTLERS", 100, 1000)
	// benchHoldRate and benchHoldFor shape row (p), the held load whose
	// peak resident set has a goal (BENCH_HOLD_RATE, BENCH_HOLD_FOR).
	benchHoldRate = envInt("BENCH_HOLD_RATE", 500)
	benchHoldFor  = envDuration("BENCH_HOLD_FOR", time.Minute)
	// benchProfiles, if set, is the directory profiles are written to
	// (make bench PROFILE=1 sets BENCH_PROFILE_DIR).
	benchProfiles = os.Getenv("BENCH_PROFILE_DIR")
)

// benchPayload is the 1 KB message every row sends: prose, so that the
// markdown and HTML conversions do the work a real message costs them.
var benchPayload = func() string {
	const sentence = "The quick brown fox jumps over the lazy dog, and **Herald** says so. "
	return strings.Repeat(sentence, 1024/len(sentence)+1)[:1024]
}()

// BenchmarkHerald is `make bench`: every measurement of docs/performance.md,
// printed as one table with each goal beside its figure. Goals are printed,
// never asserted; what is asserted is that nothing was lost or duplicated.
//
//	raw    the fastest two-hop JetStream work queue we can write with nats.go
//	route  route.v1 → switchboard → messenger → answer, in this process
//	mcp    herald dev as its own process, driven over MCP streamable HTTP
//	scale  herald dev with 100 and 1,000 butlers, and inbound through the gates
//	hold   herald dev held at 500 notify/s for a minute: its peak memory
//	floor  mcp-go alone with a notify tool that only answers: the MCP rows' floor
//
// Sub-benchmarks select rows: -bench 'Herald/(raw|route)$'. With
// BENCH_CLUSTER=3 the rows on NATS run on a 3-node cluster, and scale and
// hold, whose figures are one process's memory and start, do not run.
func BenchmarkHerald(b *testing.B) {
	t := newTable()
	defer func() { t.print(os.Stdout) }()
	b.Run("raw", func(b *testing.B) { benchRawRow(b, t) })
	b.Run("route", func(b *testing.B) { benchRouteRow(b, t) })
	b.Run("mcp", func(b *testing.B) { benchMCPRows(b, t) })
	if benchCluster <= 1 {
		b.Run("hold", func(b *testing.B) { benchHoldRow(b, t) })
		b.Run("scale", func(b *testing.B) { benchScaleRows(b, t) })
	}
	b.Run("floor", func(b *testing.B) { benchFloorRows(b, t) })
}

// result is one measured run: how many requests completed, how long it took,
// and each request's latency.
type result struct {
	ok, failed int
	firstErr   error
	elapsed    time.Duration
	lat        []time.Duration
	writes     writes // stored JetStream writes during the run
	// due is when request seq was due to be sent (open loop only).
	due func(seq int) time.Time
}

func (r *result) rate() float64 { return float64(r.ok) / r.elapsed.Seconds() }

// p is the q-th percentile (q in 0..100, fractions allowed) of the latencies.
func (r *result) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	if !slices.IsSorted(r.lat) {
		slices.Sort(r.lat)
	}
	i := int(float64(len(r.lat)) * q / 100)
	return r.lat[min(len(r.lat)-1, i)]
}

// closedLoop runs do from window goroutines, each starting its next request
// when its last one is answered, for d; do gets the goroutine's number
// (0..window-1) and a sequence number unique in the run.
func closedLoop(window int, d time.Duration, do func(worker, seq int) error) *result {
	var (
		seq  atomic.Int64
		mu   sync.Mutex
		res  = &result{}
		wg   sync.WaitGroup
		stop = time.Now().Add(d)
	)
	start := time.Now()
	for worker := range window {
		wg.Go(func() {
			var lat []time.Duration
			failed, ok := 0, 0
			var first error
			for time.Now().Before(stop) {
				t0 := time.Now()
				if err := do(worker, int(seq.Add(1))); err != nil {
					failed++
					if first == nil {
						first = err
					}
					continue
				}
				ok++
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.ok += ok
			res.failed += failed
			if res.firstErr == nil {
				res.firstErr = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// openLoop starts request seq (from 1) at start + (seq-1)/rate, whether or not earlier
// ones have been answered, for d, and times each from when it was due to be
// sent: a stall delays every request scheduled behind it, and they all count
// (no coordinated omission).
func openLoop(rate float64, d time.Duration, do func(seq int) error) *result {
	n := int(d.Seconds() * rate)
	interval := time.Duration(float64(time.Second) / rate)
	var (
		mu  sync.Mutex
		res = &result{lat: make([]time.Duration, 0, n)}
		wg  sync.WaitGroup
	)
	start := time.Now()
	res.due = func(seq int) time.Time { return start.Add(time.Duration(seq-1) * interval) }
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			err := do(i + 1)
			lat := time.Since(due)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.failed++
				if res.firstErr == nil {
					res.firstErr = err
				}
				return
			}
			res.ok++
			res.lat = append(res.lat, lat)
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// writes are stored JetStream messages per stream (KV buckets are streams
// KV_<bucket>): the growth of each stream's last sequence number. Every
// stored publish, KV put, delete or purge marker takes one sequence number;
// a publish JetStream drops as a duplicate takes none. Acks, which update
// consumer state but store no message, are not counted.
type writes map[string]uint64

// streamSeqs reads the last sequence number of every stream.
func streamSeqs(ctx context.Context, js jetstream.JetStream) (writes, error) {
	seqs := writes{}
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		seqs[info.Config.Name] = info.State.LastSeq
	}
	return seqs, l.Err()
}

// since is what was written between before and w.
func (w writes) since(before writes) writes {
	d := writes{}
	for s, seq := range w {
		if n := seq - before[s]; n > 0 {
			d[s] = n
		}
	}
	return d
}

func (w writes) total() uint64 {
	var n uint64
	for _, c := range w {
		n += c
	}
	return n
}

// perOp is the writes per operation, streams by name: "HERALD_ROUTE 1.00, ...".
func (w writes) perOp(ops int) string {
	names := make([]string, 0, len(w))
	for s := range w {
		names = append(names, s)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, s := range names {
		if per := float64(w[s]) / float64(ops); per >= 0.005 {
			parts[i] = fmt.Sprintf("%s %.2f", s, per)
		} else {
			parts[i] = fmt.Sprintf("%s %d in all", s, w[s]) // background work: leases, status
		}
	}
	return strings.Join(parts, ", ")
}

// countWrites runs fn and returns the stored writes it caused.
func countWrites(b *testing.B, js jetstream.JetStream, fn func()) writes {
	b.Helper()
	ctx := context.Background()
	before, err := streamSeqs(ctx, js)
	if err != nil {
		b.Fatal(err)
	}
	fn()
	after, err := streamSeqs(ctx, js)
	if err != nil {
		b.Fatal(err)
	}
	return after.since(before)
}

// markerRE finds a request's marker, "hb-<run>-<seq>", in what was delivered.
var markerRE = regexp.MustCompile(`hb-([a-z0-9]+)-([0-9]+)`)

func marker(run string, seq int) string { return "hb-" + run + "-" + strconv.Itoa(seq) }

// arrivals records, by marker, when each request was first delivered and how
// often: nothing may be missing, nothing there twice.
type arrivals struct {
	mu    sync.Mutex
	first map[string]time.Time
	count map[string]int
}

func newArrivals() *arrivals {
	return &arrivals{first: map[string]time.Time{}, count: map[string]int{}}
}

// note records the marker in text, if any, as delivered at at.
func (a *arrivals) note(text string, at time.Time) {
	m := markerRE.FindString(text)
	if m == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.count[m]++; a.count[m] == 1 {
		a.first[m] = at
	}
}

// of is how many requests of run were delivered, and how many deliveries
// were repeats.
func (a *arrivals) of(run string) (delivered, dup int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prefix := "hb-" + run + "-"
	for m, n := range a.count {
		if strings.HasPrefix(m, prefix) {
			delivered++
			dup += n - 1
		}
	}
	return delivered, dup
}

// wait waits until want requests of run were delivered, or timeout.
func (a *arrivals) wait(run string, want int, timeout time.Duration) (delivered, dup int) {
	testkit.Poll(timeout, 50*time.Millisecond, func() bool { delivered, dup = a.of(run); return delivered >= want })
	return delivered, dup
}

// latencies are the times from when each request of run was due (due(seq))
// to its first delivery.
func (a *arrivals) latencies(run string, due func(seq int) time.Time) []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	var lat []time.Duration
	for m, at := range a.first {
		if rest, ok := strings.CutPrefix(m, "hb-"+run+"-"); ok {
			seq, _ := strconv.Atoi(rest)
			lat = append(lat, at.Sub(due(seq)))
		}
	}
	return lat
}

// benchRawRow is the baseline: the fastest correct two-hop JetStream
// work-queue pipeline we know how to write with nats.go, with the durability
// of Herald's (every hop a stored publish with a Nats-Msg-Id, acked
// explicitly after the work is done), so that the route row's ratio to it
// means something.
//
//   - The client publishes 1 KB to stream A and waits for its PubAck (the
//     butler must know its route is stored), then for the answer on one
//     shared wildcard reply subscription, not one subscription per request.
//   - Hop 1 pulls batches of 512 and forwards each message to stream B with
//     an asynchronous publish; it acks the inbound message once the forward's
//     PubAck is in, so nothing is lost if it dies in between.
//   - Hop 2 pulls batches of 512, acks and answers on core NATS.
//
// Client, hop 1 and hop 2 each have their own connection, as three processes
// would.
func benchRawRow(b *testing.B, t *table) {
	srv := newBenchBus(b)
	ctx := context.Background()
	nc, js := srv.Connect()
	for _, hop := range []string{"A", "B"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "BENCH_" + hop, Subjects: []string{"bench." + hop + ".>"}, Replicas: srv.Replicas(),
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Duplicates: bus.DuplicateWindow,
		}); err != nil {
			b.Fatal(err)
		}
	}
	const batch = 512
	consume := func(stream string, handle func(m jetstream.Msg)) {
		_, js := srv.Connect()
		c, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxAckPending: 4 * batch,
		})
		if err != nil {
			b.Fatal(err)
		}
		cc, err := c.Consume(handle, jetstream.PullMaxMessages(batch))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cc.Stop)
	}

	// Hop 1: forward asynchronously; one goroutine acks in publish order as
	// the PubAcks come in (they come in order).
	_, js1 := srv.Connect()
	type forwarded struct {
		m jetstream.Msg
		f jetstream.PubAckFuture
	}
	pending, done := make(chan forwarded, 4*batch), make(chan struct{})
	b.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case p := <-pending:
				select {
				case <-p.f.Ok():
					_ = p.m.Ack()
				case <-p.f.Err():
					_ = p.m.Nak()
				}
			case <-done:
				return
			}
		}
	}()
	consume("BENCH_A", func(m jetstream.Msg) {
		f, err := js1.PublishMsgAsync(&nats.Msg{Subject: "bench.B.x", Data: m.Data(), Header: m.Headers()})
		if err != nil {
			_ = m.Nak()
			return
		}
		select {
		case pending <- forwarded{m, f}:
		case <-done:
		}
	})
	// Hop 2: ack, then answer.
	nc2, _ := srv.Connect()
	consume("BENCH_B", func(m jetstream.Msg) {
		_ = m.Ack()
		_ = nc2.Publish(m.Headers().Get("Reply"), []byte("ok"))
	})

	// One reply subscription for every request: bench.reply.<worker>.<seq>,
	// each worker one request at a time.
	waiters := make([]chan string, benchWindow)
	for i := range waiters {
		waiters[i] = make(chan string, 1)
	}
	sub, err := nc.Subscribe("bench.reply.>", func(m *nats.Msg) {
		worker, seq, _ := strings.Cut(strings.TrimPrefix(m.Subject, "bench.reply."), ".")
		if w, err := strconv.Atoi(worker); err == nil && w < len(waiters) {
			waiters[w] <- seq
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	var res *result
	w := countWrites(b, js, func() {
		res = closedLoop(benchWindow, benchFor, func(worker, seq int) error {
			m := &nats.Msg{Subject: "bench.A.x", Data: []byte(benchPayload), Header: nats.Header{
				"Reply":       {"bench.reply." + strconv.Itoa(worker) + "." + strconv.Itoa(seq)},
				nats.MsgIdHdr: {"raw-" + strconv.Itoa(seq)},
			}}
			if _, err := js.PublishMsg(ctx, m); err != nil {
				return err
			}
			select {
			case got := <-waiters[worker]:
				if got != strconv.Itoa(seq) {
					return fmt.Errorf("request %d answered as %s", seq, got)
				}
				return nil
			case <-time.After(30 * time.Second):
				return fmt.Errorf("request %d: no answer in 30s", seq)
			}
		})
	})
	res.writes = w
	t.add(row{
		key: "a", name: "(a) raw: 2 JetStream work-queue hops, 1 KB, 64 in flight", rate: res.rate(), unit: "msg/s",
		p50: res.p(50), p99: res.p(99), p999: res.p(99.9), writes: float64(w.total()) / float64(res.ok), breakdown: w.perOp(res.ok),
		lost: fmt.Sprintf("%d failed", res.failed),
		goal: "the ceiling the others are measured against",
	})
	if res.failed > 0 {
		b.Errorf("raw: %d requests failed, first: %v", res.failed, res.firstErr)
	}
}

// instant is a provider that accepts every message at once and counts them.
type instant struct{ got *arrivals }

func (p instant) Deliver(_ context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	p.got.note(d.Message, time.Now())
	return deliver.Receipt{MessageIDs: []string{"1"}}, nil
}

// benchRouteRow is the notify pipeline without MCP and without a process
// boundary: route.v1 published as a butler does (route.Client) → switchboard
// → messenger with a provider that accepts at once → the answer back, all in
// this process over one embedded server, 64 in flight.
func benchRouteRow(b *testing.B, t *table) {
	srv := newBenchBus(b)
	nc, js := srv.Connect()
	cfg, err := config.Parse(fmt.Appendf(nil, "nats: {replicas: %d}\nbutlers: [{name: health, default_channel: log}]", srv.Replicas()))
	if err != nil {
		b.Fatal(err)
	}
	got := newArrivals()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// The services stop (and write the audit records they hold) before the
	// server does: the flush lets those reach it, so that no publish waits
	// for an answer from a server that is gone.
	b.Cleanup(func() { cancel(); wg.Wait(); _ = nc.Flush() })
	wg.Go(func() {
		if err := switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: nc, Log: quiet()}); err != nil {
			b.Error(err)
		}
	})
	wg.Go(func() {
		err := messenger.Run(ctx, messenger.Options{Config: cfg, NC: nc, Log: quiet(), Channels: map[string]deliver.Factory{
			"log": func(config.Integration, deliver.Env) (deliver.Sender, error) { return instant{got}, nil },
		}})
		if err != nil {
			b.Error(err)
		}
	})
	led, err := ledger.Open(ctx, js)
	if err != nil {
		b.Fatal(err)
	}
	rc := &route.Client{NC: nc, JS: js, Ledger: led, Timeout: 30 * time.Second}
	// Warm up: both services consuming.
	for {
		r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "warm up"}, nil))
		if _, err := rc.Send(ctx, r); err == nil {
			break
		} else if !errors.Is(err, route.ErrQueued) {
			b.Fatal(err)
		}
	}
	var res *result
	w := countWrites(b, js, func() {
		res = closedLoop(benchWindow, benchFor, func(_, seq int) error {
			msg := marker("route", seq) + " " + benchPayload
			r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: msg}, nil))
			resp, err := rc.Send(ctx, r)
			if err != nil {
				return err
			}
			if resp.Status != envelope.StatusOK {
				return fmt.Errorf("notify %d: %+v", seq, resp.Error)
			}
			return nil
		})
	})
	res.writes = w
	delivered, dup := got.wait("route", res.ok, 10*time.Second)
	t.add(row{
		key: "b", name: "(b) route pipeline: route.v1 → switchboard → messenger → answer (in-process)", rate: res.rate(), unit: "msg/s",
		p50: res.p(50), p99: res.p(99), p999: res.p(99.9), writes: float64(w.total()) / float64(res.ok), breakdown: w.perOp(res.ok),
		lost: lostDup(res, delivered, dup),
	})
	checkLostDup(b, "route", res, delivered, dup)
}

// lostDup is the lost/dup column: requests answered ok whose delivery was not
// seen, deliveries seen twice, and requests that failed.
func lostDup(res *result, delivered, dup int) string {
	s := fmt.Sprintf("%d/%d", max(0, res.ok-delivered), dup)
	if res.failed > 0 {
		s += fmt.Sprintf(" (%d failed)", res.failed)
	}
	return s
}

func checkLostDup(b *testing.B, run string, res *result, delivered, dup int) {
	b.Helper()
	if res.failed > 0 {
		b.Errorf("%s: %d requests failed, first: %v", run, res.failed, res.firstErr)
	}
	if delivered < res.ok || dup > 0 {
		b.Errorf("%s: %d answered ok, %d delivered, %d duplicates", run, res.ok, delivered, dup)
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func envInts(name string, def ...int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// row is one line of the table. Zero figures print as blanks.
type row struct {
	key       string // its letter, "a" for (a): goals that compare rows find them by it
	name      string
	rate      float64
	unit      string
	figure    string // instead of rate: "up in 1.9s", "112 KB/butler"
	p50, p99  time.Duration
	p999      time.Duration
	writes    float64 // stored JetStream writes per operation
	breakdown string  // the same, per stream
	rss       uint64  // bytes
	lost      string
	goal      string
	met       *bool
}

func metIf(known, ok bool) *bool {
	if !known {
		return nil
	}
	return &ok
}

// table collects the rows of every sub-benchmark and prints them at the end.
type table struct {
	mu    sync.Mutex
	rows  []row
	notes []string
	load  [3]float64
	start time.Time
	// busy and ours are the machine's CPU time in use and this benchmark's
	// own (its process and the herald processes it ran) at the start.
	busy, ours time.Duration
}

func newTable() *table {
	return &table{load: loadAvg(), start: time.Now(), busy: machineBusy(), ours: ourCPU()}
}

func (t *table) add(r row) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = append(t.rows, r)
}

func (t *table) note(format string, a ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.notes = append(t.notes, fmt.Sprintf(format, a...))
}

func (t *table) print(w0 *os.File) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.judge()
	took := time.Since(t.start)
	others := (machineBusy() - t.busy - (ourCPU() - t.ours)).Seconds() / took.Seconds()
	fmt.Fprintf(w0, "\nHerald benchmark: %d CPUs, %s, took %s; load average %.2f before it; other processes used %.2f CPUs meanwhile",
		runtime.NumCPU(), runtime.Version(), took.Round(time.Second), t.load[0], max(others, 0))
	// Only what others used during the run counts: the load average lags
	// by minutes and includes the previous benchmark.
	if others > 0.2 {
		fmt.Fprintf(w0, "\n(the machine was busy with other work: these figures are preliminary)")
	}
	if benchCluster > 1 {
		fmt.Fprintf(w0, "\nNATS: a %d-node cluster, %d nats-server processes on this machine, every stream and bucket with %d replicas;"+
			"\nits nodes share these %d CPUs with everything else here, so this is what replication costs in CPU, not a real cluster's speed",
			benchCluster, benchCluster, benchCluster, runtime.NumCPU())
	}
	fmt.Fprintln(w0)
	w := tabwriter.NewWriter(w0, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "row\tfigure\tp50\tp99\tp99.9\twrites/op\tRSS\tlost/dup\tgoal\t")
	for _, r := range t.rows {
		fig := r.figure
		if fig == "" && r.rate > 0 {
			fig = fmt.Sprintf("%s %s", thousands(r.rate), r.unit)
		}
		wr := ""
		if r.writes > 0 {
			wr = fmt.Sprintf("%.2f", r.writes)
		}
		goal := r.goal
		if r.met != nil {
			if *r.met {
				goal += "  met"
			} else {
				goal += "  MISSED"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.name, fig, ms(r.p50), ms(r.p99), ms(r.p999), wr, mb(r.rss), r.lost, goal)
	}
	_ = w.Flush()
	fmt.Fprintln(w0, "\nwrites/op: stored JetStream messages per request, counted as the growth of every stream's last")
	fmt.Fprintln(w0, "sequence number (KV buckets are streams KV_<bucket>; a put, delete or purge is one message;")
	fmt.Fprintln(w0, "a duplicate dropped by Nats-Msg-Id is none; acks are not counted), over the requests answered ok;")
	fmt.Fprintln(w0, "for the MCP rows also the CPU the server process took per call, and how busy the machine was:")
	for _, r := range t.rows {
		if r.breakdown != "" {
			fmt.Fprintf(w0, "  %s\n      %s\n", r.name, r.breakdown)
		}
	}
	for _, n := range t.notes {
		fmt.Fprintln(w0, n)
	}
}

// thousands formats n with thousands separators: 17,204.
func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return ""
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
}

func mb(n uint64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f MB", float64(n)/(1<<20))
}

// machineBusy is the CPU time the machine has spent busy since boot, from
// /proc/stat (user, nice, system, irq, softirq, steal); 0 where there is none.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system (idle iowait) irq softirq steal
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// ourCPU is the CPU time of this process and of its children that have
// ended (the herald processes, once stopped).
func ourCPU() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return total
}

// loadAvg is /proc/loadavg's three figures (zeros where there is none).
func loadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	for i, f := range strings.Fields(string(b))[:3] {
		l[i], _ = strconv.ParseFloat(f, 64)
	}
	return l
}
