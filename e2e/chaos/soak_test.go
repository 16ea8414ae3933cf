//go:build chaos && soak

package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// The soak's load and what a month of it may cost (docs/reliability.md, "A
// month of steady load"). The budgets are RSS after 30 days at that load;
// the disk budget is what every stream and bucket may hold together, the sum
// of their MaxBytes (bus.go), within deploy/nats.conf's max_file_store.
const (
	soakNotifyRate  = 50 // notifies a second, through the butler's MCP tool
	soakInboundRate = 5  // messages a second that a person sends the bot
	soakMonth       = 30 * 24 * time.Hour
	soakSampleEvery = 5 * time.Second
	// soakVerdictWindow is the shortest measurement a projection is judged
	// on (a short CI run prints its figures without a verdict).
	soakVerdictWindow = 5 * time.Minute

	budgetNATS      = 2560 << 20        // nats-server
	budgetService   = 256 << 20         // switchboard, messenger, butler each
	budgetNATSDisk  = bus.StoreReserved // nats-server's store
	soakNATSProcess = "nats-1"
)

// soakBudget is a process's memory budget.
func soakBudget(name string) int64 {
	if name == soakNATSProcess {
		return budgetNATS
	}
	return budgetService
}

// TestSoak is `make soak`: a fleet of the real binaries under a steady 50
// notifies/s (sent through the butler's MCP tool by 16 sessions, each with
// an idempotency_key and retried once on a new session if the call itself
// fails) and 5 inbound Telegram messages/s (pushed to the model as channel
// notifications), for CHAOS_SOAK (a Go duration; unset, 10 minutes). Built only with the tags chaos and soak (make soak).
// In the first third each service is killed with SIGKILL once and
// restarted: switchboard, messenger, butler, nats-server. From 40% of the
// run on (the warm-up: every process restarted, the duplicate windows
// filling) it samples every process's RSS, open files and goroutines, then
// prints each one's growth per hour and its 30-day projection against the
// budget, every stream's growth against its limits, and the counts. It
// fails on a notify or inbound message lost or doubled (beyond a send the
// messenger's kill left uncertain, audited and told), not on the
// projection: a short run's slope is a measurement to read, not a verdict
// to trust.
func TestSoak(t *testing.T) {
	d := 10 * time.Minute
	if v := os.Getenv("CHAOS_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("CHAOS_SOAK=%q: want a duration such as 10m", v)
		}
	}
	root, err := os.MkdirTemp("", "herald-soak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("CHAOS_KEEP") != "" {
			t.Logf("logs kept in %s", root)
			return
		}
		_ = os.RemoveAll(root)
	})
	sc := &scenario{
		name: "soak", fault: "one kill -9 of each service", notifies: int(d.Seconds()) * soakNotifyRate,
		onUncertain: "resend", retryFor: 3 * time.Minute, messengerCrash: true, retry: true,
	}
	res := &result{name: sc.name, fault: sc.fault}
	f := newFleet(t, sc, res, root)
	f.soakProfile()
	f.soakConfig()
	clientLog, err := os.Create(filepath.Join(f.dir, "logs", "mcp-clients.log"))
	if err != nil {
		f.fatalf("%v", err)
	}
	t.Cleanup(func() { _ = clientLog.Close() })
	l := newLoad(sc, f.mcp, f.mcpToken, clientLog)
	t.Cleanup(l.close)
	in := newInbound(int(d.Seconds()) * soakInboundRate)
	l.inbound = in.received
	f.tg.OnAccept("sendMessage", func(c telegramtest.Call) {
		l.accepted(c.Params["text"])
		time.Sleep(providerLatency)
	})
	f.startServices()

	clients := l.sessions(f, sessions)

	start := time.Now()
	s := &sampler{f: f, every: soakSampleEvery}
	stop := s.run()
	var wg sync.WaitGroup
	wg.Go(func() { f.soakKills(start, d) })
	wg.Go(func() { in.send(f, start, d) })
	soakNotifies(l, clients, start, d)
	wg.Wait()
	f.note("load: %d notifies and %d inbound messages in %s", l.done.Load(), in.sent(), time.Since(start).Round(time.Second))
	stop()

	f.settle(l, 90*time.Second)
	f.note("%s", res.settled)
	in.settle(60 * time.Second)
	f.tally(l)
	f.noteStuck(l)

	s.report(os.Stdout, start.Add(d*4/10), d)
	fmt.Fprintf(os.Stdout, "\nnotifies: %d sent, %d delivered (once %d), %d extra copies (each a send the messenger's kill left uncertain: %d audited), %d lost; answers sent %d, queued %d, not confirmed %d, error %d, no answer %d (retried %d)\n",
		res.notifies, res.delivered, res.once, res.duplicates, res.auditUnc, res.missing,
		res.answers[answerSent], res.answers[answerQueued], res.answers[answerUnconfirmed], res.answers[answerError], res.answers[answerNone], res.retried)
	lost, doubled, again := in.tally()
	fmt.Fprintf(os.Stdout, "inbound: %d sent, %d reached the model, %d lost, %d silent doubles (twice to one session), %d again after the butler's restart\n",
		in.sent(), in.sent()-len(lost), len(lost), len(doubled), again)
	if len(lost) > 0 {
		res.violate("%d inbound messages never reached the model: %s", len(lost), strings.Join(examples(lost, 10), ", "))
	}
	if len(doubled) > 0 {
		res.violate("%d inbound messages reached one session twice: %s", len(doubled), strings.Join(examples(doubled, 10), ", "))
	}
	violations, _ := res.failures()
	for _, v := range violations {
		t.Errorf("GOAL NOT MET: %s", v)
	}
}

