package butler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// MCP names of the channel contract (architecture.md §5).
const (
	// MetaSourceChannel is the meta key naming the channel type a message
	// came from (telegram, email, web, ...).
	MetaSourceChannel = "source_channel"

	CapabilityChannel           = "claude/channel"
	CapabilityChannelPermission = "claude/channel/permission"
	MethodChannel               = "notifications/claude/channel"
	MethodPermissionRequest     = "notifications/claude/channel/permission_request"
	MethodPermission            = "notifications/claude/channel/permission"
)

// channelSide is the butler as a channel: it takes the messages the
// switchboard routed to it from its durable inbox, in order, and pushes each
// to the connected MCP clients. While none can receive, messages wait in the
// stream.
type channelSide struct {
	b         *Butler
	js        jetstream.JetStream
	cons      jetstream.Consumer
	requests  bus.KV
	status    bus.KV
	approvals *approval.Store

	mu          sync.Mutex
	sessions    map[string]server.ClientSession // registered sessions
	listening   map[string]int                  // open GET streams by HTTP session id
	spoke       map[string]*protocol            // the protocol of each session's latest permission request
	asked       map[string][]string             // each session's open permission requests
	awaited     map[string]bool                 // questions an ask call waits for (tool_ask.go)
	verdicts    map[string]chan string          // permission requests an approve call waits for (tool_approve.go)
	takes       map[string]bool                 // sessions that have taken messages: streamed or used inbox
	pushed      map[pushKey]time.Time           // inbox messages pushed to a session, and when (pushedBefore)
	prunedAt    time.Time                       // when pushed was last pruned
	notRecorded map[uint64]bool                 // inbox messages pushed but not yet on the unread list
	// unreadDropped counts entries that left the unread list since
	// unreadWarned, when that was last logged (unread.go).
	unreadDropped int
	unreadWarned  time.Time
	wake          chan struct{}
	pulling       sync.Mutex // one reader of the inbox at a time keeps the order
}

func newChannelSide(ctx context.Context, b *Butler, js jetstream.JetStream) (*channelSide, error) {
	cfg := bus.InboxConsumer(b.name)
	// The inbox stream is made by herald setup (or herald dev, or a switchboard
	// allowed to): wait for it as for NATS itself.
	wait := time.Duration(b.config().NATS.Wait)
	if wait <= 0 {
		wait = bus.DefaultWaitForNATS
	}
	deadline := time.Now().Add(wait)
	cons, err := bus.BindConsumer(ctx, js, bus.StreamInbox, cfg, b.log)
	for delay := 250 * time.Millisecond; errors.Is(err, jetstream.ErrStreamNotFound) && time.Now().Add(delay).Before(deadline); delay = min(delay*2, 5*time.Second) {
		b.log.WarnContext(ctx, "waiting for the inbox stream; run herald setup if it never comes", "stream", bus.StreamInbox, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		cons, err = bus.BindConsumer(ctx, js, bus.StreamInbox, cfg, b.log)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = fmt.Errorf("%w: run `herald setup` to create Herald's streams", err)
	}
	if err != nil {
		return nil, fmt.Errorf("inbox of %s: %w", b.name, err)
	}
	// Keys are read and written by their subjects only: a butler may not
	// bind the buckets (that would let it list every butler's keys).
	requests := bus.NewDirectKV(js, bus.BucketRequests)
	status := bus.NewDirectKV(js, bus.BucketStatus)
	approvals := approval.New(bus.NewDirectKV(js, bus.BucketApprovals))
	return &channelSide{b: b, js: js, cons: cons, requests: requests, status: status, approvals: approvals,
		sessions: map[string]server.ClientSession{}, listening: map[string]int{}, spoke: map[string]*protocol{}, asked: map[string][]string{}, awaited: map[string]bool{}, verdicts: map[string]chan string{}, takes: map[string]bool{}, pushed: map[pushKey]time.Time{}, notRecorded: map[uint64]bool{}, wake: make(chan struct{}, 1)}, nil
}

// sessionCount is how many MCP sessions are open.
func (c *channelSide) sessionCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// hooks track which sessions can receive server-pushed notifications: stdio
// sessions, and streamable HTTP sessions while their GET stream is open.
func (c *channelSide) hooks() *server.Hooks {
	h := &server.Hooks{}
	h.AddOnRegisterSession(func(ctx context.Context, s server.ClientSession) {
		c.mu.Lock()
		c.sessions[s.SessionID()] = s
		if _, overHTTP := s.(server.SessionWithStreamableHTTPConfig); !overHTTP {
			c.takes[s.SessionID()] = true // stdio: every message is pushed
		}
		c.mu.Unlock()
		if runOf(ctx) != "" {
			c.b.runTools(s)
		}
		c.poke()
	})
	h.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) {
		c.mu.Lock()
		delete(c.sessions, s.SessionID())
		delete(c.spoke, s.SessionID())
		delete(c.takes, s.SessionID())
		open := c.asked[s.SessionID()]
		delete(c.asked, s.SessionID())
		c.mu.Unlock()
		// Its open prompts can no longer be answered: the switchboard
		// closes them on every approver's phone.
		for _, id := range open {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := c.approvals.SessionEnded(ctx, c.b.name, id); err != nil {
				c.b.log.Warn("a permission request of an ended session stays open until it expires", "request_id", id, "err", err)
			}
			cancel()
		}
	})
	h.AddAfterInitialize(func(context.Context, any, *mcp.InitializeRequest, *mcp.InitializeResult) { c.poke() })
	return h
}

