// Package web is the `web` channel: a small chat page, served by the
// messenger, where a person talks with the butlers. It needs no account, so
// it is the inbound channel a fresh `herald dev` can offer at once.
//
//   - channel.go: Channel: Deliver, Edit and Typing into a visitor's subject.
//   - server.go, limits.go: Receive, the page's routes, the cookie, and how
//     many event streams one visitor or address may hold.
//   - store.go, fanout.go: the HERALD_WEB stream, and one consumer fanning
//     it out to the open pages over Server-Sent Events.
//   - files.go: files both ways, in the bus's file store; static/: the page.
//
// docs/channels.md#web-chat has how it works, and why to keep it local.
package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	webspec "github.com/heraldhq/herald/pkg/channel/web"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Limits and defaults.
const (
	// DefaultListen is where the page is served when the integration names
	// no listen address.
	DefaultListen = webspec.DefaultListen
	// MaxText is the longest message a visitor may send, in bytes.
	MaxText = 16 << 10
	// Broadcast is the visitor part of the subject that every visitor of an
	// integration follows: where a send without a recipient goes.
	Broadcast = "all"
)

// Kinds of conversation entries.
const (
	kindVisitor  = "visitor"
	kindButler   = "butler"
	kindReaction = "reaction"
	// kindEdit replaces the text and buttons of a butler message (Target)
	// on the page: the message itself is never rewritten in the stream.
	kindEdit = "edit"
)

var (
	// visitorPattern is a visitor id: 96 bits of a hash, in hex, so it is safe
	// as a NATS subject token.
	visitorPattern = regexp.MustCompile(`^[0-9a-f]{24}$`)
	// butlerIDPattern is the id of a butler message (entryID "b"): the only
	// entries an edit may replace.
	butlerIDPattern = regexp.MustCompile(`^b[0-9a-f]{24}$`)
)

// The messenger uses one object both ways when a sender is also a receiver.
var (
	_ deliver.Sender   = (*Channel)(nil)
	_ deliver.Receiver = (*Channel)(nil)
	_ deliver.Editor   = (*Channel)(nil)
	_ deliver.Typer    = (*Channel)(nil)
)

// Channel is one web integration: the sender that puts butler messages into
// visitors' conversations, and the receiver that serves the page.
type Channel struct {
	id     string
	listen string
	// allowedHosts are Host names answered besides localhost and the bound address.
	allowedHosts []string
	log          *slog.Logger
	store        store
	timeouts     serverTimeouts
	// nc carries "typing…" to every replica serving the page (nil without
	// a bus: then only to this process's pages), and reads held files.
	nc *nats.Conn
	// js holds the conversation's files (nil without a bus: none).
	js jetstream.JetStream
	// maxFile is the largest file a visitor may send: the channel's, or 0
	// (none) without a bus.
	maxFile int64

	mu        sync.Mutex
	url       string
	receiving bool
	fan       *fanout // while Receive serves the page
}

// New is the channel's deliver.Factory. The returned *Channel is also the
// integration's deliver.Receiver. With env.JS nil, conversations are kept in
// memory only (tests, or a messenger without a bus).
func New(in config.Integration, env deliver.Env) (deliver.Sender, error) {
	c, err := config.CheckedSettings[*Config](&in)
	if err != nil {
		return nil, err
	}
	log := env.Log()
	log = log.With("channel", "web", "integration", in.ID)
	listen := c.Listen
	if listen == "" {
		listen = DefaultListen
	}
	var st store = newMemStore()
	var nc *nats.Conn
	if env.JS != nil {
		st, nc = &jsStore{js: env.JS, log: log}, env.JS.Conn()
	}
	var maxFile int64 // without a bus the chat keeps no files
	if env.JS != nil {
		limits, _ := config.ChannelOf("web")
		maxFile = limits.MaxFile
	}
	return &Channel{
		id: in.ID, listen: listen, allowedHosts: c.AllowedHosts, log: log, store: st, timeouts: defaultTimeouts,
		nc: nc, js: env.JS, maxFile: maxFile,
	}, nil
}

