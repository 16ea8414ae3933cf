package reload

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Report is what `herald reload` heard and did.
type Report struct {
	// Checks are the answers to the check, forged ones too.
	Checks []Answer
	// Asked: the processes that could take the file were asked to apply
	// it; Applies are their answers (and forged ones).
	Asked   bool
	Applies []Answer
	// Lost are the processes asked to apply it that fell silent instead,
	// with what runs in their place afterwards.
	Lost []Lost
	// Hash is the file the fleet checked, "" if none could take it.
	Hash string
}

// Lost is a process that stopped answering while it was to apply the file
// (killed, or cut off from NATS): it beats while it applies, and said
// nothing for Silence. Now is what `herald reload` found afterwards.
type Lost struct {
	Process  string
	Identity Identity
	// Applying: it had said it was applying; else it never said a word.
	Applying bool
	// Silent is how long it had been silent when it was given up.
	Silent time.Duration
	// Now answered a check in its place within ComebackWait: itself again,
	// or a process of its connection name started since; nil if none did.
	Now *Answer
	// RunsNew: Now runs the file the fleet applied (it checked that file,
	// and it would change nothing).
	RunsNew bool
}

// What says what became of l, in words for the operator.
func (l Lost) What() string {
	was := fmt.Sprintf("stopped answering while it applied the file (nothing for %s)", l.Silent.Round(100*time.Millisecond))
	if !l.Applying {
		was = fmt.Sprintf("never said it was applying the file (nothing for %s)", l.Silent.Round(100*time.Millisecond))
	}
	now := l.Now
	switch {
	case now == nil:
		return fmt.Sprintf("%s; no %s has answered since (%s): none runs in its place, and one started again reads the file as it is then",
			was, l.Identity.Kind(), ComebackWait)
	case now.Process == l.Process:
		return was + "; it answers again and " + l.runs()
	default:
		return was + "; " + now.Process + " has started since and " + l.runs()
	}
}

func (l Lost) runs() string {
	switch {
	case l.RunsNew:
		return "runs the new file"
	case l.Now.Error != "":
		return "refuses the file: " + l.Now.Error
	case l.Now.Hash != "" && len(l.Now.Changes) == 0:
		return "runs another version of the file (it changed since the check): run herald reload again"
	default:
		return "runs another configuration (the file would change: " + strings.Join(l.Now.Changes, "; ") + "): run herald reload again"
	}
}

// Fleet is `herald reload`: every process checks its file; if the services
// that answered within wait can take it and all read the same file, each
// process that can is asked to apply it. A service's refusal stops the
// reload for every process; a butler's holds back only that butler, so a
// hostile butler cannot keep a file from the fleet (one that revokes its
// grants, say). Without a service answering, the butlers that did are the
// fleet. The error is a *RefusedError when some process refused.
func Fleet(ctx context.Context, nc *nats.Conn, wait time.Duration) (Report, error) {
	var rep Report
	checks, err := gather(ctx, nc, CheckSubject, request{}, wait, nil)
	rep.Checks = checks
	if err != nil {
		return rep, err
	}
	p := planOf(checks)
	if p.counted == 0 {
		return rep, noAnswer(wait, len(checks))
	}
	if len(p.stop) > 0 {
		return rep, &RefusedError{Processes: append(p.stop, p.held...)}
	}
	rep.Hash = p.hash
	if !p.changes {
		if len(p.held) > 0 {
			return rep, &RefusedError{Processes: p.held, Applying: true}
		}
		return rep, nil
	}
	rep.Asked = true
	applies, lost, err := p.apply(ctx, nc, wait)
	if err != nil {
		return rep, err
	}
	// A held-back butler's answer to the apply says again what its check
	// said; the other answers are the outcome.
	rep.Applies = slices.DeleteFunc(applies, func(a Answer) bool { return a.Forged == "" && p.expect[a.Process] == 0 })
	rep.Lost = lost
	var gone []string
	for _, l := range lost {
		if !l.RunsNew {
			gone = append(gone, l.Process+": "+l.What())
		}
	}
	if refused := append(p.held, p.missing(rep.Applies, lost)...); len(refused)+len(gone) > 0 {
		return rep, &RefusedError{Processes: refused, Lost: gone, Applying: true}
	}
	return rep, nil
}