// soakProfile, for measuring nats-server's memory: with
// CHAOS_SOAK_NATS_PROF set to a port, the server's config gets prof_port
// (Go's /debug/pprof on 127.0.0.1) and with CHAOS_SOAK_NATS_ENV a
// space-separated list of variables (GOMEMLIMIT=1GiB GOGC=50) its
// environment gets them; the server is then restarted before any load, so
// both hold from the start (and after the soak's kill -9 too).
func (f *fleet) soakProfile() {
	port, env := os.Getenv("CHAOS_SOAK_NATS_PROF"), strings.Fields(os.Getenv("CHAOS_SOAK_NATS_ENV"))
	if port == "" && len(env) == 0 {
		return
	}
	for _, n := range f.nodes {
		if port != "" {
			conf := filepath.Join(n.confDir, "nats.conf")
			b, err := os.ReadFile(conf)
			if err != nil {
				f.fatalf("%v", err)
			}
			if err := os.WriteFile(conf, append(b, fmt.Sprintf("\nprof_port: %s\n", port)...), 0o644); err != nil {
				f.fatalf("%v", err)
			}
		}
		n.env = append(n.env, env...)
		if err := n.stop(10 * time.Second); err != nil {
			f.fatalf("stopping %s: %v", n.name, err)
		}
		if err := n.start(20 * time.Second); err != nil {
			f.fatalf("starting %s: %v", n.name, err)
		}
		f.note("%s: prof_port %q, env %q; monitoring on 127.0.0.1:%d", n.name, port, env, n.httpPort)
	}
	f.waitHealthz(30 * time.Second)
	f.waitJetStream(30 * time.Second)
}

// soakConfig turns the chaos herald.yaml into the soak's: outbound pacing
// off (one chat takes 50/s, beyond Telegram's own 30/s per bot) and the
// bot's direct messages from the chat's person let in, bound to the butler.
func (f *fleet) soakConfig() {
	b, err := os.ReadFile(f.cfg)
	if err != nil {
		f.fatalf("%v", err)
	}
	const pacing = "rate_limit_out: { per_chat: 30/s, per_bot: 30/s }"
	if !strings.Contains(string(b), pacing) || !strings.HasSuffix(string(b), pacing+"\n") {
		f.fatalf("herald.yaml no longer ends with the line %q, which the soak replaces:\n%s", pacing, b)
	}
	cfg := strings.Replace(string(b), pacing, "rate_limit_out: { disabled: true }", 1) +
		fmt.Sprintf("    inbound: { dm_policy: allowlist, allow_from: [%q] }\n", chatID) +
		fmt.Sprintf("bindings:\n  - { integration: tg_main, chat: %q, butler: %s }\n", chatID, butlerName)
	if err := os.WriteFile(f.cfg, []byte(cfg), 0o644); err != nil {
		f.fatalf("%v", err)
	}
}