// Typing shows "<butler> is typing…" on the open pages of the visitor d
// answers (deliver.Typer) for 6 seconds: a page hears it live and never
// again, since it is not kept in the conversation; a message or reaction of
// the same butler ends it at once. Nobody is shown it for a delivery to every
// visitor.
func (c *Channel) Typing(_ context.Context, d deliver.Delivery) error {
	// Renewed every 4 s: the visitor is not looked up in the store each
	// time, as a send's is; a sign for a visitor with no page open reaches
	// nobody.
	visitor := envelope.WebVisitor(d.Recipient)
	if d.Recipient == "" {
		visitor = replyVisitor(d)
	}
	if !visitorPattern.MatchString(visitor) {
		return nil
	}
	data, err := json.Marshal(map[string]string{"butler": d.Butler})
	if err != nil {
		return err
	}
	if c.nc != nil {
		return c.nc.Publish(bus.WebTypingSubject(c.id, visitor), data)
	}
	c.mu.Lock()
	fan := c.fan
	c.mu.Unlock()
	if fan != nil {
		fan.typing(visitor, data)
	}
	return nil
}

// URL is the address of the page once Receive is listening, else "".
func (c *Channel) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.url
}

// Deliver puts a butler's message (send, reply) or reaction (react) into a
// visitor's conversation. The recipient is Recipient (a visitor id, with or
// without "web:"), else for a reply the visitor of Thread or Sender, else
// every visitor of the integration. A message's files are held in
// herald_files and linked under it, for its recipient only (files.go).
func (c *Channel) Deliver(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	if len(d.Done) > 0 {
		return deliver.Receipt{MessageIDs: d.Done}, nil
	}
	if err := ctx.Err(); err != nil {
		return deliver.Receipt{}, fmt.Errorf("%w: %w", envelope.ErrTimeout, err)
	}
	e := entry{Butler: d.Butler, TS: time.Now().UTC().Format(time.RFC3339)}
	var visitor string
	switch d.Intent {
	case envelope.IntentReact:
		v, msg, ok := parseThread(d.Thread)
		if !ok {
			return deliver.Receipt{}, fmt.Errorf("%w: web react needs the request_context.source_thread_identity of a web message (\"<visitor>:<message id>\"), got %q", envelope.ErrValidation, d.Thread)
		}
		if d.Emoji == "" {
			return deliver.Receipt{}, fmt.Errorf("%w: web react needs an emoji", envelope.ErrValidation)
		}
		visitor = v
		e.ID, e.Kind, e.Target, e.Emoji = entryID("r", d.Key), kindReaction, msg, d.Emoji
	case envelope.IntentSend, envelope.IntentReply, "":
		if strings.TrimSpace(d.Message) == "" && len(d.Files) == 0 {
			return deliver.Receipt{}, fmt.Errorf("%w: web needs a non-empty message", envelope.ErrValidation)
		}
		v, err := c.recipient(ctx, d)
		if err != nil {
			return deliver.Receipt{}, err
		}
		visitor = v
		e.ID, e.Kind, e.Text = entryID("b", d.Key), kindButler, d.Message
		e.Subject, e.Urgency, e.Actions = d.Subject, d.Urgency, d.Actions
		if d.Intent == envelope.IntentReply {
			if _, msg, ok := parseThread(d.Thread); ok {
				e.ReplyTo = msg
			}
		}
		// Held before Begin: only the store below shows anything, and a
		// file held for a message never stored is gone in 24 h.
		files, err := c.hold(ctx, d.Files)
		if err != nil {
			return deliver.Receipt{}, err
		}
		e.Files = files
	default:
		return deliver.Receipt{}, fmt.Errorf("%w: web cannot %q; use send, reply or react", envelope.ErrValidation, d.Intent)
	}
	// The id is derived from the idempotency key, so a retry after a crash
	// between this store and the ledger is dropped by the stream's
	// duplicate window instead of showing twice.
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	if err := c.store.put(ctx, Subject(c.id, visitor), "out:"+e.ID, e); err != nil {
		return deliver.Receipt{}, err
	}
	return d.SentOne(e.ID, "message")
}

