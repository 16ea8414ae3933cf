// Package audit writes the audit / notification log (HERALD_AUDIT, kept 30
// days): one record for every envelope routed, rejected, delivered or failed.
// Records carry who, where and why, never message text or secrets.
package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// Kinds of records.
const (
	Routed    = "routed"
	Rejected  = "rejected"
	Delivered = "delivered"
	// Edited: a butler's edit of a message it sent was delivered.
	Edited = "edited"
	Failed = "failed"
	// Dropped: an inbound message refused on arrival or at a gate.
	Dropped = "dropped"
	// Uncertain: a delivery whose attempt died while calling the provider,
	// resent or skipped as the integration's on_uncertain says.
	Uncertain = "uncertain"
	// AutoAllowed: a permission request a butler answered itself, by a
	// standing grant (Grant).
	AutoAllowed = "auto_allowed"
	// Expired: a permission prompt nobody answered in time.
	Expired = "expired"
	// ConfigReloaded: a process took a changed herald.yaml without a
	// restart (Process, Changes).
	ConfigReloaded = "config_reloaded"
	// Held: a note held for its integration's quiet hours (Reason says
	// until when); Released: it went out in their digest (DeliveryID is
	// the digest's, Reason names its request_id).
	Held     = "held"
	Released = "released"
	// RunStarted and RunEnded: a butler started Claude Code for a
	// conversation (run:), and the run ended (Reason says why).
	RunStarted = "run_started"
	RunEnded   = "run_ended"
)

// ButlerKinds are the records a butler writes itself, on its own subject.
var ButlerKinds = []string{AutoAllowed, RunStarted, RunEnded}

// Record is one audit entry.
type Record struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Butler  string    `json:"butler,omitempty"`
	Channel string    `json:"channel,omitempty"`
	Intent  string    `json:"intent,omitempty"`
	// Recipient is the recipient a notify named ("": the channel's default,
	// or for a reply the chat it answers).
	Recipient string `json:"recipient,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Key       string `json:"idempotency_key,omitempty"`
	// CallerKey is the idempotency_key the butler gave its notify, if any
	// (Key, derived from it, is the delivery's).
	CallerKey  string `json:"caller_key,omitempty"`
	DeliveryID string `json:"delivery_id,omitempty"`
	Class      string `json:"class,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Grant is the id of an "Allow for this session" grant: the one a
	// verdict made, or the one an auto_allowed request was answered by.
	Grant string `json:"grant,omitempty"`
	// Process and Changes are a config_reloaded record's: which process
	// took the new file, and what changed (keys and ids, never values).
	Process string   `json:"process,omitempty"`
	Changes []string `json:"changes,omitempty"`
}

// Outcome is the record of a delivery's outcome as the waiting butler is
// told it: delivered (with its delivery id) or failed (with the class and
// reason). channel is the integration the notify went to.
func Outcome(butler, requestID, key, channel, intent string, resp *envelope.RouteResponse) Record {
	rec := Record{Kind: Delivered, Butler: butler, RequestID: requestID, Key: key}
	if intent == envelope.IntentEdit {
		rec.Kind = Edited
	}
	if nr := resp.Result; nr != nil && nr.NotifyResponse != nil && nr.NotifyResponse.Delivery != nil {
		rec.Channel, rec.DeliveryID = nr.NotifyResponse.Delivery.Channel, nr.NotifyResponse.Delivery.DeliveryID
	}
	if resp.Status == envelope.StatusError && resp.Error != nil {
		rec.Kind, rec.Class, rec.Reason = Failed, resp.Error.Class, resp.Error.Message
		rec.Channel = channel
	}
	return rec
}

// Linger is how long a record may wait to share a stored message with the
// records written after it, and MaxBatch how many may share one. 25 ms makes
// a stored write of about 12 records of a kind at 500 notifies a second, and
// no one reading herald log notices a record 50 ms late (performance.md).
const (
	Linger   = 25 * time.Millisecond
	MaxBatch = 256
)

