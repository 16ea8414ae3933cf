package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/services/process"
)

const deadUsage = `Usage:
  herald dead ls [--config FILE] [--json]
  herald dead replay [--config FILE] [--wait D] [--json] ID|--all

Lists the messages Herald gave up on (a permanent error, or retries past
delivery.retry_for) with when, where from, how many tries and why; once the
cause is fixed, replay puts one (ID as ls lists it), or all of them, back on
their queue and says what became of each within --wait, as the audit log
and the dead-letter stream tell it: delivered, refused again (back in dead
ls under a new ID), or still on its way. A replay keeps the idempotency
key, so what did get out is not sent again. Exit 1 if a replayed message
failed again. --json prints one JSON object per message, one per line.

Examples:
  herald dead ls
  herald dead replay 1      # ID as dead ls lists it
  herald dead replay --all
`

// replayWait is how long herald dead replay waits for what becomes of the
// messages it put back, by default: a delivery takes a second or two.
const replayWait = 10 * time.Second

// runDead is `herald dead`: what the worker gave up on (a permanent error, or
// retries past delivery.retry_for), and replaying it once the cause is fixed.
// A replay keeps the idempotency key, so what did get out is not sent again.
func runDead(ctx context.Context, args []string, o IO) error {
	sub, fs, args := subcommandFlags("dead", deadUsage, args, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), to find NATS")
	all := fs.Bool("all", false, "replay every dead letter (replay)")
	asJSON := fs.Bool("json", false, "one JSON object per dead letter (ls) or per replayed message (replay)")
	wait := process.DurationFlag(fs, "wait", replayWait, "how long replay waits for what becomes of the messages it put back; 0 does not wait")
	timeout := timeoutFlag(fs, "then for each of its answers")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := checkSub(fs, "dead", sub, "ls", "replay"); err != nil {
		return err
	}
	switch {
	case sub == "ls" && len(pos) == 0 && !*all:
	case sub == "replay" && (len(pos) == 1) != *all:
	default:
		return badUsage(fs)
	}
	if *wait < 0 {
		return fmt.Errorf("--wait %s is negative", *wait)
	}
	js, _, closeBus, err := connectWithin(ctx, *path, *timeout, o)
	if err != nil {
		return err
	}
	defer closeBus()
	listCtx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	dead, err := bus.DeadLetters(listCtx, js)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("no dead-letter stream yet; start Herald once first")
	}
	if err != nil {
		return err
	}
	if sub == "ls" {
		if *asJSON {
			return listDeadJSON(dead, o.Stdout)
		}
		return listDead(dead, o)
	}
	picked, err := pickDead(dead, pos, *all)
	if err != nil {
		return err
	}
	r := replayer{js: js, timeout: *timeout, wait: *wait, json: *asJSON, out: o.Stdout, stderr: o.Stderr}
	return r.replay(ctx, picked)
}

