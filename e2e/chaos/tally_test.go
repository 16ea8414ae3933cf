//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// result is one scenario's row of the table, and the evidence behind it.
type result struct {
	name     string
	fault    string
	notifies int // tool calls made

	delivered  int // distinct notifies at the fake
	once       int // notifies at the fake exactly once
	duplicates int // extra copies at the fake
	missing    int // neither delivered nor reported to the butler
	answers    map[string]int
	uncertain  int // answers with delivery.outcome uncertain
	retried    int // calls made again after failing at the MCP level
	failedRep  int // delivery_failed notifications matched to a notify
	uncertRep  int // delivery_uncertain notifications matched to a notify
	contradict int
	auditUnc   int // audit records of kind uncertain
	settled    string
	// killedAt is when a kill fault struck; recovery is how long after it
	// the last of the inFlight notifies in flight then was answered.
	killedAt time.Time
	recovery time.Duration
	inFlight int
	// ways are the rows of a scenario of the ways back to the model
	// (ways_test.go); nil for the notify load's.
	ways []*wayRow

	// Set from the fault's goroutines and the fake's hooks too.
	mu         sync.Mutex
	violations []string
	aborted    string
	skipped    string
}

// setSkipped records why the scenario could not run here (not a pass).
func (r *result) setSkipped(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skipped = msg
}

func (r *result) setAborted(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.aborted == "" {
		r.aborted = msg
	}
}

func (r *result) violate(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, a...))
}

// fate is what became of one notify.
type fate struct {
	copies    int // accepted by the fake
	failedRep bool
	uncertRep bool
	audited   bool // an audit record of kind uncertain names it
	audits    int  // how many do
}

// outcome matches the fake's messages, the outcome notifications and the
// audit records back to the notifies.
type outcome struct {
	fates     []fate
	unmatched []string // reports and audit records naming no notify of the run
	auditUnc  int
}

func (f *fleet) outcome(l *load, audit []map[string]any) outcome {
	o := outcome{fates: make([]fate, len(l.answers))}
	for _, c := range f.tg.Calls("sendMessage") {
		if c.OK() {
			if i := l.index(c.Params["text"]); i >= 0 {
				o.fates[i].copies++
			}
		}
	}
	byRequest, byDelivery := map[string]int{}, map[string]int{}
	for i, a := range l.answers {
		if a.requestID != "" {
			byRequest[a.requestID] = i
		}
		if a.deliveryID != "" {
			byDelivery[a.deliveryID] = i
		}
	}
	for _, r := range l.reportsSoFar() {
		i, ok := byRequest[r.requestID]
		if !ok {
			i = l.index(r.content)
			ok = i >= 0
		}
		if !ok {
			o.unmatched = append(o.unmatched, fmt.Sprintf("%s notification for request_id %q matches no notify (%s)", r.kind, r.requestID, r.reason))
			continue
		}
		switch r.kind {
		case "delivery_failed":
			o.fates[i].failedRep = true
		case "delivery_uncertain":
			o.fates[i].uncertRep = true
		}
	}
	for _, rec := range audit {
		if rec["kind"] != "uncertain" {
			continue
		}
		o.auditUnc++
		i, ok := byRequest[str(rec["request_id"])]
		if !ok {
			i, ok = byDelivery[str(rec["delivery_id"])]
		}
		if !ok {
			o.unmatched = append(o.unmatched, fmt.Sprintf("audit uncertain record (request_id %q, delivery_id %q) matches no answered notify", str(rec["request_id"]), str(rec["delivery_id"])))
			continue
		}
		o.fates[i].audited = true
		o.fates[i].audits++
	}
	return o
}

// told reports whether the butler was told notify i's fate: an error
// answer, an uncertain outcome, or a delivery_failed / delivery_uncertain
// notification.
func told(a answer, ft fate) bool {
	return a.kind == answerError || a.uncertain || ft.failedRep || ft.uncertRep
}

// toldUncertain reports whether the butler was told notify i may have gone
// out more than once, or not at all: an uncertain outcome in the answer, or
// a delivery_uncertain / delivery_failed notification.
func toldUncertain(a answer, ft fate) bool {
	return a.uncertain || ft.uncertRep || ft.failedRep
}

// promised reports whether an answer promised the notify would be
// delivered or its failure reported. An unconfirmed answer promises at
// most once (maybe never), and no answer (the MCP call failed) promises
// nothing.
func promised(a answer) bool {
	return a.kind != answerUnconfirmed && a.kind != answerNone
}

