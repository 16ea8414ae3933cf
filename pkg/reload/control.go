package reload

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Subjects of `herald reload`: every process answers a check with what the
// file it runs from would change, and applies it only when asked with the
// hash every process checked.
const (
	CheckSubject = "herald.control.reload.check"
	ApplySubject = "herald.control.reload.apply"
)

// Answer is one process's answer to a check or an apply.
type Answer struct {
	// Process names it: "switchboard", "messenger", "butler garden",
	// "herald dev", and its host.
	Process string `json:"process"`
	Result
}

// applyRequest asks every process to apply the file they checked.
type applyRequest struct {
	Hash string `json:"hash"`
}

// Serve answers `herald reload` for the process named process, until the
// subscriptions are drained with the connection or stop is called.
func Serve(nc *nats.Conn, process string, w *Watcher) (stop func(), err error) {
	answer := func(m *nats.Msg, res Result) {
		b, _ := json.Marshal(Answer{Process: process, Result: res})
		_ = m.Respond(b)
	}
	check, err := nc.Subscribe(CheckSubject, func(m *nats.Msg) {
		_, res := w.Check()
		answer(m, res)
	})
	if err != nil {
		return nil, err
	}
	apply, err := nc.Subscribe(ApplySubject, func(m *nats.Msg) {
		var req applyRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Hash == "" {
			answer(m, Result{Error: "an apply with no hash"})
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), ApplyTimeout)
		defer cancel()
		answer(m, w.Reload(ctx, "herald reload", req.Hash))
	})
	if err != nil {
		_ = check.Unsubscribe()
		return nil, err
	}
	return func() { _ = check.Unsubscribe(); _ = apply.Unsubscribe() }, nil
}

// ApplyTimeout bounds how long a process takes to apply a configuration
// (a service drains its work in flight first).
const ApplyTimeout = 30 * time.Second

// Gather sends data on subject and collects the answers that arrive within
// wait (or, if expect > 0, until that many have), sorted by process.
func Gather(ctx context.Context, nc *nats.Conn, subject string, data []byte, wait time.Duration, expect int) ([]Answer, error) {
	inbox := nc.NewInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subject, inbox, data); err != nil {
		return nil, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var out []Answer
	for {
		select {
		case m := <-ch:
			var a Answer
			if err := json.Unmarshal(m.Data, &a); err != nil {
				return nil, fmt.Errorf("an answer that is not a reload answer: %w", err)
			}
			out = append(out, a)
			if expect > 0 && len(out) == expect {
				return sorted(out), nil
			}
		case <-timer.C:
			return sorted(out), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func sorted(a []Answer) []Answer {
	sort.Slice(a, func(i, j int) bool { return a[i].Process < a[j].Process })
	return a
}

// Fleet is `herald reload`: every process checks its file; if every one
// that answered within wait can take it and all read the same file, each
// is asked to apply it. It returns the checks and, if it went on, the
// applies; refused is non-nil when some process refused, naming them.
func Fleet(ctx context.Context, nc *nats.Conn, wait time.Duration) (checks, applies []Answer, err error) {
	checks, err = Gather(ctx, nc, CheckSubject, nil, wait, 0)
	if err != nil {
		return nil, nil, err
	}
	if len(checks) == 0 {
		return nil, nil, fmt.Errorf("no Herald process answered within %s", wait)
	}
	var refused []string
	first := -1
	for i, c := range checks {
		switch {
		case c.Error != "":
			refused = append(refused, c.Process+": "+c.Error)
		case first < 0:
			first = i
		case c.Hash != checks[first].Hash:
			refused = append(refused, c.Process+": reads a file other than "+checks[first].Process+"'s")
		}
	}
	if len(refused) > 0 {
		return checks, nil, &RefusedError{Processes: refused}
	}
	changes := false
	for _, c := range checks {
		changes = changes || len(c.Changes) > 0
	}
	if !changes {
		return checks, nil, nil
	}
	req, _ := json.Marshal(applyRequest{Hash: checks[first].Hash})
	applies, err = Gather(ctx, nc, ApplySubject, req, ApplyTimeout+wait, len(checks))
	if err != nil {
		return checks, nil, err
	}
	if len(applies) < len(checks) {
		refused = append(refused, fmt.Sprintf("%d of the %d processes that checked the file did not answer the apply", len(checks)-len(applies), len(checks)))
	}
	for _, a := range applies {
		if a.Error != "" {
			refused = append(refused, a.Process+": "+a.Error)
		}
	}
	if len(refused) > 0 {
		return checks, applies, &RefusedError{Processes: refused, Applying: true}
	}
	return checks, applies, nil
}

// RefusedError names the processes that refused a reload and why.
type RefusedError struct {
	Processes []string
	// Applying: they refused to apply a file every process had checked
	// (the others run on it now), not at the check.
	Applying bool
}

func (e *RefusedError) Error() string {
	if e.Applying {
		return fmt.Sprintf("applying the checked configuration failed in %d process(es), which still run on the old one: %s; the others run on the new one: fix it and run herald reload again",
			len(e.Processes), strings.Join(e.Processes, "; "))
	}
	return fmt.Sprintf("%d process(es) refused the new configuration, so none applied it: %s", len(e.Processes), strings.Join(e.Processes, "; "))
}
