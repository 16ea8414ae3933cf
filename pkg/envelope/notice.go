package envelope

import (
	"fmt"
	"maps"
)

// Delivery notices: what a butler is told, as a channel notification, about a
// notify whose outcome its caller was not there to hear (it was answered
// "queued"). They are ingress.v1 envelopes from Herald itself, on the butler's
// inbox like any inbound message, with meta.kind saying which.
const (
	// MetaKind is the meta key naming a notice's kind.
	MetaKind = "kind"
	// KindDeliveryFailed: the notify will not be delivered.
	KindDeliveryFailed = "delivery_failed"
	// KindDeliveryUncertain: an attempt died while calling the provider; the
	// notify may be missing, or there twice (meta.reason says which).
	KindDeliveryUncertain = "delivery_uncertain"
	// KindAcknowledged: someone acknowledged a note sent with ack_within.
	KindAcknowledged = "acknowledged"
	// KindUnacknowledged: nobody acknowledged it; its escalations ran out.
	KindUnacknowledged = "unacknowledged"
	// NoticeSender is the sender identity of notices.
	NoticeSender = "herald"
)

// IsNotice reports whether an ingress is a delivery notice, which no one can
// reply to.
func IsNotice(in *Ingress) bool {
	k := in.Meta[MetaKind]
	return in.RequestContext.SourceSenderIdentity == NoticeSender &&
		(k == KindDeliveryFailed || k == KindDeliveryUncertain || k == KindAcknowledged || k == KindUnacknowledged)
}

// NewAttentionNotice tells a butler what became of its note requestID,
// sent with ack_within: kind is KindAcknowledged or KindUnacknowledged,
// text says it in a sentence, meta adds to the standard keys.
func NewAttentionNotice(requestID, kind, channel, text string, meta map[string]string) *Ingress {
	in := notice(requestID, kind, text)
	in.Meta["channel"] = channel
	maps.Copy(in.Meta, meta)
	return in
}

// NewDeliveryNotice tells a butler the outcome of its notify requestID on
// channel: failed (with the error) or uncertain (with the note). Its
// request_id is the notify's, so meta.request_id names what it is about.
func NewDeliveryNotice(requestID, channel string, nr *NotifyResponse) *Ingress {
	kind, reason, class := KindDeliveryFailed, "", ""
	var text string
	switch {
	case nr.Error != nil:
		reason, class = nr.Error.Message, nr.Error.Class
		text = fmt.Sprintf("Your notification (request_id %s) via %s could not be delivered (%s): %s", requestID, channel, class, reason)
	case nr.Delivery != nil:
		kind, reason = KindDeliveryUncertain, nr.Delivery.Note
		text = fmt.Sprintf("Your notification (request_id %s) via %s may not have been delivered as sent: %s", requestID, channel, reason)
	}
	meta := map[string]string{"channel": channel, "reason": reason}
	if class != "" {
		meta["class"] = class
	}
	in := notice(requestID, kind, text)
	maps.Copy(in.Meta, meta)
	return in
}

// notice is a notice of kind about request requestID, saying text.
func notice(requestID, kind, text string) *Ingress {
	return &Ingress{
		SchemaVersion: IngressV1,
		RequestContext: RequestContext{
			RequestID: requestID, SourceChannel: "api", SourceEndpointIdentity: "herald",
			SourceSenderIdentity: NoticeSender, ReceivedAt: Now(),
		},
		IntegrationID: "herald",
		Content:       Content{Text: text},
		Meta:          map[string]string{MetaKind: kind},
		NativeID:      kind + ":" + requestID,
	}
}
