//go:build chaos

package chaos

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
)

// The scenarios of the ways back to the model (issue 38): inbound messages
// (inbound_test.go) and taps on "Got it" (taps_test.go). They drive their own
// load instead of the notify burst (scenario.drive) and print a table of their
// own: one row per stretch of the load, each with its counts, its recovery and
// its slowest message, and the goal of 5 s met or missed. A row fails on a
// message lost or doubled, never on a timing.

// recoveryGoal is issue 38's: every way recovers within 5 s of a kill.
const recoveryGoal = 5 * time.Second

// secs is a duration as the scenarios print it: "4.3 s".
func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// wayRow is one row of the ways' table.
type wayRow struct {
	scenario, fault string
	// sent messages (or taps); once, doubles and lost count their copies
	// at the model.
	sent, once, doubles, lost int
	// slowest is the longest from a send (a tap) to the model; recovery the
	// longest time with nothing arriving after the stretch's kill (for
	// taps: from a kill to the model told of the tap the killed process
	// held). struck: the stretch has a kill.
	slowest, recovery time.Duration
	struck            bool
	// also is what else the row counts (escalations, held taps).
	also       string
	violations []string
}

// violate records a goal the row missed, on the scenario too.
func (r *wayRow) violate(f *fleet, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.violations = append(r.violations, msg)
	if r.scenario != f.sc.name {
		msg = r.scenario + ": " + msg
	}
	f.res.violate("%s", msg)
}

// goal is the 5 s goal, met or missed: recovery and slowest after a kill,
// slowest without one.
func (r *wayRow) goal() string {
	if r.sent == 0 {
		return "–"
	}
	if r.slowest <= recoveryGoal && (!r.struck || r.recovery <= recoveryGoal) {
		return "met"
	}
	return "missed"
}

// recoveryNote is ", recovery X (goal ≤ 5 s: met)" for a stretch with a
// kill, and the goal on slowest alone otherwise.
func (r *wayRow) recoveryNote() string {
	if !r.struck {
		return fmt.Sprintf(" (goal ≤ %s: %s)", secs(recoveryGoal), r.goal())
	}
	return fmt.Sprintf(", recovery %s (goal ≤ %s: %s)", secs(r.recovery), secs(recoveryGoal), r.goal())
}

// withInbound adds to herald.yaml what the ways need: Telegram inbound
// for person (allow_from), and with escalation a second Telegram bot,
// tg_esc, that tg_main's notes escalate to (its token in a file: the
// services' environment is the fleet's). It returns tg_esc's token.
func (f *fleet) withInbound(escalation bool) (escToken string) {
	var b strings.Builder
	// writeConfig's last lines are tg_main's keys.
	fmt.Fprintf(&b, "    inbound: { allow_from: [%q] }\n", fmt.Sprint(person.ID))
	if escalation {
		escToken = "7000001:" + rand.Text()
		f.tg.AddBot(escToken)
		tokenFile := filepath.Join(f.dir, "tg_esc.token")
		if err := os.WriteFile(tokenFile, []byte(escToken), 0o600); err != nil {
			f.fatalf("%v", err)
		}
		b.WriteString("    escalate_to: [tg_esc]\n")
		fmt.Fprintf(&b, "  - id: tg_esc\n    type: telegram\n    token_file: %q\n    default_chat: %q\n    grants: all\n", tokenFile, escalationChat)
		b.WriteString("    rate_limit_out: { per_chat: 30/s, per_bot: 30/s }\n")
	}
	cfg, err := os.OpenFile(f.cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		f.fatalf("%v", err)
	}
	defer cfg.Close()
	if _, err := io.WriteString(cfg, b.String()); err != nil {
		f.fatalf("%v", err)
	}
	return escToken
}

// escalationChat is tg_esc's default chat: where escalations go.
const escalationChat = "67890"

// noteAckWaits notes the ack wait of the consumers on the ways back, as
// herald setup of the binaries under test made them: how soon what a
// killed process held comes back (30 s before issue 38, 4 s since).
func (f *fleet) noteAckWaits() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	for _, c := range []struct{ stream, durable string }{
		{bus.StreamIngress, bus.ConsumerIngress},
		{bus.StreamInbox, bus.ConsumerInbox(butlerName)},
		{bus.StreamRoute, bus.ConsumerSwitchboard},
		{bus.StreamDeliver, bus.ConsumerMessenger},
	} {
		cons, err := f.js.Consumer(ctx, c.stream, c.durable)
		if err != nil {
			got = append(got, fmt.Sprintf("%s: %v", c.durable, err))
			continue
		}
		cfg := cons.CachedInfo().Config
		got = append(got, fmt.Sprintf("%s %s (max ack pending %d)", c.durable, cfg.AckWait, cfg.MaxAckPending))
	}
	f.note("ack wait of the consumers: %s", strings.Join(got, ", "))
}

