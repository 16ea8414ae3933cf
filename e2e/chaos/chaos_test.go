//go:build chaos

// Package chaos is the fault-injection harness of `make chaos` (architecture.md §9):
// Herald's real binaries (switchboard, messenger, butler) run as separate
// processes against real nats-server processes (one server, or a 3-node
// cluster) on loopback, with the Telegram Bot API faked in this process. The
// servers run from the compose fleet's deploy/nats.conf and
// deploy/nats-cluster.conf, only their addresses and store rewritten.
// Each scenario sends distinct notifies through the butler's MCP notify tool
// from 16 concurrent sessions, injects one fault — kill -9 of a process, a
// 429 storm, a Telegram outage, a ledger write cut off after Telegram took
// the message, a provider slower than the messenger's 30 s client timeout,
// a butler kill -9 with the callers retrying on new sessions with their
// idempotency_key, a full disk under NATS's store with the butler and
// nats-server restarted through it — and then checks every notify's fate
// against what the butler was told: nothing lost, nothing sent twice (beyond
// what a messenger crash or an uncertain send must allow, and audits and
// reports), and no answer the outcome contradicts. The table counts, per
// scenario, the notifies delivered once, the extra copies, the missing and
// contradicted ones, the uncertain sends, and every kind of answer.
//
// The disk-full scenario mounts a tmpfs (root only); without root it is
// skipped, and says so.
//
// Run it with `make chaos`. HERALD_BIN names the directory of the binaries
// (switchboard, messenger, butler, nats-server); CHAOS_LEGACY_CONFIG=1 leaves
// out herald.yaml keys that older services refuse.
package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// providerLatency is how long the fake takes to answer a message Telegram
// accepted: the window in which a crash leaves a send's outcome unknown.
const providerLatency = 20 * time.Millisecond

// scenario is one fault and the load it is injected into.
type scenario struct {
	name  string
	fault string // one line, for the table
	// notifies to send; cluster runs three servers with replicas 3.
	notifies int
	cluster  bool
	// onUncertain and retryFor go into herald.yaml.
	onUncertain string
	retryFor    time.Duration
	// messengerCrash allows up to two duplicates, each audited uncertain.
	messengerCrash bool
	// uncertainDuplicates allows a copy beyond the first for each audit
	// record of kind uncertain of a notify whose butler was told (an
	// uncertain outcome, a delivery_uncertain or delivery_failed report).
	uncertainDuplicates bool
	// retry gives every notify an idempotency_key and makes each call
	// that failed at the MCP level once more, with it, on a new session.
	retry bool
	// storeSize puts the (single) server's store on a tmpfs of that size.
	storeSize string
	// setup runs before the load (hooks on the fake); inject runs alongside
	// it; check adds the scenario's own goals after the tally.
	setup  func(f *fleet)
	inject func(f *fleet, l *load) error
	check  func(f *fleet, l *load)
	// settleWithin bounds the wait for late outcomes after the load.
	settleWithin time.Duration
	// drive, when set, runs the scenario instead of the notify load: the
	// ways back to the model, inbound messages and taps (ways_test.go).
	drive func(f *fleet)
}