func (c *channelSide) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// receiver is a session a notification can be pushed to, and the protocols
// it is pushed in.
type receiver struct {
	id        string
	protocols []*protocol
}

// receivers are the sessions a notification can be pushed to now: stdio and
// in-process sessions once initialized; streamable HTTP sessions only while
// their GET stream is open, since a notification sent to one without it waits
// in a buffer nobody reads and would be lost. A client without a GET stream
// (or on protocol 2026-07-28's discovery handshake, which has none and carries
// no custom notifications) takes its messages with the inbox tool. With
// channels.enabled false, or once the butler is retired, there are none:
// messages wait in the inbox.
func (c *channelSide) receivers() []receiver {
	if !c.b.config().Channels.On() || c.b.Retired() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []receiver
	for id, s := range c.sessions {
		_, overHTTP := s.(server.SessionWithStreamableHTTPConfig)
		if s.Initialized() && (!overHTTP || c.listening[id] > 0) {
			out = append(out, receiver{id, protocolsOf(s, c.spoke[id])})
		}
	}
	return out
}

// spoken records that session asked in protocol f: verdicts and messages go
// to it in that protocol from now on.
func (c *channelSide) spoken(session string, f *protocol) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.sessions[session]; ok {
		c.spoke[session] = f
	}
}

// protocolOf is the protocol session last asked for a permission in (Claude
// Code's if none).
func (c *channelSide) protocolOf(session string) *protocol {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.spoke[session]; f != nil {
		return f
	}
	return claudeProtocol
}