// natsBytesPerKey is nats-server's resident memory per bucket key it keeps
// (its per-stream subject index, about 133 B of live heap, doubled by Go's
// collector at GOGC=100): measured by filling the growing buckets to their
// limits (6.87 M keys: 1.71–1.90 GiB steady) against the same binary and
// deploy/nats.conf (docs/reliability.md, "A month of steady load").
const natsBytesPerKey = 270

// soakKills kills each service once with SIGKILL in the first third of the
// run (nats-server first) and starts it again: the warm-up then lets every new process settle
// before the samples that count.
func (f *fleet) soakKills(start time.Time, d time.Duration) {
	for i, k := range []struct {
		name string
		down time.Duration
	}{{soakNATSProcess, 3 * time.Second}, {"switchboard", time.Second}, {"messenger", time.Second}, {"butler", time.Second}} {
		// nats-server first: a fresh server re-warms for minutes (its
		// block buffers, its collector's headroom), which a window opening
		// a minute after its restart read as 510 MB an hour.
		time.Sleep(time.Until(start.Add(d * time.Duration(5+7*i) / 100)))
		p := f.process(k.name)
		if err := f.kill9(p); err != nil {
			f.res.violate("kill -9 %s: %v", k.name, err)
			continue
		}
		time.Sleep(k.down)
		if err := f.restart(p); err != nil {
			f.res.violate("restarting %s: %v", k.name, err)
			continue
		}
		f.note("%s restarted at %s", k.name, time.Since(start).Round(time.Second))
	}
}

// soakNotifies issues the load's notifies at soakNotifyRate, spread over
// the sessions, until d has passed; a session whose call failed at the MCP
// level is replaced, and a call behind its schedule (the butler was down)
// goes out as soon as a session is free.
func soakNotifies(l *load, clients []*client.Client, start time.Time, d time.Duration) {
	jobs := make(chan int, len(l.answers))
	go func() {
		defer close(jobs)
		for i := range l.answers {
			at := start.Add(time.Duration(i) * time.Second / soakNotifyRate)
			if at.After(start.Add(d)) {
				return
			}
			time.Sleep(time.Until(at))
			jobs <- i
		}
	}()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for i := range jobs {
				if c == nil {
					return
				}
				l.issued.Add(1)
				l.answers[i], c = l.send(c, i)
				l.done.Add(1)
			}
		})
	}
	wg.Wait()
}

// inbound is the soak's traffic the other way: tagged messages a person
// sends the bot, and every copy of each that reached a session of the
// model.
type inbound struct {
	mu     sync.Mutex
	n      int
	issued int
	// got counts each message's copies per session; first is when a
	// session received its first message, at when a message first came.
	got   []map[*client.Client]int
	first map[*client.Client]time.Time
	at    []time.Time
}

func newInbound(n int) *inbound {
	in := &inbound{n: n, got: make([]map[*client.Client]int, n), at: make([]time.Time, n), first: map[*client.Client]time.Time{}}
	for i := range in.got {
		in.got[i] = map[*client.Client]int{}
	}
	return in
}

func inboundTag(i int) string { return fmt.Sprintf("soak inbound #%06d", i) }

var inboundPattern = regexp.MustCompile(`soak inbound #(\d{6})`)

// received counts a copy of an inbound message at session c.
func (in *inbound) received(c *client.Client, content string, _ map[string]any) {
	m := inboundPattern.FindStringSubmatch(content)
	if m == nil {
		return
	}
	i, err := strconv.Atoi(m[1])
	if err != nil || i >= in.n {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.first[c]; !ok {
		in.first[c] = time.Now()
	}
	in.got[i][c]++
	if in.at[i].IsZero() {
		in.at[i] = time.Now()
	}
}

// send has the person send soakInboundRate messages a second for d.
func (in *inbound) send(f *fleet, start time.Time, d time.Duration) {
	for i := range in.n {
		at := start.Add(time.Duration(i) * time.Second / soakInboundRate)
		if at.After(start.Add(d)) {
			return
		}
		time.Sleep(time.Until(at))
		f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: mustInt(chatID), Type: "private"}, Text: inboundTag(i)})
		in.mu.Lock()
		in.issued++
		in.mu.Unlock()
	}
}

func mustInt(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

func (in *inbound) sent() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.issued
}

