package envelope

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// NewRequestID returns a UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then
// random bits, so ids sort by creation time.
func NewRequestID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// IdempotencyKey is the key of architecture.md §4: a hash of (origin_butler, request_id,
// intent, channel, recipient, thread, message, emoji). The request_id is the
// notify's request_context.request_id when it answers an inbound request, else
// the route's own: so a re-published route, or the same reply to the same
// request, is one delivery, while two separate sends are two. A notify with an
// idempotency_key (architecture.md §11) is keyed by (origin_butler, that key) alone.
func (r *Route) IdempotencyKey() string {
	n := r.Notify()
	if n == nil {
		return ""
	}
	if n.IdempotencyKey != "" {
		// The caller named it: that name, not the content, is the delivery.
		return hashParts("idempotency_key", n.OriginButler, n.IdempotencyKey)
	}
	requestID, thread := r.RequestContext.RequestID, ""
	if rc := n.RequestContext; rc != nil {
		requestID, thread = rc.RequestID, rc.SourceThreadIdentity
	}
	intent := n.Delivery.Intent
	if intent == "" {
		intent = IntentSend
	}
	if len(n.Delivery.Files) > 0 {
		// Two sends of one text with other files are two deliveries.
		parts := []string{n.OriginButler, requestID, intent, n.Delivery.Channel, n.Delivery.Recipient, thread, n.Delivery.Message, n.Delivery.Emoji, "files"}
		for _, f := range n.Delivery.Files {
			parts = append(parts, f.Name, f.SHA256)
		}
		return hashParts(parts...)
	}
	if n.Delivery.EditOf != "" {
		return hashParts(n.OriginButler, requestID, intent, n.Delivery.Channel, n.Delivery.Recipient, thread, n.Delivery.Message, n.Delivery.Emoji, n.Delivery.EditOf)
	}
	return hashParts(n.OriginButler, requestID, intent, n.Delivery.Channel, n.Delivery.Recipient, thread, n.Delivery.Message, n.Delivery.Emoji)
}

// ArgsDigest is what a notify asks for, but for its channel (which the
// switchboard resolves, "telegram" becoming "telegram:tg_main") and its
// idempotency_key: two calls with one idempotency_key must agree on it.
func (n *Notify) ArgsDigest() string {
	d := n.Delivery
	d.Channel = ""
	d.ClaimSession = "" // which session called is not an argument
	if d.Intent == "" {
		d.Intent = IntentSend
	}
	b, _ := json.Marshal(struct {
		D  Delivery        `json:"d"`
		RC *RequestContext `json:"rc,omitempty"`
	}{d, n.RequestContext})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// hashParts is the hex SHA-256 of parts, each length-prefixed, so no two
// different tuples hash the same bytes.
func hashParts(parts ...string) string {
	size := 0
	for _, part := range parts {
		size += 8 + len(part)
	}
	// One buffer, hashed at once: the message is copied once, not per write,
	// into a buffer the next key reuses.
	bp := keyBufs.Get().(*[]byte)
	b := slices.Grow((*bp)[:0], size)
	for _, part := range parts {
		b = binary.BigEndian.AppendUint64(b, uint64(len(part)))
		b = append(b, part...)
	}
	sum := sha256.Sum256(b)
	if cap(b) <= maxKeyBuf {
		*bp = b
		keyBufs.Put(bp)
	}
	return hex.EncodeToString(sum[:])
}

// keyBufs hold IdempotencyKey's buffers; one over maxKeyBuf (a message of
// many kilobytes) is left to the garbage collector rather than kept.
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxKeyBuf = 16 << 10

// DeliveryID is the stable id of the delivery an idempotency key names; every
// answer for the same key carries the same one.
func DeliveryID(key string) string {
	if len(key) > 26 {
		key = key[:26]
	}
	return "dlv_" + key
}