// trackStreams wraps the streamable HTTP handler to know which sessions have
// their GET stream open.
func (c *channelSide) trackStreams(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(server.HeaderKeySessionID)
		// A run's Claude Code reads no channel notifications: its messages
		// are its user turns (runner.go).
		if r.Method != http.MethodGet || id == "" || runOf(r.Context()) != "" {
			h.ServeHTTP(w, r)
			return
		}
		c.mu.Lock()
		c.listening[id]++
		if _, ok := c.sessions[id]; ok {
			c.takes[id] = true
		}
		c.mu.Unlock()
		c.poke()
		defer func() {
			c.mu.Lock()
			if c.listening[id]--; c.listening[id] <= 0 {
				delete(c.listening, id)
			}
			c.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// run delivers the inbox to connected clients until ctx is done.
func (c *channelSide) run(ctx context.Context) error {
	for ctx.Err() == nil {
		if len(c.receivers()) == 0 && c.b.runner.settings() == nil {
			select {
			case <-c.wake:
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		c.pulling.Lock()
		msg, err := c.cons.Next(jetstream.FetchMaxWait(2 * time.Second))
		if err == nil {
			// Held in progress while pushed: killed meanwhile, the butler
			// hands it to its restart within bus.AckWait.
			done := bus.KeepInProgress(msg, bus.AckWait)
			c.push(ctx, msg)
			done()
		}
		c.pulling.Unlock()
		if err != nil && !idle(err) && ctx.Err() == nil {
			c.b.lastErr.Record(err)
			c.b.log.WarnContext(ctx, "reading the inbox", "err", err)
			time.Sleep(time.Second)
		}
	}
	return nil
}

// toRun gives a message no session takes to the runner: acked once the
// run has it (unread until the model answers, as a push is), handed back
// to wait while every run is busy or the run cannot take it yet.
func (c *channelSide) toRun(ctx context.Context, msg jetstream.Msg, v *channelMessage) {
	switch err := c.b.runner.take(ctx, v); {
	case errors.Is(err, errRunsFull):
		_ = msg.NakWithDelay(5 * time.Second)
		return
	case errors.Is(err, errHeldElsewhere):
		_ = msg.NakWithDelay(time.Second) // to be handed to the process that runs it
		return
	case errors.Is(err, errNotStarted):
		_ = msg.NakWithDelay(30 * time.Second)
		return
	case err != nil:
		c.b.log.WarnContext(ctx, "inbox message not given to a run yet", "request_id", v.Meta["request_id"], "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	if err := c.addUnread(ctx, streamSeq(msg), v); err != nil {
		c.b.log.WarnContext(ctx, "inbound message given to the run but not recorded unread", "request_id", v.Meta["request_id"], "err", err)
	}
	_ = msg.Ack()
	c.signal(bus.TypingStart, v.Meta["request_id"])
}

// idle reports whether err only means the inbox was empty for a while.
func idle(err error) bool {
	return errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
}

// channelMessage is one message as the model sees it.
type channelMessage struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
	// claim tags the session that claimed the conversation (claim_thread),
	// if one did; it is not shown to the model.
	claim string
	// notice says it is Herald's word about a notify, not a person's
	// message: it has no record to reply to.
	notice bool
	// in is the message as it came, for the runner's conversation key.
	in *envelope.Ingress
}

// take decodes an inbox message, remembers it so reply and react can answer
// it, and returns what the model sees; verdicts are handled here and return nil.
func (c *channelSide) take(ctx context.Context, msg jetstream.Msg) (*channelMessage, error) {
	r, err := envelope.DecodeTrustedRoute(msg.Data())
	if err != nil || r.Input.Context.Ingress == nil || r.Target.Butler != c.b.name {
		return nil, fmt.Errorf("%w: not an inbound route for %s: %w", envelope.ErrValidation, c.b.name, err)
	}
	in := r.Input.Context.Ingress
	if id := in.Meta[envelope.MetaPermissionRequestID]; id != "" {
		return nil, c.verdict(in)
	}
	if in.Meta[envelope.MetaKind] == envelope.KindAnswer {
		taken, err := c.answerTaken(ctx, in.Meta[envelope.MetaQuestionID])
		if err != nil {
			return nil, err
		}
		if taken {
			return nil, nil // the ask call waiting for it returns it, or did
		}
	}
	if envelope.IsNotice(in) {
		// Herald's word about a notify: nothing to reply to.
		v := view(in)
		v.notice = true
		return v, nil
	}
	c.quote(ctx, in)
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	if _, err := c.requests.Put(ctx, c.b.name+"."+in.RequestContext.RequestID, b); err != nil {
		return nil, fmt.Errorf("%w: remembering request: %w", envelope.ErrTargetUnavailable, err)
	}
	c.heard(ctx, in)
	return view(in), nil
}

// view is the notification payload: content and meta. Claude Code and
// nexo-rs write every meta key as an attribute of the <channel
// source="<server>"> tag they give the model and silently drop a key that
// is not an identifier (a letter or _ first, then letters, digits, _), so
// only those are kept; their own source attribute names the MCP server, so
// Herald's source (telegram, email, ...) is source_channel, and no key is
// source.
func view(in *envelope.Ingress) *channelMessage {
	meta := map[string]string{}
	for k, v := range in.Meta {
		if identifier(k) && k != "source" && !strings.HasPrefix(k, "permission_") && k != envelope.MetaClaimSession {
			meta[k] = v
		}
	}
	typ, _, _ := strings.Cut(in.RequestContext.SourceChannel, ":")
	meta["request_id"] = in.RequestContext.RequestID
	meta[MetaSourceChannel] = typ
	meta["integration"] = in.IntegrationID
	if meta["user_id"] == "" {
		meta["user_id"] = in.RequestContext.SourceSenderIdentity
	}
	if meta["ts"] == "" {
		if t, err := time.Parse(time.RFC3339Nano, in.RequestContext.ReceivedAt); err == nil {
			meta["ts"] = fmt.Sprint(t.Unix())
		}
	}
	content := in.Content.Text
	if files := attachmentsLine(in.Attachments); files != "" {
		meta[MetaAttachments], meta[MetaAttachmentCount] = files, strconv.Itoa(len(in.Attachments))
		if strings.TrimSpace(content) == "" {
			// A photo without a caption is never an empty message.
			content = "(no text; attached: " + files + ")"
		}
	}
	return &channelMessage{Content: content, Meta: meta, claim: in.Meta[envelope.MetaClaimSession], in: in}
}

// Meta of a message that came with files: each file's name, type and size
// on one line, and how many.
const (
	MetaAttachments     = "attachments"
	MetaAttachmentCount = "attachment_count"
)

// attachmentsLine is what the model reads of files: "photo.jpg
// (image/jpeg, 183 KB); voice.ogg (audio/ogg, 12 KB, 12 s)"; "" for none.
func attachmentsLine(files []envelope.Attachment) string {
	parts := make([]string, 0, len(files))
	for _, f := range files {
		if f.Seconds > 0 {
			parts = append(parts, fmt.Sprintf("%s (%s, %s, %d s)", f.Name, f.Mime, bus.Bytes(f.Size), f.Seconds))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (%s, %s)", f.Name, f.Mime, bus.Bytes(f.Size)))
	}
	return strings.Join(parts, "; ")
}

// claimHold is how long a message of a claimed conversation waits for the
// claiming session while that session is open but cannot take it (an HTTP
// client between two GET streams, or one that takes messages with the
// inbox tool); then the butler's other sessions get it. A session that has
// ended hands its messages on at once. It is short because the inbox keeps
// order: the butler's later messages wait behind the held one.
const claimHold = 10 * time.Second

// claimants narrows receivers rs to the session that claimed a message's
// conversation. held reports that the message should wait for that session
// instead: it is open but cannot take it now, and the message is younger
// than claimHold. With no such session, rs is returned whole.
func (c *channelSide) claimants(rs []receiver, v *channelMessage, age time.Duration) (out []receiver, held bool) {
	if v.claim == "" {
		return rs, false
	}
	for _, r := range rs {
		if c.b.tag(r.id) == v.claim {
			return []receiver{r}, false
		}
	}
	if c.open(v.claim) && age < claimHold {
		return nil, true
	}
	return rs, false
}

// open reports whether the session tagged tag is registered and takes
// messages: it has had a stream open, or used the inbox tool. A session
// that only calls tools takes none, so its claims pass to the others.
func (c *channelSide) open(tag string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.sessions {
		if c.takes[id] && c.b.tag(id) == tag {
			return true
		}
	}
	return false
}

// taking records that session takes messages (open reads it).
func (c *channelSide) taking(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.sessions[session]; ok {
		c.takes[session] = true
	}
}

// ageOf is how long msg has been in the inbox.
func ageOf(msg jetstream.Msg) time.Duration {
	md, err := msg.Metadata()
	if err != nil {
		return 0
	}
	return time.Since(md.Timestamp)
}

// pushKey is one inbox message (its stream sequence, the same in every
// redelivery) pushed to one session.
type pushKey struct {
	session string
	seq     uint64
}

// pushedKeep is how long a push is remembered: far longer than a message
// is redelivered after an ack that was lost (bus.AckWait, a NATS election).
const pushedKeep = 2 * time.Minute

func streamSeq(msg jetstream.Msg) uint64 {
	md, err := msg.Metadata()
	if err != nil {
		return 0
	}
	return md.Sequence.Stream
}

// pushedBefore reports whether message seq was pushed to session already.
func (c *channelSide) pushedBefore(session string, seq uint64) bool {
	if seq == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pushed[pushKey{session, seq}]
	return ok
}

// markPushed remembers that message seq was pushed to session, and forgets
// pushes older than pushedKeep.
func (c *channelSide) markPushed(session string, seq uint64) {
	if seq == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if now.Sub(c.prunedAt) > time.Minute {
		for k, at := range c.pushed {
			if now.Sub(at) > pushedKeep {
				delete(c.pushed, k)
			}
		}
		c.prunedAt = now
	}
	c.pushed[pushKey{session, seq}] = now
}

// unrecorded reports whether message seq was pushed but not yet put on
// the unread list; with mark, it notes that it was not.
func (c *channelSide) unrecorded(seq uint64, mark bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if mark {
		c.notRecorded[seq] = true
	}
	return c.notRecorded[seq]
}

// recorded notes that message seq is on the unread list.
func (c *channelSide) recorded(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.notRecorded, seq)
}

// push sends one inbox message to every session that can receive it; acked
// once at least one took it, otherwise handed back to wait.
func (c *channelSide) push(ctx context.Context, msg jetstream.Msg) {
	v, err := c.take(ctx, msg)
	switch {
	case errors.Is(err, errElsewhere):
		c.settleElsewhere(ctx, msg)
		return
	case errors.Is(err, envelope.ErrValidation):
		c.b.log.ErrorContext(ctx, "dropping an undecodable inbox message", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	case err != nil:
		c.b.log.WarnContext(ctx, "inbox message not delivered yet", "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	case v == nil: // a verdict, already handled
		_ = msg.Ack()
		return
	}
	rs, held := c.claimants(c.receivers(), v, ageOf(msg))
	if held {
		// The session that claimed the conversation is open: it takes it
		// when its stream is back or with the inbox tool.
		_ = msg.NakWithDelay(time.Second)
		return
	}
	if len(rs) == 0 && !v.notice && c.b.runner.settings() != nil {
		c.toRun(ctx, msg, v)
		return
	}
	seq := streamSeq(msg)
	sent := 0
	fresh := 0 // the sessions pushed it now
	for _, r := range rs {
		if c.pushedBefore(r.id, seq) {
			// A redelivery of a message this session has, recorded unread
			// then (its ack was lost: a NATS node killed, a kill of this
			// process before the ack came to nothing): not pushed twice,
			// nor put back on the unread list if the model answered it.
			sent++
			continue
		}
		took := false
		for _, f := range r.protocols {
			params := map[string]any{"content": v.Content, "meta": v.Meta}
			if err := c.b.mcp.SendNotificationToSpecificClient(r.id, f.message, params); err != nil {
				c.b.log.WarnContext(ctx, "channel notification not sent", "session", r.id, "protocol", f.name, "err", err)
				continue
			}
			took = true
		}
		if took {
			sent++
			fresh++
			c.markPushed(r.id, seq)
		}
	}
	if sent == 0 {
		_ = msg.Nak()
		return
	}
	// Pushed is not yet seen: unread until the model acts on it or takes
	// it with inbox (unread.go). A push that could not be recorded (a KV
	// write lost to a NATS election) is recorded when the message comes
	// back, and not pushed again: the session has it.
	record := fresh > 0 || c.unrecorded(seq, false)
	if record {
		if err := c.addUnread(ctx, seq, v); err != nil {
			c.unrecorded(seq, true)
			c.b.log.WarnContext(ctx, "inbound message pushed but not recorded unread yet; recorded when it comes back, not pushed again", "request_id", v.Meta["request_id"], "err", err)
			_ = msg.NakWithDelay(time.Second)
			return
		}
		c.recorded(seq)
	}
	if v.claim != "" && len(rs) > 1 {
		c.b.log.InfoContext(ctx, "the session that claimed this conversation is gone or silent; the butler's other sessions got its message", "request_id", v.Meta["request_id"])
	}
	c.b.log.InfoContext(ctx, "inbound message pushed to the model's sessions; unread until the model answers it or takes it with inbox", "request_id", v.Meta["request_id"], "source_channel", v.Meta[MetaSourceChannel], "sessions", sent)
	_ = msg.Ack()
	if record && !v.notice && v.Meta[envelope.MetaKind] != envelope.KindAnswer {
		c.signal(bus.TypingStart, v.Meta["request_id"])
	}
}

// verdict passes an approver's answer to the session that asked, in the
// protocol it asked in.
// await marks question id as waited for by an ask call, or not.
func (c *channelSide) await(id string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.awaited[id] = true
	} else {
		delete(c.awaited, id)
	}
}

// answerTaken reports whether question id's answer is an ask call's: one
// waiting for it now, or one that returned it (its record says so, for
// this process or one before it).
func (c *channelSide) answerTaken(ctx context.Context, id string) (bool, error) {
	c.mu.Lock()
	awaited := c.awaited[id]
	c.mu.Unlock()
	if awaited || !approval.QuestionIDPattern.MatchString(id) {
		return awaited, nil
	}
	q, err := c.approvals.Question(ctx, c.b.name, id)
	switch {
	case errors.Is(err, approval.ErrUnknown):
		return false, nil // gone (expired long ago): the message tells it
	case err != nil:
		return false, fmt.Errorf("%w: reading question %s: %w", envelope.ErrTargetUnavailable, id, err)
	}
	return !q.ReturnedAt.IsZero(), nil
}

// opened records that session asked permission request id.
func (c *channelSide) opened(session, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked[session] = append(c.asked[session], id)
}

// answered forgets session's permission request id.
func (c *channelSide) answered(session, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked[session] = slices.DeleteFunc(c.asked[session], func(x string) bool { return x == id })
	if len(c.asked[session]) == 0 {
		delete(c.asked, session)
	}
}

func (c *channelSide) verdict(in *envelope.Ingress) error {
	id, behavior, tag := in.Meta[envelope.MetaPermissionRequestID], in.Meta[envelope.MetaPermissionBehavior], in.Meta[envelope.MetaPermissionSession]
	if c.answerWaiting(id, behavior) {
		return nil
	}
	session, ok := c.tagged(tag)
	if !ok {
		return errElsewhere
	}
	c.answered(session, id)
	err := c.b.mcp.SendNotificationToSpecificClient(session, c.protocolOf(session).answer, map[string]any{"request_id": id, "behavior": behavior})
	if err != nil {
		c.b.log.Warn("permission verdict not delivered: the asking session is gone", "request_id", id, "err", err)
		return nil
	}
	c.b.log.Info("permission verdict delivered", "request_id", id, "behavior", behavior)
	return nil
}

// errElsewhere: a verdict for a session this process does not hold. Another
// process of the butler (a second stdio run) may: it is handed back for a
// while (settleElsewhere).
var errElsewhere = errors.New("a verdict for a session of another process")

// tagged is the id of the session whose tag is tag, if this process holds it.
func (c *channelSide) tagged(tag string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.sessions {
		if c.b.tag(id) == tag {
			return id, true
		}
	}
	return "", false
}

// settleElsewhere hands a verdict for another process's session back, to
// be taken there, while it is younger than claimHold; then its session is
// taken as gone, and it is dropped.
func (c *channelSide) settleElsewhere(ctx context.Context, msg jetstream.Msg) {
	if ageOf(msg) < claimHold {
		_ = msg.NakWithDelay(time.Second)
		return
	}
	c.b.log.WarnContext(ctx, "permission verdict not delivered: no process of this butler holds the session that asked", "subject", msg.Subject())
	_ = msg.Ack()
}

// pending takes up to max waiting messages at once, for the inbox tool of
// session: the unread ones first (pushed before, not acted on), then those
// never pushed; a message of a conversation another open session claimed
// is left for that one (claimants).
func (c *channelSide) pending(ctx context.Context, session string, max int) ([]*channelMessage, error) {
	c.taking(session)
	c.pulling.Lock()
	defer c.pulling.Unlock()
	out, err := c.takeUnread(ctx, max)
	if err != nil {
		return out, err
	}
	first := 2 * time.Second
	if len(out) > 0 {
		first = 300 * time.Millisecond
	}
	for wait := first; len(out) < max; wait = 300 * time.Millisecond {
		msg, err := c.cons.Next(jetstream.FetchMaxWait(wait))
		if err != nil {
			break
		}
		done := bus.KeepInProgress(msg, bus.AckWait)
		v, err := c.take(ctx, msg)
		done()
		switch {
		case errors.Is(err, errElsewhere):
			c.settleElsewhere(ctx, msg)
		case errors.Is(err, envelope.ErrValidation):
			_ = msg.Term()
		case err != nil:
			_ = msg.Nak()
			return out, err
		case v != nil && v.claim != "" && v.claim != c.b.tag(session) && c.open(v.claim):
			_ = msg.NakWithDelay(time.Second)
		default:
			_ = msg.Ack()
			if v != nil {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// request returns the inbound message request_id, if this butler received it.
func (c *channelSide) request(ctx context.Context, requestID string) (*envelope.Ingress, error) {
	if strings.ContainsAny(requestID, ".*> ") || requestID == "" {
		return nil, fmt.Errorf("%w: request_id %q is not one of your inbound messages", envelope.ErrValidation, requestID)
	}
	e, err := c.requests.Get(ctx, c.b.name+"."+requestID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: request_id %q is not one of your inbound messages; use the request_id from the message's meta", envelope.ErrNotFound, requestID)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)
	}
	var in envelope.Ingress
	if err := json.Unmarshal(e.Value(), &in); err != nil {
		return nil, fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	return &in, nil
}
