package email

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// The bounds of ingress.v1 (schemas/ingress.v1.json), so that no mail makes
// an envelope the switchboard would refuse: a refused envelope would be
// answered 451 and retried by the sending server forever.
const (
	maxTextChars   = 262144 // content.text
	maxMetaChars   = 4096   // one meta value
	maxIdentity    = 512    // source_*_identity
	maxAttachments = 64
	maxNameChars   = 512 // attachment name
	maxMimeChars   = 255 // attachment mime
)

// channelType is the source_channel of everything this package receives.
const channelType = "email"

// truncated marks a body cut to fit content.text.
const truncated = "\n\n[message truncated]"

// unknownSender stands in for a sender a mail does not name at all; the
// switchboard's allowlist never matches it.
const unknownSender = "unknown@herald.invalid"

// newIngress builds the ingress.v1 of one mail: m parsed from raw, sent by
// mailFrom (the envelope's MAIL FROM) to rcpts (the accepted RCPT TOs,
// lower-cased, at least one).
//
// One mail is one ingress, however many of our addresses it was sent to:
// the first is the endpoint, all are in meta "to". The Message-ID is the
// native_id (JetStream dedups a retried mail on it) and the thread identity
// a reply's In-Reply-To names; thread_id is the root of the conversation, so
// every mail of one email thread lands in one Herald thread.
//
// The sender is the From address (else MAIL FROM) as it is only when auth
// says it is authenticated; otherwise UnverifiedPrefix goes before it in
// source_sender_identity and user_id, so no allowlist lets it in. chat_id
// is the bare address in both cases: it is where an answer goes.
func newIngress(integrationID string, m *parsedMail, raw []byte, mailFrom string, rcpts []string, now time.Time, auth senderAuth) *envelope.Ingress {
	id := mailID(m, raw)
	sender := m.fromAddr
	if sender == "" {
		sender = strings.ToLower(mailFrom)
	}
	sender = identity(sender, unknownSender)
	who := sender
	if !auth.ok {
		who = identity(UnverifiedPrefix+sender, UnverifiedPrefix+unknownSender)
	}
	endpoint := unknownSender
	if len(rcpts) > 0 {
		endpoint = identity(rcpts[0], unknownSender)
	}

	meta := mailMeta{}
	meta.setSender(m, sender, who, auth)
	meta.setMail(m, id, mailFrom, rcpts, now)
	attachments, notes := meta.attachments(m)
	text := m.text
	if room := maxTextChars - utf8.RuneCountInString(notes); utf8.RuneCountInString(text) > room {
		text = limit(text, room-utf8.RuneCountInString(truncated)) + truncated
	}
	text = strings.TrimLeft(text+notes, "\n")

	in := envelope.NewIngress(integrationID, channelType, endpoint, who, id, text, id, meta)
	in.Attachments = attachments
	return in
}

// mailID is the mail's Message-ID, or for a mail without one an id made of
// its bytes: the same bytes, retried, still get the same id.
func mailID(m *parsedMail, raw []byte) string {
	if m.messageID != "" {
		return m.messageID
	}
	sum := sha256.Sum256(raw)
	return "<" + hex.EncodeToString(sum[:]) + "@herald.invalid>"
}

// mailMeta is the meta of a mail's ingress as it is filled in.
type mailMeta map[string]string

// set sets meta k to v made one line and cut to a meta value's bound, or
// leaves it out when nothing of v is left.
func (meta mailMeta) set(k, v string) {
	if v = clean(v); v != "" {
		meta[k] = limit(v, maxMetaChars)
	}
}

// setSender says who wrote the mail (sender, their address; who, their
// source_sender_identity) and whether that is authenticated. The
// correspondent is the "chat", as in a Telegram DM.
func (meta mailMeta) setSender(m *parsedMail, sender, who string, auth senderAuth) {
	user := m.fromName
	if user == "" {
		user = sender
	}
	from := sender
	if m.fromName != "" {
		from = m.fromName + " <" + sender + ">"
	}
	meta.set("from", from)
	meta.set("user", user)
	meta.set("user_id", who)
	meta.set("chat_id", sender)
	authenticated, how := auth.meta()
	meta.set(MetaSenderAuthenticated, authenticated)
	meta.set(MetaSenderAuth, how)
	meta.set("chat_type", "private")
}