// Edit replaces the text and buttons of a butler message (d.Edit, the id
// Deliver's receipt named) for d.Recipient, resolved as a send's, by adding
// an edit entry after it, which the page applies live and on replay: d.Message
// whole (a web message has no length limit), d.Actions (none takes the
// buttons away). The stream finds entries by subject, not id, so an edit of a
// message never sent there is stored all the same; the page ignores it.
func (c *Channel) Edit(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	if len(d.Done) > 0 {
		return deliver.Receipt{MessageIDs: d.Done}, nil // an earlier attempt stored the edit
	}
	if err := ctx.Err(); err != nil {
		return deliver.Receipt{}, fmt.Errorf("%w: %w", envelope.ErrTimeout, err)
	}
	if !butlerIDPattern.MatchString(d.Edit) {
		return deliver.Receipt{}, fmt.Errorf("%w: %q is not a web butler message to edit: pass the message id the send's receipt named (\"b\" and 24 hex digits), with the send's recipient", envelope.ErrValidation, d.Edit)
	}
	if err := d.NeedsEditText(); err != nil {
		return deliver.Receipt{}, err
	}
	visitor, err := c.recipient(ctx, d)
	if err != nil {
		return deliver.Receipt{}, err
	}
	// Derived from the idempotency key like a message's id, so a retried
	// edit is stored once.
	e := entry{
		ID: entryID("e", d.Key), Kind: kindEdit, Butler: d.Butler, Target: d.Edit,
		Text: d.Message, Actions: d.Actions, TS: time.Now().UTC().Format(time.RFC3339),
	}
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	if err := c.store.put(ctx, Subject(c.id, visitor), "out:"+e.ID, e); err != nil {
		return deliver.Receipt{}, err
	}
	return d.SentOne(d.Edit, "the edit of message")
}

func (c *Channel) recipient(ctx context.Context, d deliver.Delivery) (string, error) {
	if d.Recipient != "" {
		v := envelope.WebVisitor(d.Recipient)
		if !visitorPattern.MatchString(v) {
			return "", fmt.Errorf("%w: web recipient %q is not a visitor id (24 hex digits: the user_id of the visitor's messages, also shown at the foot of the page); omit it to reach everyone with the page open", envelope.ErrValidation, d.Recipient)
		}
		ok, err := c.store.has(ctx, Subject(c.id, v))
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("%w: visitor %s has not written on web:%s in the last 7 days; reply to one of their messages, or omit the recipient to reach everyone with the page open", envelope.ErrNotFound, v, c.id)
		}
		return v, nil
	}
	if d.Intent == envelope.IntentReply {
		if v := replyVisitor(d); v != "" {
			return v, nil
		}
	}
	return Broadcast, nil
}

// replyVisitor is the visitor a reply answers: of its thread, else its
// sender; "" if neither names one.
func replyVisitor(d deliver.Delivery) string {
	if v, _, ok := parseThread(d.Thread); ok {
		return v
	}
	if v, ok := strings.CutPrefix(d.Sender, envelope.WebPrefix); ok && visitorPattern.MatchString(v) {
		return v
	}
	return ""
}

// Subject is where the conversation of one visitor (or Broadcast) of an
// integration is kept.
func Subject(integration, visitor string) string {
	return subjectPrefix + integration + "." + visitor
}

// parseThread splits a web source_thread_identity, "<visitor>:<message id>".
func parseThread(thread string) (visitor, msg string, ok bool) {
	visitor, msg, ok = strings.Cut(thread, ":")
	if !ok || !visitorPattern.MatchString(visitor) || !messageIDPattern.MatchString(msg) {
		return "", "", false
	}
	return visitor, msg, true
}

// entryID is the stable id of the entry a delivery stores: derived from its
// idempotency key, or random when there is none.
func entryID(prefix, key string) string {
	if key == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		return prefix + hex.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte(key))
	return prefix + hex.EncodeToString(sum[:12])
}
