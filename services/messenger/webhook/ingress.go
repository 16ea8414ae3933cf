package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Limits on what an inbound body becomes, within ingress.v1's.
const (
	maxText       = 262144 // content.text
	maxMetaValue  = 4096
	maxMetaKey    = 64
	maxMetaFields = 32 // fields of the body copied to meta
	maxIdentity   = 512
	maxThread     = 998 // source_thread_identity
)

// reserved are the meta keys a body cannot set: those this receiver sets,
// and those the switchboard and the butler read as Herald's own (a notice's
// kind, the session, a permission verdict, email's sender authentication).
var reserved = map[string]bool{
	"chat_id": true, "chat_type": true, "user": true, "user_id": true, "message_id": true, "ts": true,
	"thread_id": true, "thread": true, "thread_key": true, "kind": true, "truncated_chars": true,
	"callback_query_id": true, "reply_to_message_id": true, "webhook_auth": true,
	"sender_authenticated": true, "sender_auth": true, "request_id": true,
}

// reservedPrefixes are families of Herald's own meta keys.
var reservedPrefixes = []string{"permission_", "delivery_", "herald_"}

// Body problems, answered 400.
var (
	errNotObject = errors.New(`the body must be a JSON object like {"text": "Build 812 failed"}`)
	errNoText    = errors.New(`the body has no "text": send a JSON object with a non-empty "text" string`)
	errTextType  = errors.New(`"text" must be a JSON string`)
)

// body is what an inbound POST says.
type body struct {
	text   string
	sender string // "sender" or "source"
	thread string
	chat   string // "chat" or "channel"
	meta   map[string]string
}

// parseBody reads an inbound body: a JSON object with a "text" string.
func parseBody(data []byte) (*body, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, errNotObject
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, errNotObject
	}
	str := func(k string) (string, bool) {
		raw, ok := fields[k]
		if !ok || len(raw) == 0 || raw[0] != '"' {
			return "", false // absent, or not a string (null included)
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", false
		}
		return v, true
	}
	b := &body{meta: map[string]string{}}
	text, ok := str("text")
	if _, present := fields["text"]; present && !ok {
		return nil, errTextType
	}
	if strings.TrimSpace(text) == "" {
		return nil, errNoText
	}
	b.text = deliver.Clip(text, maxText)
	first := func(keys ...string) string {
		for _, k := range keys {
			if v, _ := str(k); strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	b.sender = deliver.Clip(first("sender", "source"), maxIdentity)
	b.thread = deliver.Clip(first("thread"), maxThread)
	b.chat = deliver.Clip(first("chat", "channel"), maxMetaValue)

	// The other string fields, in a fixed order: keys already valid first,
	// then those that had to be rewritten, each sorted, so which of two
	// colliding keys wins does not depend on map order.
	taken := map[string]bool{"text": true, "sender": true, "source": true, "thread": true, "chat": true, "channel": true}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if !taken[k] {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, c string) int {
		if va, vc := metaKey(a) == a, metaKey(c) == c; va != vc {
			if va {
				return -1
			}
			return 1
		}
		return strings.Compare(a, c)
	})
	for _, k := range keys {
		if len(b.meta) == maxMetaFields {
			break
		}
		v, ok := str(k)
		key := metaKey(k)
		if !ok || key == "" || isReserved(key) {
			continue
		}
		if _, dup := b.meta[key]; dup {
			continue
		}
		b.meta[key] = deliver.Clip(v, maxMetaValue)
	}
	return b, nil
}

// metaKey is k as a meta key: ASCII letters, digits and _, every other
// character replaced by _, at most 64; "" if nothing of it is a letter or
// a digit.
func metaKey(k string) string {
	var sb strings.Builder
	alnum := false
	for _, r := range k {
		if sb.Len() == maxMetaKey {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			alnum = true
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	if !alnum {
		return ""
	}
	return sb.String()
}

func isReserved(key string) bool {
	lower := strings.ToLower(key)
	if reserved[lower] {
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(lower, p) {
			return true
		}
	}
	return false
}

// accepted is what the receiver knows of one accepted request besides its
// body.
type accepted struct {
	integration string
	messageID   string // webhook-id, or one made up for a request without
	ts          string // unix seconds
	auth        string // signature | bearer
}

// toIngress is the ingress.v1 of an accepted request.
func toIngress(r accepted, b *body) *envelope.Ingress {
	sender := b.sender
	if sender == "" {
		sender = "webhook:" + r.integration
	}
	chat := b.chat
	if chat == "" {
		chat = r.integration
	}
	meta := map[string]string{}
	for k, v := range b.meta {
		meta[k] = v
	}
	meta["chat_id"] = chat
	meta["user_id"] = sender
	meta["message_id"] = r.messageID
	meta["ts"] = r.ts
	meta["webhook_auth"] = r.auth
	thread := b.thread
	if thread != "" {
		meta["thread_id"] = thread
	} else {
		// A reply or a reaction needs something to name; the message's
		// own id is what the poster knows it by.
		thread = r.messageID
	}
	return envelope.NewIngress(r.integration, "webhook", r.integration, sender, thread, b.text, nativeID(r.integration, r.messageID), meta)
}

// nativeID is the dedup key of a message: "<integration>:<webhook-id>".
func nativeID(integration, messageID string) string { return integration + ":" + messageID }