// setMail says what the mail is: to whom it went, its subject (kept even
// when empty), its id and the thread it belongs to, whose root is the first
// of its References (else what it is In-Reply-To, else itself), and when
// it was sent (its Date, else now).
func (meta mailMeta) setMail(m *parsedMail, id, mailFrom string, rcpts []string, now time.Time) {
	thread := id
	switch {
	case len(m.references) > 0:
		thread = m.references[0]
	case m.inReplyTo != "":
		thread = m.inReplyTo
	}
	ts := now
	if !m.date.IsZero() {
		ts = m.date
	}
	meta.set("envelope_from", strings.ToLower(mailFrom))
	meta.set("to", joinLimited(rcpts, ", "))
	meta.set("header_to", joinLimited(m.to, ", "))
	meta.set("cc", joinLimited(m.cc, ", "))
	meta["subject"] = limit(m.subject, maxMetaChars)
	meta.set("message_id", id)
	meta.set("in_reply_to", m.inReplyTo)
	meta.set("references", joinLimited(m.references, " "))
	meta.set("thread_id", thread)
	meta.set("ts", strconv.FormatInt(ts.Unix(), 10))
}

// attachments describes the mail's attachments that were held, as many as
// ingress.v1 allows; how many more there were goes in meta
// attachments_omitted. An attachment that could not be held is not listed,
// since a download of it could only fail: a line of the text (notes) names
// it and says why, so the butler can ask for it another way.
func (meta mailMeta) attachments(m *parsedMail) ([]envelope.Attachment, string) {
	var out []envelope.Attachment
	var notes strings.Builder
	for i, a := range m.attachments {
		if i == maxAttachments {
			meta.set("attachments_omitted", strconv.Itoa(len(m.attachments)-maxAttachments))
			break
		}
		name := limit(a.name, maxNameChars)
		if a.ref == "" {
			lost := a.lost
			if lost == "" {
				lost = "it was not stored"
			}
			fmt.Fprintf(&notes, "\n\n[attachment %s (%s) could not be kept: %s]", name, bus.Bytes(a.size), lost)
			continue
		}
		out = append(out, envelope.Attachment{Name: name, Mime: limit(a.mime, maxMimeChars), Size: a.size, Ref: a.ref})
	}
	return out, notes.String()
}

// withoutContent is what of an ingress goes to sink.Dropped: who, to whom,
// which mail, but not what it said (the audit log keeps no message text).
func withoutContent(in *envelope.Ingress) *envelope.Ingress {
	out := *in
	out.Content = envelope.Content{}
	out.Attachments = nil
	out.Meta = make(map[string]string, len(in.Meta))
	for k, v := range in.Meta {
		if k != "subject" {
			out.Meta[k] = v
		}
	}
	return &out
}

// dropReason says why a mail must be accepted and discarded rather than
// handed on: the loop rules of RFC 3834, or a bounce (a null return path,
// RFC 5321 §4.5.5, or a delivery or read report), which must never be
// answered either.
func dropReason(m *parsedMail, mailFrom string) string {
	switch {
	case m.loop != "":
		return m.loop
	case mailFrom == "" || m.report:
		return reasonBounce
	}
	return ""
}

// identity makes s a source_*_identity: non-empty and within the schema's
// bound; an address longer than that is not one.
func identity(s, fallback string) string {
	if s == "" || utf8.RuneCountInString(s) > maxIdentity || !utf8.ValidString(s) {
		return fallback
	}
	return s
}

// limit cuts s to at most n characters (code points, as JSON Schema counts).
func limit(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// joinLimited joins as many whole items as fit in a meta value.
func joinLimited(items []string, sep string) string {
	var b strings.Builder
	n := 0
	for _, it := range items {
		add := utf8.RuneCountInString(it)
		if b.Len() > 0 {
			add += len(sep)
		}
		if n+add > maxMetaChars {
			break
		}
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		b.WriteString(it)
		n += add
	}
	return b.String()
}
