package e2e

import (
	"fmt"
	"strings"
	"time"
)

// The goals of performance round 2 (docs/performance.md): shares of limits
// measured in the same run, so that they mean the same on any machine. They
// are printed beside each row, never asserted.
const (
	// goalRoute: the route pipeline (b) against the raw baseline (a).
	goalRoute = 0.6
	// goalLog, goalTelegram: the closed-loop MCP rows (f) and (g) against
	// the MCP floor (o).
	goalLog, goalTelegram = 0.45, 0.35
	// goalP99: the open-loop rows' p99 (c) (d) against the floor's (n).
	goalP99 = 2.5
	// goalWrites: stored writes per MCP notify, critical path and audit.
	goalWrites = 3.5
	// goalFiles: row (r), text while 20 MB files flow, against (g).
	goalFiles = 0.8
	// goalHoldRSS: herald dev's peak resident set over row (p).
	goalHoldRSS = 80 << 20
	// composedWrites: the composed limit is the floor plus this many stored
	// writes, each at row (a)'s cost per write: what a notify cannot do
	// without (its route, its delivery, the ledger's claim and record).
	composedWrites = 4
)

// judge sets the goal column of the rows whose goals compare them with other
// rows of the run, and adds the composed limit after the floor. Each goal
// carries its own verdict. t.mu is held.
func (t *table) judge() {
	raw, floorOpen, floor := t.byKey("a"), t.byKey("n"), t.byKey("o")
	composed := 0.0
	if raw != nil && floor != nil && raw.rate > 0 && raw.writes > 0 && floor.rate > 0 {
		perWrite := 1 / (raw.rate * raw.writes) // seconds of this machine per stored write
		composed = 1 / (1/floor.rate + composedWrites*perWrite)
		if t.byKey("composed") == nil {
			t.rows = append(t.rows, row{key: "composed", unit: "notify/s", rate: composed,
				name: fmt.Sprintf("(q) composed limit: (o) plus %d stored writes at (a)'s cost per write", composedWrites),
				goal: fmt.Sprintf("(a) costs %.1f µs per stored write", perWrite*1e6)})
		}
	}
	for i := range t.rows {
		r := &t.rows[i]
		var g goals
		switch r.key {
		case "b":
			g.share("raw (a)", r.rate, raw, goalRoute)
		case "c", "d":
			g.p99(r.p99, floorOpen)
			g.writes(r.writes)
		case "f", "g":
			want := goalLog
			if r.key == "g" {
				want = goalTelegram
			}
			g.share("the floor (o)", r.rate, floor, want)
			if composed > 0 {
				g.say(fmt.Sprintf("%.2f× the composed limit (q)", r.rate/composed))
			}
			g.writes(r.writes)
		case "r":
			// Its writes include the files' chunks: no writes goal.
			g.share("(g), text alone", r.rate, t.byKey("g"), goalFiles)
		case "p":
			g.check(fmt.Sprintf("peak RSS ≤ %s: %s", mb(goalHoldRSS), mb(r.rss)), r.rss <= goalHoldRSS)
			g.writes(r.writes)
		default:
			continue
		}
		r.goal, r.met = g.text(), nil // each goal carries its own verdict
	}
}

// byKey is the row with key k, nil if it did not run.
func (t *table) byKey(k string) *row {
	for i := range t.rows {
		if t.rows[i].key == k {
			return &t.rows[i]
		}
	}
	return nil
}

// goals collects one row's goals, each with its verdict.
type goals struct {
	parts []string
}

func (g *goals) say(s string) { g.parts = append(g.parts, s) }

func (g *goals) check(s string, ok bool) {
	if ok {
		s += " met"
	} else {
		s += " MISSED"
	}
	g.say(s)
}

// share: rate is at least want times of's rate.
func (g *goals) share(name string, rate float64, of *row, want float64) {
	if of == nil || of.rate == 0 {
		g.say(fmt.Sprintf("≥ %.2g× %s: not run", want, name))
		return
	}
	g.check(fmt.Sprintf("≥ %.2g× %s: %.2f×", want, name, rate/of.rate), rate/of.rate >= want)
}

// p99: p99 at most goalP99 times the open-loop floor's (n).
func (g *goals) p99(p99 time.Duration, floor *row) {
	if floor == nil || floor.p99 == 0 {
		g.say(fmt.Sprintf("p99 ≤ %.2g× the floor's (n): not run", goalP99))
		return
	}
	f := float64(p99) / float64(floor.p99)
	g.check(fmt.Sprintf("p99 ≤ %.2g× the floor's (n): %.2f×", goalP99, f), f <= goalP99)
}

func (g *goals) writes(w float64) {
	g.check(fmt.Sprintf("writes ≤ %.2g: %.2f", goalWrites, w), w > 0 && w <= goalWrites)
}

func (g *goals) text() string { return strings.Join(g.parts, "; ") }