// pickDead is the dead letters a replay names: the one of ID pos[0], or
// all of them.
func pickDead(dead []bus.DeadLetter, pos []string, all bool) ([]bus.DeadLetter, error) {
	if all {
		return dead, nil
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(pos[0], "#"), 10, 64)
	if err != nil || id == 0 {
		return nil, fmt.Errorf("%q is not a dead letter ID; `herald dead ls` lists them", pos[0])
	}
	i := slices.IndexFunc(dead, func(d bus.DeadLetter) bool { return d.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("no dead letter %d; `herald dead ls` lists them", id)
	}
	return dead[i : i+1], nil
}

func listDead(dead []bus.DeadLetter, o IO) error {
	if len(dead) == 0 {
		fmt.Fprintln(o.Stdout, "No dead letters.")
		return nil
	}
	w := newTable(o.Stdout, "ID\tWHEN\tFROM\tREQUEST\tTRIES\tCLASS\tWHY")
	for _, d := range dead {
		why := d.Error
		if len(why) > 120 {
			why = why[:117] + "..."
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Time.Local().Format(time.DateTime), cell(d.Subject), cell(d.RequestID), d.Tries, cell(d.Class), escapeControl(why))
	}
	return w.Flush()
}

// deadJSON is one line of herald dead ls --json.
type deadJSON struct {
	ID uint64 `json:"id"`
	// Time is when it was given up on.
	Time time.Time `json:"time"`
	// Stream is the work queue it came from; Subject, where it was first
	// published (where a replay puts it back).
	Stream    string `json:"stream,omitempty"`
	Subject   string `json:"subject"`
	RequestID string `json:"request_id,omitempty"`
	Key       string `json:"idempotency_key,omitempty"`
	Tries     int    `json:"tries"`
	Class     string `json:"class,omitempty"`
	Error     string `json:"error,omitempty"`
}

func listDeadJSON(dead []bus.DeadLetter, out io.Writer) error {
	items := make([]deadJSON, 0, len(dead))
	for _, d := range dead {
		items = append(items, deadJSON{ID: d.ID, Time: utc(d.Time), Stream: d.Stream, Subject: d.Subject, RequestID: d.RequestID,
			Key: d.Key, Tries: d.Tries, Class: d.Class, Error: d.Error})
	}
	return jsonLines(out, items)
}

// Outcomes of a replayed message, as herald dead replay --json names them.
const (
	replayDelivered = "delivered" // delivered, or edited (Kind says)
	replayRefused   = "refused_again"
	replayFailed    = "failed"
	replayRejected  = "rejected"
	replayDropped   = "dropped"
	replayHeld      = "held"
	replayRouted    = "routed" // an inbound message, routed to its butler
	replayPending   = "pending"
)

// replayJSON is what became of one replayed message: a line of herald dead
// replay --json, and what its line of text says.
type replayJSON struct {
	ID        uint64 `json:"id"`
	RequestID string `json:"request_id,omitempty"`
	Outcome   string `json:"outcome"`
	// Kind is the audit record's kind that told it (delivered, edited,
	// failed, ...), if one did.
	Kind       string `json:"kind,omitempty"`
	Butler     string `json:"butler,omitempty"`
	Channel    string `json:"channel,omitempty"`
	DeliveryID string `json:"delivery_id,omitempty"`
	Class      string `json:"class,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// DeadID is its ID in herald dead ls once it was refused again.
	DeadID uint64 `json:"dead_id,omitempty"`
	// Followed says whether its outcome was waited for: not without a
	// request id to know it by, nor with --wait 0.
	Followed bool `json:"followed"`
}

// failedAgain says whether r is a failure again (the exit code is 1).
func (r replayJSON) failedAgain() bool {
	switch r.Outcome {
	case replayRefused, replayFailed, replayRejected, replayDropped:
		return true
	}
	return false
}

// text is r as its line of herald dead replay says it; wait is how long it
// was waited for.
func (r replayJSON) text(wait time.Duration) string {
	why := func() string {
		switch {
		case r.Class != "" && r.Reason != "":
			return escapeControl(r.Class + ": " + strings.TrimPrefix(r.Reason, r.Class+": "))
		case r.Class+r.Reason != "":
			return escapeControl(r.Class + r.Reason)
		}
		return "no reason given"
	}
	var s string
	switch r.Outcome {
	case replayDelivered:
		s = r.Kind + " on " + cell(r.Channel)
		if r.DeliveryID != "" {
			s += " (delivery " + escapeControl(r.DeliveryID) + ")"
		}
	case replayRefused:
		s = fmt.Sprintf("refused again: %s; it is back in herald dead ls as %d", escapeControl(r.Reason), r.DeadID)
	case replayFailed, replayRejected, replayDropped:
		s = r.Outcome + ": " + why()
	case replayHeld:
		s = "held for quiet hours: " + why()
	case replayRouted:
		s = "routed to butler " + cell(r.Butler)
	case replayPending:
		switch {
		case !r.Followed && r.RequestID == "":
			s = "put back on its queue (it names no request, so herald log cannot follow it)"
		case !r.Followed:
			s = fmt.Sprintf("put back on its queue (herald log --request-id %s follows it)", escapeControl(r.RequestID))
		default:
			s = fmt.Sprintf("put back on its queue; no outcome within %s (herald log --request-id %s follows it)", shortDuration(wait), escapeControl(r.RequestID))
		}
	}
	return fmt.Sprintf("%d: %s", r.ID, s)
}

// replayer is herald dead replay: it puts dead letters back, then follows
// the audit log and the dead-letter stream for what becomes of them.
type replayer struct {
	js      jetstream.JetStream
	timeout time.Duration // for each answer of NATS
	wait    time.Duration // for the outcomes
	json    bool
	out     io.Writer
	stderr  io.Writer
}

// refusalGrace is how long a replayed message that failed is waited for in
// the dead-letter stream: the worker files it there once its failure is
// answered, and its new ID is what the operator needs.
const refusalGrace = time.Second

func (r *replayer) replay(ctx context.Context, dead []bus.DeadLetter) error {
	if len(dead) == 0 {
		if !r.json {
			fmt.Fprintln(r.out, "No dead letters.")
		}
		return nil
	}
	// Followed from before the first is put back, so that no outcome can
	// come before the watch.
	var w *outcomeWatch
	if r.wait > 0 {
		var err error
		if w, err = watchOutcomes(ctx, r.js, r.timeout); err != nil {
			fmt.Fprintf(r.stderr, "herald dead: replaying without following what becomes of it: %v\n", err)
		} else {
			defer w.stop()
		}
	}
	results := make([]replayJSON, 0, len(dead))
	var replayErr error
	for _, d := range dead {
		c, cancel := context.WithTimeout(ctx, r.timeout)
		err := bus.Replay(c, r.js, d.ID)
		cancel()
		if err != nil {
			replayErr = err
			break
		}
		results = append(results, replayJSON{ID: d.ID, RequestID: d.RequestID, Outcome: replayPending, Followed: w != nil && d.RequestID != ""})
	}
	if w != nil {
		w.follow(ctx, dead, results, r.wait)
	}
	if err := r.print(results); err != nil {
		return err
	}
	if replayErr != nil {
		return replayErr
	}
	n := 0
	for _, res := range results {
		if res.failedAgain() {
			n++
		}
	}
	switch {
	case n == 0:
		return nil
	case len(results) == 1:
		return errors.New("the replayed message failed again")
	}
	return fmt.Errorf("%d of the %d replayed messages failed again", n, len(results))
}

func (r *replayer) print(results []replayJSON) error {
	if r.json {
		return jsonLines(r.out, results)
	}
	for _, res := range results {
		if _, err := fmt.Fprintln(r.out, res.text(r.wait)); err != nil {
			return err
		}
	}
	return nil
}

// outcomeWatch reads what is stored in the audit log and the dead-letter
// stream from the moment it starts, through an ordered consumer of each
// (what the operator's NATS user may: herald log and herald dead ls read
// them so).
type outcomeWatch struct {
	events chan outcomeEvent
	stop   func()
}

// outcomeEvent is an audit record, or a new dead letter.
type outcomeEvent struct {
	rec  *audit.Record
	dead *bus.DeadLetter
}

func watchOutcomes(ctx context.Context, js jetstream.JetStream, timeout time.Duration) (*outcomeWatch, error) {
	w := &outcomeWatch{events: make(chan outcomeEvent, 256)}
	// quit ends the readers, also one waiting to hand over what nobody
	// reads any more.
	quit := make(chan struct{})
	stops := []func(){func() { close(quit) }}
	w.stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for _, stream := range []string{bus.StreamAudit, bus.StreamDeadLetter} {
		c, cancel := context.WithTimeout(ctx, timeout)
		cons, err := js.OrderedConsumer(c, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
		cancel()
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("reading %s: %w", stream, err)
		}
		it, err := cons.Messages()
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("reading %s: %w", stream, err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				m, err := it.Next()
				if err != nil {
					return // stopped
				}
				for _, ev := range outcomeEvents(stream, m) {
					select {
					case w.events <- ev:
					case <-quit:
						return
					case <-ctx.Done():
						return
					}
				}
			}
		}()
		stops = append(stops, func() {
			it.Stop()
			<-done
			// Ordered consumers are ephemeral; deleting ours beats leaving
			// it to the server's inactivity timer.
			if info := cons.CachedInfo(); info != nil {
				c, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
				_ = js.DeleteConsumer(c, stream, info.Name)
				cancel()
			}
		})
	}
	return w, nil
}

// outcomeEvents are the audit records of an audit message (one, or several
// written together), or the dead letter a dead-letter message is.
func outcomeEvents(stream string, m jetstream.Msg) []outcomeEvent {
	if stream == bus.StreamDeadLetter {
		meta, err := m.Metadata()
		if err != nil {
			return nil
		}
		d := bus.DeadLetter{ID: meta.Sequence.Stream, Class: m.Headers().Get(bus.HeaderErrorClass), Error: m.Headers().Get(bus.HeaderError)}
		var head struct {
			RequestContext struct {
				RequestID string `json:"request_id"`
			} `json:"request_context"`
		}
		if json.Unmarshal(m.Data(), &head) == nil {
			d.RequestID = head.RequestContext.RequestID
		}
		return []outcomeEvent{{dead: &d}}
	}
	var out []outcomeEvent
	for _, line := range audit.Lines(m.Data()) {
		var r audit.Record
		// A record that is not what it claims (audit.Forged) tells nothing.
		if json.Unmarshal(line, &r) == nil && audit.Forged(m.Subject(), r) == "" {
			out = append(out, outcomeEvent{rec: &r})
		}
	}
	return out
}

// follow waits, at most wait, for what becomes of each of results (the
// replays of dead), and records it there.
func (w *outcomeWatch) follow(ctx context.Context, dead []bus.DeadLetter, results []replayJSON, wait time.Duration) {
	streamOf := map[uint64]string{}
	for _, d := range dead {
		streamOf[d.ID] = d.Stream
	}
	end := time.Now().Add(wait)
	// settled[i]: results[i] is known; a failure is until its grace for a
	// dead letter has passed (graceEnd).
	settled := make([]bool, len(results))
	graceEnd := make([]time.Time, len(results))
	for i, r := range results {
		settled[i] = !r.Followed
	}
	for {
		next, open := end, false
		for i := range results {
			switch {
			case settled[i]:
			case !graceEnd[i].IsZero() && !time.Now().Before(graceEnd[i]):
				settled[i] = true
			default:
				open = true
				if !graceEnd[i].IsZero() && graceEnd[i].Before(next) {
					next = graceEnd[i]
				}
			}
		}
		if !open || !time.Now().Before(end) {
			return
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
			continue
		case ev := <-w.events:
			timer.Stop()
			for i := range results {
				if !settled[i] && apply(&results[i], streamOf[results[i].ID], ev) {
					switch {
					case !results[i].failedAgain() || results[i].Outcome == replayRefused:
						settled[i] = true
					case graceEnd[i].IsZero():
						graceEnd[i] = time.Now().Add(refusalGrace)
						if graceEnd[i].After(end) {
							graceEnd[i] = end
						}
					}
					break
				}
			}
		}
	}
}

// apply records in r what ev says became of it, if ev is about it; stream
// is the work queue it was replayed to.
func apply(r *replayJSON, stream string, ev outcomeEvent) bool {
	if ev.dead != nil {
		if ev.dead.RequestID != r.RequestID {
			return false
		}
		// What it is now is the dead letter, whatever a record said first.
		*r = replayJSON{ID: r.ID, RequestID: r.RequestID, Outcome: replayRefused, Class: ev.dead.Class, Reason: ev.dead.Error, DeadID: ev.dead.ID, Followed: true}
		return true
	}
	rec := ev.rec
	if rec.RequestID != r.RequestID || r.Outcome == replayRefused {
		return false
	}
	outcome := ""
	switch rec.Kind {
	case audit.Delivered, audit.Edited:
		outcome = replayDelivered
	case audit.Failed:
		outcome = replayFailed
	case audit.Rejected:
		outcome = replayRejected
	case audit.Dropped:
		outcome = replayDropped
	case audit.Held:
		outcome = replayHeld
	case audit.Routed:
		if stream != bus.StreamIngress {
			return false // a notify routed: its delivery is still to come
		}
		outcome = replayRouted
	default:
		return false // uncertain and the like: not an outcome yet
	}
	r.Outcome, r.Kind, r.Butler, r.Channel, r.DeliveryID, r.Class, r.Reason = outcome, rec.Kind, rec.Butler, rec.Channel, rec.DeliveryID, rec.Class, rec.Reason
	return true
}