// settle waits until every message sent reached the model, or within.
func (in *inbound) settle(within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		lost, _, _ := in.tally()
		if len(lost) == 0 {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// tally: the messages no session received, those one session received more
// than once, and how many reached sessions opened after an earlier session
// had them (the butler restarted between its push and its ack).
func (in *inbound) tally() (lost, doubled []string, again int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for i := range in.issued {
		if len(in.got[i]) == 0 {
			lost = append(lost, fmt.Sprintf("#%06d", i))
			continue
		}
		for _, n := range in.got[i] {
			if n > 1 {
				doubled = append(doubled, fmt.Sprintf("#%06d (%d copies)", i, n))
			}
		}
		for c := range in.got[i] {
			if in.first[c].After(in.at[i]) {
				again++
				break
			}
		}
	}
	return lost, doubled, again
}

// sampler reads every process's RSS, open files and goroutines, and every
// stream's size, every few seconds.
type sampler struct {
	f     *fleet
	every time.Duration

	mu      sync.Mutex
	procs   map[string][]procSample
	streams []streamSample
}

type procSample struct {
	at                   time.Time
	pid                  int
	rss, files, routines int64
	// heap is a Herald process's go_memstats_heap_alloc_bytes: the live
	// heap and the garbage not yet collected.
	heap int64
}

type streamSample struct {
	at    time.Time
	state map[string]jetstream.StreamInfo
}

// pid is the running process's id, 0 if it is not running.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil || isClosed(p.done) {
		return 0
	}
	return p.cmd.Process.Pid
}