// Writer publishes records. Routed and delivered records, one or two of
// every notify, are gathered: those written close together are stored as
// one message per run of one subject, one JSON record per line (Decode reads
// them), at a few a second each alone. A routed record waits at most Linger;
// a delivered one waits at least Linger and at most twice that. So a notify's
// routed record (the switchboard's) is still stored before its delivered one
// (the messenger's, written later, in another process): the second waits
// longer than the first can. Every other kind is published at once:
// refusals, failures and uncertain deliveries are never held back. Records of
// one Writer are stored in the order they were written, except that those
// published at once may pass records still gathering.
type Writer struct {
	JS  jetstream.JetStream
	Log *slog.Logger
	// Butler, for a butler's writer, puts its records on its own subject
	// (bus.ButlerAuditSubject), the only one its NATS user may publish to.
	Butler string

	mu      sync.Mutex
	pending []held // in the order written
	timer   *time.Timer
	due     time.Time // when timer fires
	// flying counts stored messages with records someone waits for
	// soon (bus.Confirms.Soon) that NATS has not answered yet; soonWaiting
	// says more such records wait for them.
	flying      int
	soonWaiting bool
}

// held is a record waiting: it may be published from ready, and must be by
// ready + Linger. confirmed, if set, is told NATS's answer (bus.Confirms);
// soon, someone waits for it to answer a caller.
type held struct {
	subject   string
	data      []byte
	ready     time.Time
	confirmed func(error)
	soon      bool
}

// Write publishes r on herald.audit.<kind>.<channel type> without waiting
// for JetStream's ack. If ctx carries a bus.Confirms (the work of a message
// a bus.Worker handles, a direct route), the record is counted there and
// the work is acknowledged only once JetStream has stored it. A publish
// that cannot start is logged here; one JetStream refuses later is logged
// by the JetStream context's async error handler (bus.Open).
func (w *Writer) Write(ctx context.Context, r Record) {
	now := time.Now()
	r.Time = now.UTC()
	var confirmed func(error)
	c := bus.ConfirmsOf(ctx)
	if c != nil {
		confirmed = c.Add()
	}
	b, err := json.Marshal(r)
	if err != nil {
		w.failed(r.Kind, r.RequestID, err)
		if confirmed != nil {
			confirmed(nil) // a record that cannot be written cannot be waited for
		}
		return
	}
	subject := bus.AuditSubject(r.Kind, channelToken(r.Channel))
	if w.Butler != "" {
		subject = bus.ButlerAuditSubject(r.Kind, w.Butler)
	}
	ready, soon := now, false
	switch r.Kind {
	case Routed:
		soon = c != nil && c.Soon
	case Delivered:
		ready = now.Add(Linger)
	default:
		w.publish(subject, b, r.Kind, r.RequestID, confirmedAll(confirmed))
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = append(w.pending, held{subject, b, ready, confirmed, soon})
	if soon {
		// Someone waits: stored at once, or, while such a message is on
		// its way, with the next one as soon as NATS answers it, so that
		// records routed meanwhile share it (a group commit).
		if w.flying == 0 {
			w.flushReadyLocked()
			return
		}
		w.soonWaiting = true
	}
	if deadline := ready.Add(Linger); w.timer == nil || deadline.Before(w.due) {
		w.armLocked(deadline)
	}
}

// armLocked sets the timer to fire at t.
func (w *Writer) armLocked(t time.Time) {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.due = t
	w.timer = time.AfterFunc(time.Until(t), w.flushReady)
}

// flushReady publishes the records that may go now, from the oldest on, and
// sets the timer for the next one due.
func (w *Writer) flushReady() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushReadyLocked()
}

func (w *Writer) flushReadyLocked() {
	w.soonWaiting = false
	now := time.Now()
	n := 0
	for n < len(w.pending) && !w.pending[n].ready.After(now) {
		n++
	}
	w.publishLocked(w.pending[:n])
	w.pending = slices.Delete(w.pending, 0, n)
	if w.timer != nil {
		w.timer.Stop() // this one, or one set while this waited for the lock
		w.timer = nil
	}
	if len(w.pending) > 0 {
		next := w.pending[0].ready
		for _, h := range w.pending[1:] {
			next = minTime(next, h.ready)
		}
		w.armLocked(next.Add(Linger))
	}
}

// Flush publishes everything waiting and waits, up to FlushWait, for NATS
// to confirm it; a service calls it before it stops, so its records are
// stored (or their loss logged) before its connection closes.
func (w *Writer) Flush() {
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.publishLocked(w.pending)
	w.pending = nil
	w.mu.Unlock()
	if w.JS == nil {
		return
	}
	select {
	case <-w.JS.PublishAsyncComplete():
	case <-time.After(FlushWait):
		w.failed("", "", fmt.Errorf("NATS confirmed no storing of %d records within %s", w.JS.PublishAsyncPending(), FlushWait))
	}
}

// FlushWait bounds Flush's wait for NATS to confirm the records.
const FlushWait = 5 * time.Second

