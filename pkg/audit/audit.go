// Package audit writes the audit / notification log (HERALD_AUDIT, kept 30
// days): one record for every envelope routed, rejected, delivered or failed.
// Records carry who, where and why, never message text or secrets.
package audit

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
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

// Writer publishes records.
type Writer struct {
	JS  jetstream.JetStream
	Log *slog.Logger
}

// Write publishes r on herald.audit.<kind>.<channel type> without waiting
// for JetStream's ack: auditing never holds up or fails the message itself.
// A publish that cannot start is logged here; one JetStream refuses later is
// logged by the JetStream context's async error handler (bus.Open).
func (w *Writer) Write(ctx context.Context, r Record) {
	r.Time = time.Now().UTC()
	b, err := json.Marshal(r)
	if err == nil {
		_, err = w.JS.PublishAsync(bus.AuditSubject(r.Kind, channelToken(r.Channel)), b)
	}
	if err != nil {
		log := w.Log
		if log == nil {
			log = slog.Default()
		}
		log.Error("audit write failed", "kind", r.Kind, "request_id", r.RequestID, "err", err)
	}
}

// channelToken is the channel's type, safe as one subject token.
func channelToken(ch string) string {
	typ, _, _ := strings.Cut(ch, ":")
	if typ == "" || strings.ContainsAny(typ, ".*> \t") {
		return "unknown"
	}
	return typ
}