// apply asks the processes p expects to apply p.hash, and collects their
// answers until each has answered, or, if it beats, has been silent for
// Silence (it is lost), or ApplyTimeout and wait have passed (a process
// older than beats, which then did not answer). For the lost it then looks
// for what runs in their place (comeback).
func (p plan) apply(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]Answer, []Lost, error) {
	c, err := collect(nc, ApplySubject, request{Hash: p.hash, Beat: true})
	if err != nil {
		return nil, nil, err
	}
	defer c.stop()
	start := time.Now()
	deadline := start.Add(ApplyTimeout + wait)
	tick := time.NewTicker(Silence / 10)
	defer tick.Stop()
	var lost []Lost
	for {
		got, beats := c.snapshot()
		answered := p.answered(got)
		now := time.Now()
		lost = lost[:0]
		pending := false
		for name, n := range p.expect {
			if answered[name] >= n {
				continue
			}
			last, said := beats[name]
			if !said {
				last = start
			}
			if p.beats[name] && now.Sub(last) >= Silence {
				lost = append(lost, Lost{Process: name, Identity: p.ids[name], Applying: said, Silent: now.Sub(last)})
				continue
			}
			pending = true
		}
		if !pending || now.After(deadline) {
			break
		}
		select {
		case <-c.more:
		case <-tick.C:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].Process < lost[j].Process })
	if len(lost) > 0 {
		if lost, err = p.comeback(ctx, nc, lost, c); err != nil {
			return nil, nil, err
		}
	}
	got, _ := c.snapshot()
	return got, lost, nil
}

// answered counts the answers of each expected process among applies.
func (p plan) answered(applies []Answer) map[string]int {
	n := map[string]int{}
	for _, a := range applies {
		if a.Forged == "" && p.expect[a.Process] > 0 {
			n[a.Process]++
		}
	}
	return n
}

// comeback checks, every second for ComebackWait, what answers in place of
// each lost process: itself (it was slow, or cut off, and is back), or a
// process of its connection name that the first check did not hear (one
// started since, on the file as it is now). A lost process whose answer
// to the apply comes meanwhile was only late, and is lost no more.
func (p plan) comeback(ctx context.Context, nc *nats.Conn, lost []Lost, apply *collector) ([]Lost, error) {
	until := time.Now().Add(ComebackWait)
	for {
		got, _ := apply.snapshot()
		answered := p.answered(got)
		lost = slices.DeleteFunc(lost, func(l Lost) bool { return answered[l.Process] > 0 })
		round := min(time.Second, time.Until(until))
		if !slices.ContainsFunc(lost, func(l Lost) bool { return l.Now == nil }) || round <= 0 {
			return lost, nil
		}
		checks, err := gather(ctx, nc, CheckSubject, request{}, round, func(checks []Answer) bool {
			return !slices.ContainsFunc(p.place(slices.Clone(lost), checks), func(l Lost) bool { return l.Now == nil })
		})
		if err != nil {
			return nil, err
		}
		lost = p.place(lost, checks)
	}
}

// place finds, in checks, what answers in place of each lost process not
// placed yet: itself, else one of its connection name the first check did
// not hear and no other lost one took, of its host if there is one.
func (p plan) place(lost []Lost, checks []Answer) []Lost {
	taken := map[string]bool{}
	for _, l := range lost {
		if l.Now != nil {
			taken[l.Now.Process] = true
		}
	}
	for i := range lost {
		l := &lost[i]
		if l.Now != nil {
			continue
		}
		var pick *Answer
		for j := range checks {
			c := &checks[j]
			if c.Forged != "" || c.Identity.Conn != l.Identity.Conn {
				continue
			}
			if c.Process == l.Process {
				pick = c
				break
			}
			if p.heard[c.Process] || taken[c.Process] {
				continue
			}
			if pick == nil || c.Identity.Host() == l.Identity.Host() && pick.Identity.Host() != l.Identity.Host() {
				pick = c
			}
		}
		if pick != nil {
			now := *pick
			l.Now = &now
			l.RunsNew = now.Error == "" && len(now.Changes) == 0 && now.Hash == p.hash
			taken[now.Process] = true
		}
	}
	return lost
}