func (s *sampler) run() (stop func()) {
	s.procs = map[string][]procSample{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.every)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

func (s *sampler) sample() {
	now := time.Now()
	names := []string{soakNATSProcess, "switchboard", "messenger", "butler"}
	for _, name := range names {
		p := s.f.process(name)
		pid := p.pid()
		if pid == 0 {
			continue
		}
		ps := procSample{at: now, pid: pid, rss: vmRSS(pid), files: openFiles(pid)}
		if name != soakNATSProcess {
			if g, ok, err := s.f.counter(name, "go_goroutines"); err == nil && ok {
				ps.routines = int64(g)
			}
			if h, ok, err := s.f.counter(name, "go_memstats_heap_alloc_bytes"); err == nil && ok {
				ps.heap = int64(h)
			}
		}
		if ps.rss < 0 {
			continue // gone between the pid and its status
		}
		s.mu.Lock()
		s.procs[name] = append(s.procs[name], ps)
		s.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ss := streamSample{at: now, state: map[string]jetstream.StreamInfo{}}
	list := s.f.js.ListStreams(ctx)
	for info := range list.Info() {
		ss.state[info.Config.Name] = *info
	}
	if list.Err() == nil {
		s.mu.Lock()
		s.streams = append(s.streams, ss)
		s.mu.Unlock()
	}
}

// vmRSS is /proc/<pid>/status's VmRSS in bytes, -1 if unreadable.
func vmRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return -1
}

// openFiles is how many descriptors /proc/<pid>/fd lists.
func openFiles(pid int) int64 {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return int64(len(entries))
}

// slope is the least-squares growth of y per hour.
func slope(at []time.Time, y []float64) float64 {
	if len(at) < 3 {
		return math.NaN()
	}
	var sx, sy, sxx, sxy float64
	for i := range at {
		x := at[i].Sub(at[0]).Hours()
		sx, sy, sxx, sxy = sx+x, sy+y[i], sxx+x*x, sxy+x*y[i]
	}
	n := float64(len(at))
	den := n*sxx - sx*sx
	if den == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / den
}

func mb(b float64) string { return fmt.Sprintf("%.1f MB", b/(1<<20)) }

// troughEvery is the span of each trough of a heap series: a few of the
// collector's cycles at the soak's load.
const troughEvery = 2 * time.Minute

// troughs are the least of vs in each span of every (zeros, a sample
// without the figure, left out), at the span's start.
func troughs(at []time.Time, vs []float64, every time.Duration) ([]time.Time, []float64) {
	var outAt []time.Time
	var out []float64
	for i, v := range vs {
		if v <= 0 {
			continue
		}
		if n := len(out); n > 0 && at[i].Sub(outAt[n-1]) < every {
			out[n-1] = min(out[n-1], v)
			continue
		}
		outAt, out = append(outAt, at[i]), append(out, v)
	}
	return outAt, out
}

// report prints, per process, what the samples from from on say, and per
// stream its growth against its limits.
func (s *sampler) report(w io.Writer, from time.Time, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(w, "\nA month of steady load: %d notifies/s and %d inbound/s for %s, samples every %s, measured from %s on (after the warm-up and the kills)\n\n",
		soakNotifyRate, soakInboundRate, d, s.every, d*4/10)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "process\tsamples\tRSS\tRSS /h\tlive heap\theap /h\tfiles\tfiles /h\tgoroutines\tgoroutines /h\t30-day RSS\tbudget\tverdict\t")
	keysPerHour, keysNow, keys30 := s.kvKeys(from)
	for _, name := range []string{soakNATSProcess, "switchboard", "messenger", "butler"} {
		var at []time.Time
		var rss, files, routines, heap []float64
		all := s.procs[name]
		if len(all) == 0 {
			continue
		}
		last := all[len(all)-1].pid
		for _, p := range all {
			if p.at.Before(from) || p.pid != last {
				continue
			}
			at = append(at, p.at)
			rss, files, routines = append(rss, float64(p.rss)), append(files, float64(p.files)), append(routines, float64(p.routines))
			heap = append(heap, float64(p.heap))
		}
		if len(at) < 3 {
			fmt.Fprintf(tw, "%s\t%d\t\t\t\t\t\t\t\t\ttoo few samples\t\n", name, len(at))
			continue
		}
		rssH := slope(at, rss)
		end := rss[len(rss)-1]
		// A Herald process's RSS follows its live heap: the collector lets
		// the heap reach twice the live heap (GOGC=100) before it collects,
		// and returns freed pages when it likes, so over minutes RSS is a
		// sawtooth. The live heap is the heap's troughs (the least heap of
		// each troughEvery), and a month is projected as the RSS at the end
		// and twice the live heap's growth, for the whole month.
		liveAt, live := troughs(at, heap, troughEvery)
		heapH := 0.0
		if len(live) >= 2 {
			heapH = slope(liveAt, live)
		}
		proj := end + 2*max(heapH, 0)*soakMonth.Hours()
		how := "2 × live heap's growth"
		liveText, heapHText := "-", "-"
		if len(live) >= 2 {
			liveText, heapHText = mb(live[0])+"→"+mb(live[len(live)-1]), mb(heapH)
		}
		if name == soakNATSProcess && keysPerHour > 0 && rssH > 0 {
			// nats-server's grows with the keys the buckets keep, until
			// each bucket's limits stop it: what it holds now and the
			// bytes of a kept key (natsBytesPerKey, measured by filling
			// the buckets to their limits) for each key still to come. A
			// slope over minutes is the warm-up's curve, not a rate: it is
			// printed beside, as the per-key figure it would mean.
			proj = end + natsBytesPerKey*max(keys30-keysNow, 0)
			how = fmt.Sprintf("%d B/key × %.1fM keys to come; this run's slope would be %.0f B/key", natsBytesPerKey, max(keys30-keysNow, 0)/1e6, rssH/keysPerHour)
		}
		verdict := "within budget"
		switch {
		case at[len(at)-1].Sub(at[0]) < soakVerdictWindow:
			// Minutes of a collector's sawtooth say little of a month.
			verdict = fmt.Sprintf("no verdict (measured %s < %s)", at[len(at)-1].Sub(at[0]).Round(time.Second), soakVerdictWindow)
		case proj > float64(soakBudget(name)):
			verdict = "OVER BUDGET"
		}
		g, gh := "-", "-"
		if name != soakNATSProcess {
			g, gh = fmt.Sprintf("%.0f→%.0f", routines[0], routines[len(routines)-1]), fmt.Sprintf("%+.0f", slope(at, routines))
		}
		if name == soakNATSProcess {
			liveText, heapHText = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s→%s\t%s\t%s\t%s\t%.0f→%.0f\t%+.0f\t%s\t%s\t%s (%s)\t%s\t%s\t\n", name, len(at),
			mb(rss[0]), mb(end), mb(rssH), liveText, heapHText, files[0], files[len(files)-1], slope(at, files), g, gh, mb(proj), how, mb(float64(soakBudget(name))), verdict)
	}
	_ = tw.Flush()
	s.reportStreams(w, from)
}