func scenarios() []*scenario {
	return []*scenario{
		{
			name: "messenger-kill", fault: "messenger kill -9 mid-burst, restarted", notifies: 1000, messengerCrash: true,
			inject: killAndRestart("messenger", 300, time.Second),
		},
		{
			name: "messenger-kill-skip", fault: "the same with on_uncertain: skip", notifies: 1000, messengerCrash: true, onUncertain: "skip",
			inject: killAndRestart("messenger", 300, time.Second),
		},
		{
			name: "switchboard-kill", fault: "switchboard kill -9 mid-burst, restarted", notifies: 400,
			inject: killAndRestart("switchboard", 120, time.Second),
		},
		{
			name: "nats-kill", fault: "nats-server kill -9 mid-burst, restarted on its store after 3 s", notifies: 400,
			inject: killAndRestart("nats-1", 120, 3*time.Second),
		},
		{
			name: "cluster-leader-kill", fault: "3-node cluster: the streams' leader kill -9 mid-burst, back after 3 s", notifies: 300, cluster: true,
			inject: killLeader(90, 3*time.Second),
		},
		{
			name: "cluster-node-stopped", fault: "3-node cluster: the messenger's node stopped (SIGSTOP) 30 s mid-burst, no disconnect", notifies: 1500, cluster: true,
			inject: stopNode(100, 30*time.Second, "messenger"), check: checkThroughTheCut,
		},
		{
			name: "telegram-429-storm", fault: "50 sendMessage answered 429 retry_after 2", notifies: 200,
			inject: storm429(30, 50, 2), check: checkRetryAfter, settleWithin: 150 * time.Second,
		},
		{
			name: "telegram-5xx-outage", fault: "Telegram 502 for 30 s, retry_for 15 s", notifies: 200, retryFor: 15 * time.Second,
			setup: outage5xx(30 * time.Second), settleWithin: 120 * time.Second,
		},
		{
			name: "ledger-write-fails", fault: "NATS stopped 8 s the moment Telegram accepted message #50", notifies: 200,
			setup: pauseNATSOnAccept(50, 8*time.Second), check: checkHeld,
		},
		{
			name: "slow-provider", fault: "Telegram answers 5 sendMessage after 40 s (client timeout 30 s)", notifies: 100, uncertainDuplicates: true,
			setup: slowProvider(30, 5, 40*time.Second), check: checkSlow(5),
		},
		{
			name: "butler-kill-retry", fault: "butler kill -9 mid-burst, restarted; failed calls retried with their idempotency_key", notifies: 400, retry: true,
			inject: killAndRestart("butler", 100, time.Second), check: checkRetries,
		},
		{
			name: "disk-full-butler-restart", fault: "NATS store (64 MB tmpfs) filled; butler, then nats-server restarted", notifies: 400, storeSize: "64m",
			inject: diskFull(100), check: checkDiskFull,
		},
		{
			name: "inbound-kills", fault: "5 inbound messages/s on a 3-node cluster; switchboard, messenger, butler, then HERALD_INBOX's leader kill -9 in turn, each restarted", cluster: true,
			drive: driveInbound,
		},
		{
			name: "taps-switchboard-kill", fault: "20 notes with ack_within 30s escalating to a second bot, 17 tapped 1–6 s before their deadline; switchboard kill -9 the moment 4 of the taps are on the bus, restarted after 1 s",
			drive: driveTaps,
		},
	}
}