// publishLocked stores hs in order: each run of one subject as one message
// (MaxBatch records at most), under the lock so that two flushes cannot
// interleave.
func (w *Writer) publishLocked(hs []held) {
	for len(hs) > 0 {
		n := 1
		for n < len(hs) && n < MaxBatch && hs[n].subject == hs[0].subject {
			n++
		}
		data := hs[0].data
		if n > 1 {
			size := n - 1
			for _, h := range hs[:n] {
				size += len(h.data)
			}
			data = make([]byte, 0, size)
			for i, h := range hs[:n] {
				if i > 0 {
					data = append(data, '\n')
				}
				data = append(data, h.data...)
			}
		}
		var confirmed []func(error)
		soon := false
		for _, h := range hs[:n] {
			if h.confirmed != nil {
				confirmed = append(confirmed, h.confirmed)
			}
			soon = soon || h.soon
		}
		if soon {
			w.flying++
			confirmed = append(confirmed, w.landed)
		}
		w.publish(hs[0].subject, data, "", "", confirmed)
		hs = hs[n:]
	}
}

// landed is told NATS's answer to a message with records someone waits for
// soon: the records that gathered meanwhile go now.
func (w *Writer) landed(error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flying--
	if w.flying == 0 && w.soonWaiting {
		w.flushReadyLocked()
	}
}

// confirmedAll is f as a list (none if nil).
func confirmedAll(f func(error)) []func(error) {
	if f == nil {
		return nil
	}
	return []func(error){f}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// publish stores data, telling confirmed (records someone waits for) what
// NATS answers: one goroutine per stored message that has any.
func (w *Writer) publish(subject string, data []byte, kind, requestID string, confirmed []func(error)) {
	f, err := w.JS.PublishAsync(subject, data)
	if err != nil {
		w.failed(kind, requestID, err)
		go func() { // not under the caller's lock: landed takes it
			for _, c := range confirmed {
				c(err)
			}
		}()
		return
	}
	if len(confirmed) == 0 {
		return
	}
	go func() {
		var err error
		select {
		case <-f.Ok():
		case err = <-f.Err():
		}
		for _, c := range confirmed {
			c(err)
		}
	}()
}

func (w *Writer) failed(kind, requestID string, err error) {
	log := w.Log
	if log == nil {
		log = slog.Default()
	}
	log.Error("audit write failed", "kind", kind, "request_id", requestID, "err", err)
}

// Decode reads the records of one stored audit message: one, or several
// written together (one per line).
func Decode(data []byte) ([]Record, error) {
	var out []Record
	for _, line := range Lines(data) {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Lines are the records of one stored audit message, each as its JSON.
func Lines(data []byte) [][]byte {
	var out [][]byte
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) > 0 {
			out = append(out, line)
		}
	}
	return out
}

// channelToken is the channel's type, safe as one subject token.
// Forged says why record r, stored on subject, is not what it claims, or
// "" if the subject and the record agree. Only the services may publish on
// herald.audit.<kind>.<channel type>, and a butler only on its own
// herald.audit.auto_allowed.butler.<name> (natsauth): a record there that
// names another kind, another butler or another channel was written by
// someone who may publish there and lies in its body.
func Forged(subject string, r Record) string {
	tokens := strings.Split(subject, ".")
	if len(tokens) < 4 || tokens[0] != "herald" || tokens[1] != "audit" {
		return "stored on " + subject + ", not an audit subject"
	}
	kind, rest := tokens[2], tokens[3:]
	var why []string
	switch {
	case len(rest) == 2 && rest[0] == bus.AuditButlerToken:
		if r.Butler != rest[1] {
			why = append(why, "written by butler "+rest[1]+" but names butler "+r.Butler)
		}
		if !slices.Contains(ButlerKinds, kind) {
			why = append(why, "a butler writes only "+strings.Join(ButlerKinds, ", ")+" records")
		}
	case len(rest) != 1:
		return "stored on " + subject + ", not an audit subject"
	case rest[0] != channelToken(r.Channel):
		why = append(why, "stored for channel "+rest[0]+" but names "+r.Channel)
	}
	if r.Kind != kind {
		why = append(why, "stored as "+kind+" but says "+r.Kind)
	}
	return strings.Join(why, "; ")
}

func channelToken(ch string) string {
	typ, _, _ := strings.Cut(ch, ":")
	if typ == "" || strings.ContainsAny(typ, ".*> \t") {
		return "unknown"
	}
	return typ
}