func noAnswer(wait time.Duration, forged int) error {
	msg := fmt.Sprintf("no Herald process answered within %s", wait)
	if forged > 0 {
		msg += fmt.Sprintf(" (%d answer(s) did not prove who sent them)", forged)
	}
	// A process older than this herald answers on a reply subject, which
	// any user allowed to answer could answer on too: it is not read.
	return fmt.Errorf("%s; processes older than this herald answer where it no longer listens: update them, and run herald nats-auth again", msg)
}

// plan is what the checks decide.
type plan struct {
	hash, ref string // the file to apply, and whose hash it is
	// expect are the processes to apply it: how many of each name checked.
	expect map[string]int
	// beats: the process of that name beats while it applies; ids are
	// who each is; heard are the names that answered the check.
	beats   map[string]bool
	ids     map[string]Identity
	heard   map[string]bool
	stop    []string // refusals that stop the reload for every process
	held    []string // butlers that refused for themselves only
	changes bool
	counted int
}

// planOf decides on checks; a check refused for reading another file
// than the others gets that as its Error.
func planOf(checks []Answer) plan {
	p := plan{expect: map[string]int{}, beats: map[string]bool{}, ids: map[string]Identity{}, heard: map[string]bool{}}
	services := slices.ContainsFunc(checks, func(a Answer) bool { return a.Forged == "" && a.Identity.Butler() == "" })
	decides := func(a Answer) bool { return !services || a.Identity.Butler() == "" }
	// Those who decide first, so the file to apply is theirs.
	for _, deciding := range []bool{true, false} {
		for i := range checks {
			c := &checks[i]
			if c.Forged != "" || decides(*c) != deciding {
				continue
			}
			p.counted++
			p.heard[c.Process] = true
			switch {
			case c.Error != "":
			case p.hash == "":
				p.hash, p.ref = c.Hash, c.Process
			case c.Hash != p.hash:
				c.Error = "reads a file other than " + p.ref + "'s"
			}
			why := c.Error
			switch {
			case why == "":
				p.expect[c.Process]++
				// Two old processes of one name (their host's) beat not.
				p.beats[c.Process] = c.Beats && p.expect[c.Process] == 1
				p.ids[c.Process] = c.Identity
				p.changes = p.changes || len(c.Changes) > 0
			case deciding:
				p.stop = append(p.stop, c.Process+": "+why)
			default:
				p.held = append(p.held, c.Process+": "+why)
			}
		}
	}
	return p
}

// missing are the refusals among applies, and the expected processes that
// did not answer and are not lost (which say what became of them).
func (p plan) missing(applies []Answer, lost []Lost) []string {
	var out []string
	got := map[string]int{}
	for _, a := range applies {
		if a.Forged != "" || p.expect[a.Process] == 0 {
			continue
		}
		got[a.Process]++
		if a.Error != "" {
			out = append(out, a.Process+": "+a.Error)
		}
	}
	for name, n := range p.expect {
		if got[name] < n && !slices.ContainsFunc(lost, func(l Lost) bool { return l.Process == name }) {
			out = append(out, name+": did not answer the apply")
		}
	}
	sort.Strings(out)
	return out
}

// maxPerConn bounds the answers kept from one connection name: no fleet
// runs that many replicas of a process, and a flood under one name (a
// hostile butler's) then pushes out only its own answers. maxReadPerConn
// bounds the messages read from one, beats included: 64 replicas beat
// about 35 times each in the longest apply.
const (
	maxPerConn     = 64
	maxReadPerConn = 64 * maxPerConn
)