// TestChaos runs every scenario, each on a fresh NATS and fresh processes,
// and prints one table of all of them.
func TestChaos(t *testing.T) {
	root, err := os.MkdirTemp("", "herald-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("work directory (stores, herald.yaml, logs): %s", root)
	var rows []*result
	t.Cleanup(func() {
		if notify := notifyRows(rows); len(notify) > 0 {
			printTable(os.Stdout, notify, legacyConfig())
		}
		printWays(os.Stdout, rows)
		if t.Failed() || os.Getenv("CHAOS_KEEP") != "" {
			t.Logf("logs kept in %s", root)
			return
		}
		_ = os.RemoveAll(root)
	})
	for _, sc := range scenarios() {
		if sc.onUncertain == "" {
			sc.onUncertain = "resend"
		}
		if sc.retryFor == 0 {
			sc.retryFor = 3 * time.Minute
		}
		if sc.settleWithin == 0 {
			sc.settleWithin = 90 * time.Second
		}
		res := &result{name: sc.name, fault: sc.fault}
		t.Run(sc.name, func(t *testing.T) {
			rows = append(rows, res)
			run(t, sc, res, root)
		})
	}
}

// run is one scenario: start, load with the fault, settle, tally, check.
func run(t *testing.T, sc *scenario, res *result, root string) {
	f := newFleet(t, sc, res, root)
	if sc.drive != nil {
		res.ways = []*wayRow{}
		sc.drive(f)
		return
	}
	clientLog, err := os.Create(filepath.Join(f.dir, "logs", "mcp-clients.log"))
	if err != nil {
		f.fatalf("%v", err)
	}
	t.Cleanup(func() { _ = clientLog.Close() })
	l := newLoad(sc, f.mcp, f.mcpToken, clientLog)
	t.Cleanup(l.close)
	f.tg.OnAccept("sendMessage", func(c telegramtest.Call) {
		l.accepted(c.Params["text"])
		time.Sleep(providerLatency)
		f.accept(c)
	})
	f.startServices()
	if sc.setup != nil {
		sc.setup(f)
	}

	clients := l.sessions(f, sessions)

	loadStart := time.Now()
	injected := make(chan error, 1)
	go func() {
		if sc.inject == nil {
			injected <- nil
			return
		}
		injected <- sc.inject(f, l)
	}()
	// At most this long issuing notifies; the rest are not sent.
	l.run(clients, loadStart.Add(3*time.Minute))
	f.note("load: %d notifies answered in %s", l.done.Load(), time.Since(loadStart).Round(100*time.Millisecond))
	if err := <-injected; err != nil {
		res.violate("the fault was not injected as designed: %v", err)
	}
	f.settle(l, sc.settleWithin)
	f.note("%s", res.settled)
	if !res.killedAt.IsZero() {
		res.recovery, res.inFlight = l.recovery(res.killedAt)
		f.note("recovery: the last of %d notifies in flight at the kill reached Telegram %s after it", res.inFlight, res.recovery.Round(100*time.Millisecond))
	}
	f.tally(l)
	f.noteStuck(l)
	f.writeCalls()
	if sc.check != nil {
		sc.check(f, l)
	}

	t.Logf("%s: notifies %d, delivered %d (once %d), duplicates %d, missing %d, answers sent %d / queued %d / unconfirmed %d / error %d / uncertain %d / none %d, retried %d, reports failed %d / uncertain %d, audit uncertain %d, contradicted %d",
		sc.name, res.notifies, res.delivered, res.once, res.duplicates, res.missing,
		res.answers[answerSent], res.answers[answerQueued], res.answers[answerUnconfirmed], res.answers[answerError], res.uncertain, res.answers[answerNone],
		res.retried, res.failedRep, res.uncertRep, res.auditUnc, res.contradict)
	violations, _ := res.failures()
	for _, v := range violations {
		t.Errorf("GOAL NOT MET: %s", v)
	}
}

// waitAccepted waits until the fake has accepted n messages, or within.
func (f *fleet) waitAccepted(n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for f.accepted() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d messages accepted within %s, wanted %d before the fault", f.accepted(), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// process is a service or NATS node by name ("messenger", "nats-1").
func (f *fleet) process(name string) *proc {
	if p := f.svc[name]; p != nil {
		return p
	}
	for _, n := range f.nodes {
		if n.name == name {
			return n.proc
		}
	}
	return nil
}

// killAndRestart kills a process with SIGKILL once after messages were
// accepted, and starts it again, same config and store, down seconds later.
func killAndRestart(name string, after int, down time.Duration) func(*fleet, *load) error {
	return func(f *fleet, _ *load) error {
		if err := f.waitAccepted(after, 60*time.Second); err != nil {
			return err
		}
		p := f.process(name)
		if err := f.kill9(p); err != nil {
			return err
		}
		f.res.killedAt = time.Now()
		time.Sleep(down)
		if err := f.restart(p); err != nil {
			return err
		}
		f.note("%s restarted at %d accepted", name, f.accepted())
		return nil
	}
}

// killLeader kills the server leading most of the streams that matter
// (HERALD_DELIVER's leader on a tie), and brings it back.
func killLeader(after int, down time.Duration) func(*fleet, *load) error {
	return func(f *fleet, _ *load) error {
		if err := f.waitAccepted(after, 60*time.Second); err != nil {
			return err
		}
		streams := []string{streamDeliver, streamRoute, streamLedger}
		leaders, err := f.leaders(streams...)
		if err != nil {
			return err
		}
		votes := map[string]int{}
		for _, s := range streams {
			votes[leaders[s]]++
		}
		target := leaders[streamDeliver]
		for name, v := range votes {
			if v > votes[target] {
				target = name
			}
		}
		var node *natsNode
		for _, n := range f.nodes {
			if n.serverName == target {
				node = n
			}
		}
		if node == nil {
			return fmt.Errorf("leader %q is not a server of this cluster", target)
		}
		f.note("leaders: %s %s, %s %s, %s %s; killing %s (%s)", streamDeliver, leaders[streamDeliver], streamRoute, leaders[streamRoute], streamLedger, leaders[streamLedger], target, node.name)
		if err := f.kill9(node.proc); err != nil {
			return err
		}
		time.Sleep(down)
		if err := node.start(20 * time.Second); err != nil {
			return err
		}
		f.note("%s restarted at %d accepted", node.name, f.accepted())
		if after, err := f.leaders(streams...); err == nil {
			f.note("leaders after the restart: %v", after)
		}
		return nil
	}
}

// stopNode stops (SIGSTOP) the server the connection named conn is on, for
// down, once after messages were accepted: the connection is not closed,
// the server just stops answering, as behind a silent partition. What was
// accepted meanwhile is noted for checkThroughTheCut.
func stopNode(after int, down time.Duration, conn string) func(*fleet, *load) error {
	return func(f *fleet, _ *load) error {
		if err := f.waitAccepted(after, 60*time.Second); err != nil {
			return err
		}
		node, err := f.nodeOf(conn)
		if err != nil {
			return err
		}
		f.note("%s is on %s (%s): stopping it for %s", conn, node.serverName, node.name, down)
		if err := node.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		f.cut.from, f.cut.acceptedAt = time.Now(), f.accepted()
		time.Sleep(down)
		f.cut.to, f.cut.acceptedBy = time.Now(), f.accepted()
		if err := node.signal(syscall.SIGCONT); err != nil {
			return err
		}
		f.note("%s resumed; %d messages were accepted while it was stopped", node.name, f.cut.acceptedBy-f.cut.acceptedAt)
		return nil
	}
}

// checkThroughTheCut: delivery went on while a node was stopped, through
// the others; it notes the longest wait for the provider in the cut.
func checkThroughTheCut(f *fleet, l *load) {
	if f.cut.from.IsZero() {
		return // the fault was not injected; said already
	}
	if n := f.cut.acceptedBy - f.cut.acceptedAt; n == 0 {
		f.res.violate("nothing was delivered in the %s a node was stopped: a silent server was not noticed", f.cut.to.Sub(f.cut.from).Round(time.Second))
	}
	gap, last := time.Duration(0), f.cut.from
	for _, at := range l.acceptedTimes() {
		if at.Before(f.cut.from) || at.After(f.cut.to) {
			continue
		}
		gap, last = max(gap, at.Sub(last)), at
	}
	gap = max(gap, f.cut.to.Sub(last))
	f.note("through the cut: the longest time with nothing accepted was %s", gap.Round(100*time.Millisecond))
}

// storm429 answers the next n sendMessage calls with 429 retry_after once
// after messages were accepted.
func storm429(after, n, retryAfter int) func(*fleet, *load) error {
	return func(f *fleet, _ *load) error {
		if err := f.waitAccepted(after, 60*time.Second); err != nil {
			return err
		}
		f.tg.FailNext("sendMessage", n, 429, fmt.Sprintf("Too Many Requests: retry after %d", retryAfter), retryAfter)
		f.note("429 storm armed at %d accepted", f.accepted())
		return nil
	}
}

// inFlightGrace is how soon after a 429 was answered a call may still arrive
// without breaking its retry_after: on loopback, a request sent before the
// sender could have read the 429 arrives within milliseconds, while the next
// send of a 30/s pacer that ignored it comes 33 ms later.
const inFlightGrace = 25 * time.Millisecond

// checkRetryAfter: no sendMessage to the bot arrived inside a retry_after
// window a 429 announced.
func checkRetryAfter(f *fleet, _ *load) {
	calls := f.tg.Calls("sendMessage")
	var windows []telegramtest.Call
	for _, c := range calls {
		if c.ErrorCode == 429 && c.RetryAfter > 0 {
			windows = append(windows, c)
		}
	}
	var inside []string
	excused := 0
	for _, c := range calls {
		for _, w := range windows {
			end := w.Answered.Add(time.Duration(w.RetryAfter) * time.Second)
			if c.Token != w.Token || !c.Arrived.After(w.Answered) || !c.Arrived.Before(end) {
				continue
			}
			if c.Arrived.Sub(w.Answered) <= inFlightGrace {
				excused++
			} else {
				inside = append(inside, fmt.Sprintf("a call %s after a 429 that said retry_after %d", c.Arrived.Sub(w.Answered).Round(time.Millisecond), w.RetryAfter))
			}
			break
		}
	}
	storm := time.Duration(0)
	if len(windows) > 0 {
		storm = windows[len(windows)-1].Answered.Sub(windows[0].Answered)
	}
	f.note("429 answers: %d over %s; sendMessage calls inside an announced retry_after: %d (plus %d within %s of the 429, already on their way)", len(windows), storm.Round(100*time.Millisecond), len(inside), excused, inFlightGrace)
	if len(windows) == 0 {
		f.res.violate("the storm produced no 429 answers; the scenario proved nothing")
	}
	if len(inside) > 0 {
		f.res.violate("%d sendMessage calls arrived inside a retry_after the bot was given (want 0): %s", len(inside), strings.Join(examples(inside, 5), "; "))
	}
}

// outage5xx makes Telegram answer 502 to every sendMessage for d from the
// start of the load.
func outage5xx(d time.Duration) func(*fleet) {
	return func(f *fleet) {
		until := time.Now().Add(d)
		f.tg.FailUntil("sendMessage", until, 502, "Bad Gateway")
		f.note("Telegram answers 502 until %s", until.Format("15:04:05"))
	}
}

// pauseNATSOnAccept stops every NATS server (SIGSTOP) the moment the fake
// accepts its nth message, before the sender hears of it, so the messenger's
// ledger write after the send cannot succeed; SIGCONT after hold.
func pauseNATSOnAccept(nth int, hold time.Duration) func(*fleet) {
	return func(f *fleet) {
		var count atomic.Int64
		f.heldTag.Store("")
		f.onAccept(func(c telegramtest.Call) {
			if count.Add(1) != int64(nth) {
				return
			}
			f.heldTag.Store(c.Params["text"])
			if err := f.pauseNATS(true); err != nil {
				f.res.violate("SIGSTOP nats-server: %v", err)
				return
			}
			f.note("message %d (%q) accepted; nats-server stopped for %s", nth, c.Params["text"], hold)
			time.AfterFunc(hold, func() {
				if err := f.pauseNATS(false); err != nil {
					f.res.violate("SIGCONT nats-server: %v", err)
				}
			})
		})
	}
}

// checkHeld: the message accepted while NATS stopped was delivered exactly once.
func checkHeld(f *fleet, l *load) {
	tag, _ := f.heldTag.Load().(string)
	if tag == "" {
		f.res.violate("the fault never fired: fewer messages accepted than the trigger needs")
		return
	}
	i := l.index(tag)
	copies := 0
	for _, c := range f.tg.Calls("sendMessage") {
		if c.OK() && l.index(c.Params["text"]) == i {
			copies++
		}
	}
	f.note("the message accepted while NATS was stopped (#%04d) is at Telegram %d time(s); answer: %s", i, copies, firstLine(l.answers[i].text))
	if copies != 1 {
		f.res.violate("#%04d, accepted while the ledger could not be written, reached Telegram %d times (want exactly 1)", i, copies)
	}
}

// slowProvider makes the fake hold n sendMessage calls for d each, those
// it accepts after the first after: past the messenger's 30 s client
// timeout, the sender cannot know the message went out.
func slowProvider(after, n int, d time.Duration) func(*fleet) {
	return func(f *fleet) {
		var count atomic.Int64
		f.onAccept(func(c telegramtest.Call) {
			if k := count.Add(1); k <= int64(after) || k > int64(after+n) {
				return
			}
			f.strike(c.Params["text"])
			time.Sleep(d)
		})
	}
}

// checkSlow: n calls were slow, and each of their notifies is audited
// uncertain, its butler told, and resent once (on_uncertain: resend) or
// not (skip).
func checkSlow(n int) func(*fleet, *load) {
	return func(f *fleet, l *load) {
		want := 2
		if f.sc.onUncertain == "skip" {
			want = 1
		}
		slow := f.struckTexts()
		var fates []string
		for _, text := range slow {
			i := l.index(text)
			if i < 0 {
				f.res.violate("a slow call carried no notify of the run: %q", firstLine(text))
				continue
			}
			a, ft := l.answers[i], f.out.fates[i]
			fates = append(fates, fmt.Sprintf("#%04d %d copies, audited uncertain %d, answer %s%s, reported %s", i, ft.copies, ft.audits, a.kind, uncertainMark(a), reportsOf(ft)))
			if ft.copies != want {
				f.res.violate("#%04d, answered by Telegram after the client timeout, is there %d times (want %d with on_uncertain: %s)", i, ft.copies, want, f.sc.onUncertain)
			}
			if !ft.audited {
				f.res.violate("#%04d, answered by Telegram after the client timeout, has no audit record of kind uncertain", i)
			}
			if !toldUncertain(a, ft) {
				f.res.violate("#%04d, answered by Telegram after the client timeout, was never reported uncertain to its butler (answer %s, no delivery_uncertain/delivery_failed notification)", i, a.kind)
			}
		}
		f.note("slow: %d sendMessage calls held past the client timeout: %s", len(slow), strings.Join(fates, "; "))
		if len(slow) != n {
			f.res.violate("%d sendMessage calls were slow, want %d", len(slow), n)
		}
	}
}

// reportsOf names the outcome notifications a notify's butler got.
func reportsOf(ft fate) string {
	var r []string
	if ft.uncertRep {
		r = append(r, "delivery_uncertain")
	}
	if ft.failedRep {
		r = append(r, "delivery_failed")
	}
	if len(r) == 0 {
		return "nothing"
	}
	return strings.Join(r, " and ")
}

// checkRetries: calls failed at the MCP level and were retried, and how
// the retries were answered: a retry of a message already at Telegram is
// answered from the ledger, never sent again (no duplicates, the tally's
// goal).
func checkRetries(f *fleet, l *load) {
	var groups answerGroups
	retried := 0
	firstTry := ""
	for i, a := range l.answers[:l.issued.Load()] {
		if a.firstTry == nil {
			continue
		}
		retried++
		if firstTry == "" {
			firstTry = firstLine(a.firstTry.text)
		}
		key := a.key()
		if at := l.acceptedTime(i); !at.IsZero() && at.Before(a.retriedAt) {
			key += ", the first call's message at Telegram before the retry"
		} else if f.out.fates[i].copies > 0 {
			key += ", at Telegram after the retry"
		} else {
			key += ", never at Telegram"
		}
		groups.add(key, a)
	}
	f.note("retried: %d calls failed at the MCP level (e.g. %q) and were made once more with the same idempotency_key on a new session", retried, firstTry)
	groups.note(f, "retries answered")
	if retried == 0 {
		f.res.violate("no call failed at the MCP level: the kill caught none in flight, and no retry was made")
	}
}

// storeFailuresMetric counts a service's failed NATS store probes.
const storeFailuresMetric = "herald_bus_store_failures_total"

// diskFull fills the single server's tmpfs store once after messages were
// accepted, and goes through the fault as an operator would: every
// service's /readyz must say NATS cannot store, and its /metrics count the
// failures; the butler is restarted (SIGTERM) on the full store; the
// ballast is removed; nats-server is restarted (SIGTERM) on its store, as
// it keeps a stream's write error until then; and every /readyz must be
// ready again.
func diskFull(after int) func(*fleet, *load) error {
	return func(f *fleet, _ *load) error {
		if err := f.waitAccepted(after, 60*time.Second); err != nil {
			return err
		}
		node := f.nodes[0]
		ballast := filepath.Join(node.store, "ballast")
		full := time.Now()
		n, err := fill(ballast)
		if err != nil {
			return fmt.Errorf("filling %s: %w", node.store, err)
		}
		f.note("store full at %s, %d accepted: %.1f MiB of ballast", full.Format("15:04:05.0"), f.accepted(), float64(n)/(1<<20))
		f.awaitReadiness("503 with nats.store failing", storeFailing, full, 20*time.Second)
		time.Sleep(10 * time.Second)
		f.noteReadiness(fmt.Sprintf("%s after the store filled", time.Since(full).Round(100*time.Millisecond)))
		f.checkStoreFailures()

		butler := f.svc["butler"]
		if err := butler.stop(30 * time.Second); err != nil {
			f.res.violate("restarting the butler on the full store: %v", err)
		}
		f.note("butler stopped (SIGTERM) at %d accepted; starting it again, the store still full", f.accepted())
		if err := f.restart(butler); err != nil {
			f.res.violate("the butler did not start again while the store was full: %v", err)
		}

		if err := os.Remove(ballast); err != nil {
			return err
		}
		freed := time.Now()
		for time.Since(freed) < 10*time.Second && !f.allReady() {
			time.Sleep(250 * time.Millisecond)
		}
		f.noteReadiness(fmt.Sprintf("%s after the ballast was removed, nats-server not restarted", time.Since(freed).Round(100*time.Millisecond)))

		if err := node.stop(30 * time.Second); err != nil {
			return err
		}
		restarted := time.Now()
		if err := node.start(20 * time.Second); err != nil {
			return err
		}
		f.note("nats-server restarted (SIGTERM, then on its store) at %d accepted", f.accepted())
		if !butler.running() {
			if err := f.restart(butler); err != nil {
				return fmt.Errorf("the butler did not start after nats-server's restart either: %w", err)
			}
			f.note("butler started after nats-server's restart")
		}
		f.awaitReadiness("200 (ready)", ready, restarted, 30*time.Second)
		return nil
	}
}

// allReady: every service's /readyz answers 200.
func (f *fleet) allReady() bool {
	for _, name := range serviceNames {
		if !ready(f.readyz(name)) {
			return false
		}
	}
	return true
}

// checkStoreFailures: while the store is full, every service's /metrics
// counts failed store probes.
func (f *fleet) checkStoreFailures() {
	var got []string
	for _, name := range serviceNames {
		v, found, err := f.counter(name, storeFailuresMetric)
		switch {
		case err != nil:
			f.res.violate("%s /metrics while the store is full: %v", name, err)
			got = append(got, name+" unread")
			continue
		case !found:
			f.res.violate("%s /metrics has no %s while the store is full", name, storeFailuresMetric)
		case v == 0:
			f.res.violate("%s: %s is 0 while the store is full", name, storeFailuresMetric)
		}
		got = append(got, fmt.Sprintf("%s %g", name, v))
	}
	f.note("%s while the store is full: %s", storeFailuresMetric, strings.Join(got, ", "))
}

// checkDiskFull notes what the callers were told through the fault; the
// tally holds every answer to its promise.
func checkDiskFull(f *fleet, _ *load) {
	a := f.res.answers
	f.note("answers: queued %d, unconfirmed %d, no answer %d (sent %d, error %d)", a[answerQueued], a[answerUnconfirmed], a[answerNone], a[answerSent], a[answerError])
}