// lost reports whether notify i broke its answer's promise: never
// delivered, and its butler never told why.
func lost(a answer, ft fate) bool {
	return ft.copies == 0 && promised(a) && !told(a, ft)
}

// unsettled is how many of the notifies sent have no known fate yet.
func unsettled(l *load, o outcome) int {
	n := 0
	for i := range int(l.issued.Load()) {
		if lost(l.answers[i], o.fates[i]) {
			n++
		}
	}
	return n
}

// settle waits until every notify is delivered or reported failed, the work
// queues are empty and the fake has been quiet a moment (so late duplicates
// show); or until nothing has moved for a while; or until within. The fake
// holding a call unanswered (a slow provider) is not quiet.
func (f *fleet) settle(l *load, within time.Duration) {
	start := time.Now()
	deadline := start.Add(within)
	var lastSig string
	lastChange := time.Now()
	for {
		calls := f.tg.Calls("")
		held := 0
		for _, c := range calls {
			if c.Answered.IsZero() && !c.Pending {
				held++
			}
		}
		o := f.outcome(l, nil)
		open := unsettled(l, o)
		pending, where, known := f.workPending()
		sig := fmt.Sprintf("%d/%d/%d/%v", len(calls), l.changed.Load(), pending, known)
		if sig != lastSig {
			lastSig, lastChange = sig, time.Now()
		}
		quiet := time.Since(lastChange)
		empty := known && pending == 0
		switch {
		case open == 0 && empty && held == 0 && quiet >= 2*time.Second:
			f.res.settled = fmt.Sprintf("settled in %s", time.Since(start).Round(time.Second))
			return
		case quiet >= 20*time.Second && held == 0 && (open == 0 || empty):
			f.res.settled = fmt.Sprintf("quiet after %s: %d unsettled, %d in work queues%s", time.Since(start).Round(time.Second), open, pending, parens(where))
			return
		case time.Now().After(deadline):
			f.res.settled = fmt.Sprintf("gave up after %s: %d unsettled, %d in work queues%s", within, open, pending, parens(where))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// parens is " (s)", or nothing for an empty s.
func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// auditRecords reads every record of HERALD_AUDIT on herald.audit.<kind>.>.
func (f *fleet) auditRecords(kind string) ([]map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := f.js.OrderedConsumer(ctx, streamAudit, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"herald.audit." + kind + ".>"}})
	if err != nil {
		return nil, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for range info.NumPending {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return out, err
		}
		var rec map[string]any
		_ = json.Unmarshal(m.Data(), &rec)
		out = append(out, rec)
	}
	return out, nil
}

// tally fills the scenario's row and checks the goals every scenario shares.
func (f *fleet) tally(l *load) {
	res, sc := f.res, f.sc
	audit, err := f.auditRecords("uncertain")
	if err != nil {
		f.note("reading the audit log: %v", err)
	}
	o := f.outcome(l, audit)
	f.out = o
	res.notifies = int(l.issued.Load())
	res.answers = map[string]int{}
	res.auditUnc = o.auditUnc
	var missing, contradicted, duplicated []string
	for i := range res.notifies {
		a, ft := l.answers[i], o.fates[i]
		res.answers[a.kind]++
		if a.uncertain {
			res.uncertain++
		}
		if ft.failedRep {
			res.failedRep++
		}
		if ft.uncertRep {
			res.uncertRep++
		}
		if a.firstTry != nil {
			res.retried++
		}
		if ft.copies > 0 {
			res.delivered++
		}
		if ft.copies == 1 {
			res.once++
		}
		if ft.copies > 1 {
			res.duplicates += ft.copies - 1
			duplicated = append(duplicated, fmt.Sprintf("#%04d %d copies, answer %s%s, audited uncertain %d time(s), butler told: %v", i, ft.copies, a.kind, uncertainMark(a), ft.audits, toldUncertain(a, ft)))
		}
		if lost(a, ft) {
			missing = append(missing, fmt.Sprintf("#%04d answered %s (request_id %s), never delivered, never reported", i, a.kind, a.requestID))
		}
		switch {
		case a.kind == answerSent && !a.uncertain && ft.copies == 0:
			contradicted = append(contradicted, fmt.Sprintf("#%04d told sent (delivery_id %s) but never delivered", i, a.deliveryID))
		case a.kind == answerError && ft.copies > 0:
			contradicted = append(contradicted, fmt.Sprintf("#%04d told error (%s) but delivered %d time(s): %s", i, a.class, ft.copies, firstLine(a.text)))
		case a.kind == answerQueued && ft.copies == 0 && !told(a, ft):
			contradicted = append(contradicted, fmt.Sprintf("#%04d told queued (request_id %s) but neither delivered nor reported failed", i, a.requestID))
		case ft.failedRep && ft.copies > 0:
			contradicted = append(contradicted, fmt.Sprintf("#%04d reported delivery_failed but delivered %d time(s)", i, ft.copies))
		}
	}
	res.missing, res.contradict = len(missing), len(contradicted)
	f.noteAnswers(l)
	f.noteUnpromised(l, o)
	for _, u := range examples(o.unmatched, 5) {
		f.note("%s", u)
	}

	if len(missing) > 0 {
		res.violate("%d lost (want 0): %s", len(missing), strings.Join(examples(missing, 5), "; "))
	}
	if len(contradicted) > 0 {
		res.violate("%d contradicted answers (want 0): %s", len(contradicted), strings.Join(examples(contradicted, 5), "; "))
	}
	switch {
	case sc.messengerCrash && sc.onUncertain == "resend":
		if res.duplicates > 2 {
			res.violate("%d duplicates after a messenger kill -9 (want at most 2): %s", res.duplicates, strings.Join(examples(duplicated, 5), "; "))
		}
		var unaudited []string
		for i := range res.notifies {
			if o.fates[i].copies > 1 && !o.fates[i].audited {
				unaudited = append(unaudited, fmt.Sprintf("#%04d", i))
			}
		}
		if len(unaudited) > 0 {
			res.violate("%d duplicated notifies have no audit record of kind uncertain: %s", len(unaudited), strings.Join(examples(unaudited, 10), ", "))
		}
	case sc.uncertainDuplicates:
		// A copy beyond the first is allowed only for a send audited
		// uncertain whose butler was told: one per audit record.
		var unexplained []string
		for i := range res.notifies {
			a, ft := l.answers[i], o.fates[i]
			if ft.copies > 1 && (ft.copies-1 > ft.audits || !toldUncertain(a, ft)) {
				unexplained = append(unexplained, fmt.Sprintf("#%04d %d copies, audited uncertain %d time(s), butler told: %v (answer %s%s)", i, ft.copies, ft.audits, toldUncertain(a, ft), a.kind, uncertainMark(a)))
			}
		}
		if len(unexplained) > 0 {
			res.violate("%d duplicated notifies are not each an audited uncertain send their butler was told of: %s", len(unexplained), strings.Join(examples(unexplained, 5), "; "))
		}
	case res.duplicates > 0:
		res.violate("%d duplicates (want 0): %s", res.duplicates, strings.Join(examples(duplicated, 5), "; "))
	}
	if sc.onUncertain == "skip" {
		var untold []string
		for i := range res.notifies {
			a, ft := l.answers[i], o.fates[i]
			if ft.audited && !a.uncertain && !ft.uncertRep && !ft.failedRep {
				untold = append(untold, fmt.Sprintf("#%04d (answer %s)", i, a.kind))
			}
		}
		if len(untold) > 0 {
			res.violate("%d notifies skipped as uncertain (audited) but their butler was not told (no uncertain outcome, no delivery_uncertain/delivery_failed notification): %s", len(untold), strings.Join(examples(untold, 10), ", "))
		}
	}
}

func uncertainMark(a answer) string {
	if a.uncertain {
		return " (uncertain)"
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// noteAnswers notes every kind of answer but a plain sent, by class, with
// an example text: the evidence for what the butler was told.
func (f *fleet) noteAnswers(l *load) {
	var groups answerGroups
	for _, a := range l.answers[:l.issued.Load()] {
		if a.kind == answerSent && !a.uncertain {
			continue
		}
		groups.add(a.key(), a)
	}
	groups.note(f, "answers")
}

// key is the kind of answer a is, with its error class or "uncertain".
func (a answer) key() string {
	switch {
	case a.class != "":
		return a.kind + " (" + a.class + ")"
	case a.uncertain:
		return a.kind + " (uncertain)"
	}
	return a.kind
}

// answerGroups counts answers by key, keeping the keys in the order they
// first came and the text of the first answer of each, as an example.
type answerGroups struct {
	order  []string
	counts map[string]int
	texts  map[string]string
}

func (g *answerGroups) add(key string, a answer) {
	if _, ok := g.counts[key]; !ok {
		if g.counts == nil {
			g.counts, g.texts = map[string]int{}, map[string]string{}
		}
		g.order = append(g.order, key)
		g.texts[key] = firstLine(a.text)
	}
	g.counts[key]++
}

// note notes each group, "what KEY: N, e.g. TEXT".
func (g *answerGroups) note(f *fleet, what string) {
	for _, key := range g.order {
		f.note("%s %s: %d, e.g. %q", what, key, g.counts[key], g.texts[key])
	}
}

// noteUnpromised notes the fate of the notifies whose answer promised no
// delivery: unconfirmed (at most once) and no answer at all (nothing).
func (f *fleet) noteUnpromised(l *load, o outcome) {
	for _, kind := range []string{answerUnconfirmed, answerNone} {
		var n, never, once, more int
		for i, a := range l.answers[:l.issued.Load()] {
			if a.kind != kind {
				continue
			}
			n++
			switch c := o.fates[i].copies; {
			case c == 0:
				never++
			case c == 1:
				once++
			default:
				more++
			}
		}
		if n > 0 {
			f.note("answered %s: %d; never delivered %d, delivered once %d, more than once %d", kind, n, never, once, more)
		}
	}
}

// examples is the first n items, and how many more there are.
func examples(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(items[:n:n], fmt.Sprintf("and %d more", len(items)-n))
}

// failures are the row's violated goals, and why it aborted if it did.
func (r *result) failures() (violations []string, aborted string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.violations...), r.aborted
}

// printTable writes the markdown table of every scenario run, then each
// violated goal, for docs/reliability.md.
func printTable(w io.Writer, rows []*result, legacy bool) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| scenario | fault | notifies | once | doubles | missing | contradicted | uncertain | sent | of which uncertain | queued | unconfirmed | error | no answer | retried | failed reports | uncertain reports | goals |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
	for _, r := range rows {
		violations, aborted := r.failures()
		if r.answers == nil && (aborted != "" || r.skipped != "") {
			why := "did not run: " + firstLine(aborted)
			if r.skipped != "" {
				why = "skipped: " + firstLine(r.skipped)
			}
			fmt.Fprintf(w, "| %s | %s |%s %s |\n", r.name, r.fault, strings.Repeat(" – |", 15), why)
			continue
		}
		goals := "met"
		if n := len(violations) + boolInt(aborted != ""); n > 0 {
			goals = fmt.Sprintf("**FAILED** (%d)", n)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n",
			r.name, r.fault, r.notifies, r.once, r.duplicates, r.missing, r.contradict, r.auditUnc,
			r.answers[answerSent], r.uncertain, r.answers[answerQueued], r.answers[answerUnconfirmed], r.answers[answerError], r.answers[answerNone]+r.answers[answerOther], r.retried,
			r.failedRep, r.uncertRep, goals)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "once: notifies at Telegram exactly once; doubles: copies beyond the first; missing: answered sent or queued, never delivered, never reported; "+
		"contradicted: delivered against the answer (or the answer against the delivery); uncertain: audit records of kind uncertain (a provider call with no answer). "+
		"Answers: sent (of which with outcome uncertain), queued, unconfirmed (the bus did not confirm storing it in time: at most once), error, no answer (the MCP call failed); "+
		"retried: calls made again, same idempotency_key, after failing at the MCP level; reports: delivery_failed / delivery_uncertain notifications.")
	fmt.Fprintln(w)
	for _, r := range rows {
		if !r.killedAt.IsZero() {
			fmt.Fprintf(w, "- %s: recovery %s (the last of %d notifies in flight at the kill reached Telegram that long after it)\n", r.name, r.recovery.Round(100*time.Millisecond), r.inFlight)
		}
	}
	fmt.Fprintln(w)
	if legacy {
		fmt.Fprintln(w, "Config: CHAOS_LEGACY_CONFIG=1, so delivery.retry_for, on_uncertain, rate_limit_out and mcp_token_env were left out of herald.yaml.")
	}
	writeFailures(w, rows)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeFailures lists, under the table, what made each failing row fail.
func writeFailures(w io.Writer, rows []*result) {
	for _, r := range rows {
		violations, aborted := r.failures()
		if len(violations) == 0 && aborted == "" {
			continue
		}
		fmt.Fprintf(w, "- %s:\n", r.name)
		if aborted != "" {
			fmt.Fprintf(w, "  - aborted: %s\n", aborted)
		}
		for _, v := range violations {
			fmt.Fprintf(w, "  - %s\n", v)
		}
	}
	fmt.Fprintln(w)
}