// kvKeys: the keys every bucket gains an hour (measured from from on), the
// keys they hold now, and the keys they would hold after a month at that
// rate under their limits (MaxAge, MaxMsgs).
func (s *sampler) kvKeys(from time.Time) (perHour, now, month float64) {
	for name, g := range s.growth(from) {
		if !strings.HasPrefix(name, "KV_") {
			continue
		}
		perHour += g.msgsH
		now += float64(g.last.State.Msgs)
		month += g.month()
	}
	return perHour, now, month
}

type streamGrowth struct {
	first, last   jetstream.StreamInfo
	msgsH, bytesH float64
}

// kept is how long the stream keeps a message, at most a month.
func (g streamGrowth) kept() time.Duration {
	if age := g.last.Config.MaxAge; age > 0 && age < soakMonth {
		return age
	}
	return soakMonth
}

// month is how many messages the stream holds after a month at this rate:
// a work queue none (its consumers keep up), else what its age and count
// limits leave.
func (g streamGrowth) month() float64 {
	if g.last.Config.Retention == jetstream.WorkQueuePolicy {
		return float64(g.last.State.Msgs)
	}
	n := float64(g.last.State.Msgs) + max(g.msgsH, 0)*g.kept().Hours()
	if m := g.last.Config.MaxMsgs; m > 0 {
		n = min(n, float64(m))
	}
	return n
}

// monthBytes is the same in bytes, under MaxBytes.
func (g streamGrowth) monthBytes() float64 {
	if g.last.Config.Retention == jetstream.WorkQueuePolicy {
		return float64(g.last.State.Bytes)
	}
	n := float64(g.last.State.Bytes) + max(g.bytesH, 0)*g.kept().Hours()
	if m := g.last.Config.MaxBytes; m > 0 {
		n = min(n, float64(m))
	}
	if msgs := g.month(); g.last.State.Msgs > 0 && msgs < float64(g.last.State.Msgs)+max(g.msgsH, 0)*g.kept().Hours() {
		n = min(n, msgs*float64(g.last.State.Bytes)/float64(g.last.State.Msgs))
	}
	return n
}

func (s *sampler) growth(from time.Time) map[string]streamGrowth {
	out := map[string]streamGrowth{}
	var at []time.Time
	series := map[string][2][]float64{}
	for _, ss := range s.streams {
		if ss.at.Before(from) {
			continue
		}
		at = append(at, ss.at)
		for name, info := range ss.state {
			v := series[name]
			v[0], v[1] = append(v[0], float64(info.State.Msgs)), append(v[1], float64(info.State.Bytes))
			series[name] = v
			g, ok := out[name]
			if !ok {
				g.first = info
			}
			g.last = info
			out[name] = g
		}
	}
	for name, v := range series {
		if len(v[0]) != len(at) {
			continue // a stream made during the window
		}
		g := out[name]
		g.msgsH, g.bytesH = slope(at, v[0]), slope(at, v[1])
		out[name] = g
	}
	return out
}

func (s *sampler) reportStreams(w io.Writer, from time.Time) {
	growth := s.growth(from)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range growth {
			if !yield(n) {
				return
			}
		}
	})
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stream\tmsgs\tbytes\tmsgs /h\tbytes /h\tmax age\tmax msgs\tmax bytes\tdiscard\tafter 30 days\t")
	var disk float64
	for _, name := range names {
		g := growth[name]
		c := g.last.Config
		disk += g.monthBytes()
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.2fM msgs, %s\t\n", name, g.last.State.Msgs, mb(float64(g.last.State.Bytes)),
			g.msgsH, mb(g.bytesH), limitAge(c.MaxAge), limitInt(c.MaxMsgs), limitBytes(c.MaxBytes), c.Discard, g.month()/1e6, mb(g.monthBytes()))
	}
	_ = tw.Flush()
	verdict := "within budget"
	if disk > budgetNATSDisk {
		verdict = "OVER BUDGET"
	}
	fmt.Fprintf(w, "nats-server's store after 30 days: %s of %s: %s\n", mb(disk), mb(budgetNATSDisk), verdict)
}

func limitAge(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	default:
		return d.String()
	}
}

func limitInt(n int64) string {
	if n <= 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func limitBytes(n int64) string {
	if n <= 0 {
		return "-"
	}
	return mb(float64(n))
}
