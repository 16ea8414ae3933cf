package reload

import (
	"context"
	"encoding/json"
	"fmt"
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
	// Hash is the file the fleet checked, "" if none could take it.
	Hash string
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
	applies, err := gather(ctx, nc, ApplySubject, request{Hash: p.hash}, ApplyTimeout+wait, p.complete)
	if err != nil {
		return rep, err
	}
	// A held-back butler's answer to the apply says again what its check
	// said; the other answers are the outcome.
	rep.Applies = slices.DeleteFunc(applies, func(a Answer) bool { return a.Forged == "" && p.expect[a.Process] == 0 })
	if refused := append(p.held, p.missing(rep.Applies)...); len(refused) > 0 {
		return rep, &RefusedError{Processes: refused, Applying: true}
	}
	return rep, nil
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
	expect  map[string]int
	stop    []string // refusals that stop the reload for every process
	held    []string // butlers that refused for themselves only
	changes bool
	counted int
}

// planOf decides on checks; a check refused for reading another file
// than the others gets that as its Error.
func planOf(checks []Answer) plan {
	p := plan{expect: map[string]int{}}
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

// complete: every process expected to apply has answered.
func (p plan) complete(applies []Answer) bool { return len(p.missing(applies)) == 0 }

// missing are the refusals among applies, and the expected processes that
// did not answer.
func (p plan) missing(applies []Answer) []string {
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
		if got[name] < n {
			out = append(out, name+": did not answer the apply")
		}
	}
	sort.Strings(out)
	return out
}

// maxPerConn bounds the answers kept from one connection name: no fleet
// runs that many replicas of a process, and a flood under one name (a
// hostile butler's) then pushes out only its own answers.
const maxPerConn = 64

// gather publishes req with a nonce of its own on subject and collects the
// answers within wait, or until done says it has them all; sorted by
// process. Each answer is named by its subject (readAnswer).
func gather(ctx context.Context, nc *nats.Conn, subject string, req request, wait time.Duration, done func([]Answer) bool) ([]Answer, error) {
	req.Nonce = newNonce()
	var (
		mu   sync.Mutex
		out  []Answer
		per  = map[string]int{}
		more = make(chan struct{}, 1)
	)
	sub, err := nc.Subscribe(answerRoot+"."+req.Nonce+".>", func(m *nats.Msg) {
		id, ok := identityOf(m.Subject, req.Nonce)
		mu.Lock()
		defer mu.Unlock()
		if per[id.Conn]++; per[id.Conn] > maxPerConn {
			return // counted before it is read, so a flood costs little
		}
		out = append(out, readAnswer(m, id, ok, req.Nonce))
		select {
		case more <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	body, _ := json.Marshal(req)
	if err := nc.Publish(subject, body); err != nil {
		return nil, err
	}
	snapshot := func() []Answer { mu.Lock(); defer mu.Unlock(); return sorted(slices.Clone(out)) }
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if got := snapshot(); done != nil && done(got) {
			return got, nil
		}
		select {
		case <-more:
		case <-timer.C:
			return snapshot(), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

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
	// Applying: the others run on the new configuration now; those named
	// still run on the old one (they refused to apply it, or are butlers
	// that refused it for themselves).
	Applying bool
}

func (e *RefusedError) Error() string {
	if e.Applying {
		return fmt.Sprintf("%d process(es) still run on the old configuration: %s; the others run on the new one: fix it and run herald reload again",
			len(e.Processes), strings.Join(e.Processes, "; "))
	}
	return fmt.Sprintf("%d process(es) refused the new configuration, so none applied it: %s", len(e.Processes), strings.Join(e.Processes, "; "))
}
