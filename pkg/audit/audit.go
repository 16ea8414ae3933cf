// Package audit writes the audit / notification log (HERALD_AUDIT, kept 30
// days): one record for every envelope routed, rejected, delivered or failed.
// Records carry who, where and why, never message text or secrets.
package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
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
	Failed    = "failed"
	// Dropped: an inbound message refused on arrival or at a gate.
	Dropped = "dropped"
	// Uncertain: a delivery whose attempt died while calling the provider,
	// resent or skipped as the integration's on_uncertain says.
	Uncertain = "uncertain"
)

// Record is one audit entry.
type Record struct {
	Time       time.Time `json:"time"`
	Kind       string    `json:"kind"`
	Butler     string    `json:"butler,omitempty"`
	Channel    string    `json:"channel,omitempty"`
	Intent     string    `json:"intent,omitempty"`
	RequestID  string    `json:"request_id,omitempty"`
	Key        string    `json:"idempotency_key,omitempty"`
	DeliveryID string    `json:"delivery_id,omitempty"`
	Class      string    `json:"class,omitempty"`
	Reason     string    `json:"reason,omitempty"`
}

// Outcome is the record of a delivery's outcome as the waiting butler is
// told it: delivered (with its delivery id) or failed (with the class and
// reason). channel is the integration the notify went to.
func Outcome(butler, requestID, key, channel string, resp *envelope.RouteResponse) Record {
	rec := Record{Kind: Delivered, Butler: butler, RequestID: requestID, Key: key}
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
// records written after it, and MaxBatch how many may share one.
const (
	Linger   = 2 * time.Millisecond
	MaxBatch = 256
)

// Writer publishes records. Delivered records of one channel type written
// within Linger of each other are stored as one message, one JSON record per
// line (Decode reads them); at a few a second each is alone. Every other kind
// is published at once: refusals and failures are never held back, and a
// notify's routed record (the switchboard's) is stored before its delivered
// one (the messenger's, written a whole delivery later), so the log reads in
// order.
type Writer struct {
	JS  jetstream.JetStream
	Log *slog.Logger

	mu      sync.Mutex
	pending map[string]*batch // by subject
	timer   *time.Timer
}

type batch struct {
	data []byte
	n    int
}

// Write publishes r on herald.audit.<kind>.<channel type> without waiting
// for JetStream's ack: auditing never holds up or fails the message itself.
// A publish that cannot start is logged here; one JetStream refuses later is
// logged by the JetStream context's async error handler (bus.Open).
func (w *Writer) Write(ctx context.Context, r Record) {
	r.Time = time.Now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		w.failed(r.Kind, r.RequestID, err)
		return
	}
	subject := bus.AuditSubject(r.Kind, channelToken(r.Channel))
	if r.Kind != Delivered {
		w.publish(subject, b, r.Kind, r.RequestID)
		return
	}
	w.mu.Lock()
	if w.pending == nil {
		w.pending = map[string]*batch{}
	}
	bt := w.pending[subject]
	if bt == nil {
		bt = &batch{}
		w.pending[subject] = bt
	}
	if bt.n > 0 {
		bt.data = append(bt.data, '\n')
	}
	bt.data = append(bt.data, b...)
	bt.n++
	full := bt.n >= MaxBatch
	if full {
		delete(w.pending, subject)
	} else if w.timer == nil {
		w.timer = time.AfterFunc(Linger, w.Flush)
	}
	w.mu.Unlock()
	if full {
		w.publish(subject, bt.data, r.Kind, r.RequestID)
	}
}

// Flush publishes what is waiting; a service calls it before it stops.
func (w *Writer) Flush() {
	w.mu.Lock()
	pending := w.pending
	w.pending = nil
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.mu.Unlock()
	for subject, bt := range pending {
		w.publish(subject, bt.data, "", "")
	}
}

func (w *Writer) publish(subject string, data []byte, kind, requestID string) {
	if _, err := w.JS.PublishAsync(subject, data); err != nil {
		w.failed(kind, requestID, err)
	}
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
func channelToken(ch string) string {
	typ, _, _ := strings.Cut(ch, ":")
	if typ == "" || strings.ContainsAny(typ, ".*> \t") {
		return "unknown"
	}
	return typ
}