// gather publishes req with a nonce of its own on subject and collects the
// answers within wait, or until done says it has them all; sorted by
// process. Each answer is named by its subject (readAnswer).
func gather(ctx context.Context, nc *nats.Conn, subject string, req request, wait time.Duration, done func([]Answer) bool) ([]Answer, error) {
	c, err := collect(nc, subject, req)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if got, _ := c.snapshot(); done != nil && done(got) {
			return got, nil
		}
		select {
		case <-c.more:
		case <-timer.C:
			got, _ := c.snapshot()
			return got, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// collector gathers the answers to one request, and the beats of those
// applying it, until stopped.
type collector struct {
	sub  *nats.Subscription
	more chan struct{} // something came

	mu    sync.Mutex
	out   []Answer
	beats map[string]time.Time // the last beat of each process
	// Of each connection name: the messages read, the answers kept, the
	// beating processes kept.
	read, kept, beating map[string]int
}

// collect publishes req with a nonce of its own on subject and collects
// what answers it.
func collect(nc *nats.Conn, subject string, req request) (*collector, error) {
	req.Nonce = newNonce()
	c := &collector{more: make(chan struct{}, 1), beats: map[string]time.Time{},
		read: map[string]int{}, kept: map[string]int{}, beating: map[string]int{}}
	sub, err := nc.Subscribe(answerRoot+"."+req.Nonce+".>", func(m *nats.Msg) {
		id, ok := identityOf(m.Subject, req.Nonce)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.read[id.Conn]++; c.read[id.Conn] > maxReadPerConn {
			return // counted before it is read, so a flood costs little
		}
		a := readAnswer(m, id, ok, req.Nonce)
		if a.Forged == "" && a.State == Applying {
			if _, known := c.beats[a.Process]; known || keep(c.beating, id.Conn) {
				c.beats[a.Process] = time.Now()
			}
		} else if keep(c.kept, id.Conn) {
			c.out = append(c.out, a)
		}
		select {
		case c.more <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(req)
	if err := nc.Publish(subject, body); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	c.sub = sub
	return c, nil
}

// keep counts one more of conn in counts: false past maxPerConn.
func keep(counts map[string]int, conn string) bool {
	counts[conn]++
	return counts[conn] <= maxPerConn
}

// snapshot is what came so far: the answers, sorted by process, and when
// each beating process beat last.
func (c *collector) snapshot() ([]Answer, map[string]time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return sorted(slices.Clone(c.out)), maps.Clone(c.beats)
}

func (c *collector) stop() { _ = c.sub.Unsubscribe() }

// readAnswer is the answer m carries, named by the identity its subject
// proves; a body that says another name, or is no answer, is forged.
func readAnswer(m *nats.Msg, id Identity, ok bool, nonce string) Answer {
	if !ok {
		return Answer{Process: strings.TrimPrefix(m.Subject, answerRoot+"."+nonce+"."), Forged: "its subject names no Herald process"}
	}
	var a Answer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return Answer{Process: id.Name(), Identity: id, Forged: "not a reload answer"}
	}
	claimed := a.Process
	a.Process, a.Identity = id.Name(), id
	if claimed != a.Process {
		// What a forged answer says is not kept, so nothing can count it.
		return Answer{Process: a.Process, Identity: id, Forged: "it says it is " + claimed}
	}
	return a
}

func sorted(a []Answer) []Answer {
	sort.SliceStable(a, func(i, j int) bool { return a[i].Process < a[j].Process })
	return a
}

// RefusedError names the processes that refused a reload and why.
type RefusedError struct {
	Processes []string
	// Lost are the processes that stopped answering while they applied it,
	// with what became of them (Lost.What), but those now replaced by one
	// running the new file.
	Lost []string
	// Applying: the others run on the new configuration now; those named
	// in Processes still run on the old one (they refused to apply it, or
	// are butlers that refused it for themselves).
	Applying bool
}

func (e *RefusedError) Error() string {
	if e.Applying {
		var parts []string
		if len(e.Processes) > 0 {
			parts = append(parts, fmt.Sprintf("%d process(es) still run on the old configuration: %s", len(e.Processes), strings.Join(e.Processes, "; ")))
		}
		if len(e.Lost) > 0 {
			parts = append(parts, fmt.Sprintf("%d process(es) stopped answering mid-apply: %s", len(e.Lost), strings.Join(e.Lost, "; ")))
		}
		return strings.Join(parts, "; ") + "; the others run on the new one: fix it and run herald reload again"
	}
	return fmt.Sprintf("%d process(es) refused the new configuration, so none applied it: %s", len(e.Processes), strings.Join(e.Processes, "; "))
}