// connectModel connects the model to the butler (its client's warnings in
// logs/model.log); it is closed when the scenario ends.
func (f *fleet) connectModel() *model {
	logTo, err := os.Create(filepath.Join(f.dir, "logs", "model.log"))
	if err != nil {
		f.fatalf("%v", err)
	}
	f.t.Cleanup(func() { _ = logTo.Close() })
	m, err := connectModel(f.mcp, f.mcpToken, logTo)
	if err != nil {
		f.fatalf("the model's MCP session: %v", err)
	}
	f.t.Cleanup(m.close)
	// Its GET stream opens just after initialize; what comes before waits
	// in the inbox and would only add to the first figures.
	time.Sleep(500 * time.Millisecond)
	return m
}

// noteWays fails the scenario on each goal a row missed.
func (f *fleet) noteWays() {
	violations, _ := f.res.failures()
	for _, v := range violations {
		f.t.Errorf("GOAL NOT MET: %s", v)
	}
}

// notifyRows are the rows of the notify load's table (printTable).
func notifyRows(rows []*result) []*result {
	var out []*result
	for _, r := range rows {
		if r.ways == nil {
			out = append(out, r)
		}
	}
	return out
}

// printWays writes the table of the ways' scenarios, then each missed
// goal, for docs/reliability.md.
func printWays(w io.Writer, rows []*result) {
	var ways []*result
	for _, r := range rows {
		if r.ways != nil {
			ways = append(ways, r)
		}
	}
	if len(ways) == 0 {
		return
	}
	fmt.Fprintln(w, "| scenario | fault | sent | once | doubles | lost | recovery | slowest | goal ≤ 5 s | also | goals |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|---|---|---|")
	for _, r := range ways {
		_, aborted := r.failures()
		if len(r.ways) == 0 {
			why := "did not run: " + firstLine(aborted)
			if r.skipped != "" {
				why = "skipped: " + firstLine(r.skipped)
			}
			fmt.Fprintf(w, "| %s | %s |%s %s |\n", r.name, r.fault, strings.Repeat(" – |", 8), why)
			continue
		}
		for _, row := range r.ways {
			recovery := "–"
			if row.struck {
				recovery = secs(row.recovery)
			}
			goals := "met"
			if n := len(row.violations); n > 0 {
				goals = fmt.Sprintf("**FAILED** (%d)", n)
			}
			fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %s | %s | %s | %s | %s |\n",
				row.scenario, row.fault, row.sent, row.once, row.doubles, row.lost, recovery, secs(row.slowest), row.goal(), row.also, goals)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "sent: messages (taps) of the stretch; once, doubles, lost: their copies at the model (a channel notification; for a tap, the model told `acknowledged`); "+
		"recovery: the longest time with nothing reaching the model after the kill (taps: from a kill to the model told of the tap the killed switchboard held); "+
		"slowest: the longest from a send (a tap) to the model. A row fails on a message lost or doubled (or a tapped note escalated), never on a timing.")
	fmt.Fprintln(w)
	writeFailures(w, ways)
}

// killTrigger kills a process the moment the next message it is about to
// take (or has just published) is on the bus: armKill subscribes to the
// subject with core NATS, which sees every message the stream stores as it
// is stored, and the process on the way takes that message at the same
// moment, so it dies holding it.
type killTrigger struct {
	p     *proc
	sub   *nats.Subscription
	once  sync.Once
	fired chan struct{}
	at    time.Time
	err   error
	seen  bool // killed by a message, not by wait's timeout
}

// armKill arms a kill of p on the next message on subject for which match
// (nil: any) is true.
func (f *fleet) armKill(p *proc, subject string, match func([]byte) bool) (*killTrigger, error) {
	k := &killTrigger{p: p, fired: make(chan struct{})}
	sub, err := f.nc.Subscribe(subject, func(m *nats.Msg) {
		if match == nil || match(m.Data) {
			k.kill(true)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", subject, err)
	}
	k.sub = sub
	return k, nil
}

func (k *killTrigger) kill(seen bool) {
	k.once.Do(func() {
		k.err, k.at, k.seen = k.p.kill9(), time.Now(), seen
		close(k.fired)
	})
}

// wait waits up to within for the kill, and kills p then if no message
// came; it returns when p died and whether a message triggered it.
func (k *killTrigger) wait(within time.Duration) (at time.Time, seen bool, err error) {
	select {
	case <-k.fired:
	case <-time.After(within):
		k.kill(false)
		<-k.fired
	}
	_ = k.sub.Unsubscribe()
	if k.err != nil {
		return k.at, k.seen, errors.Join(errors.New("kill -9 "+k.p.name), k.err)
	}
	return k.at, k.seen, nil
}
