// Package attention is the switchboard's notes that must be seen
// (docs/attention.md): a notify with ack_within must be seen. Its copy
// carries a "Got it" button (a line asking for a reply where the channel has
// no buttons); a tap there, or a reply to any copy, acknowledges it. Not
// acknowledged by its deadline, it is sent again through the next
// integration of its integration's escalate_to chain, marked as an
// escalation with the original time, until someone acknowledges it or the
// chain ends. The butler's model is told either way (a channel message with
// meta kind acknowledged or unacknowledged). Everything is kept in
// herald_sessions, and every switchboard looks for deadlines every
// core.TickEvery, changing a note by compare-and-set only: a restart, or a
// second switchboard, escalates nothing twice.
//
//	ack.<request_id>                            a note's state (ackNote)
//	ackreq.<request_id>                         a note's copy on its way: its note and chat
//	ackmsg.<integration>.<chat>.<message_id>    a sent copy: its note
//	acklink.<token>                             a mailed copy's acknowledge link
package attention

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/switchboard/core"
)

const (
	ackData   = "ack:"
	ackButton = "👀 Got it"
	// ackKeep is how long a note's record stays after it was acknowledged
	// or its chain ended, so a late tap is answered with what happened.
	ackKeep = 7 * 24 * time.Hour
)

// Reasons of the audit records of attention.
const (
	ReasonAcknowledged   = "acknowledged"
	ReasonEscalated      = "escalated"
	ReasonUnacknowledged = "unacknowledged"
)

// Meta of the butler's notices about a note.
const (
	MetaNoteRequestID  = "note_request_id"
	MetaNoteDeliveryID = "note_delivery_id"
	MetaAcknowledgedBy = "acknowledged_by"
	MetaEscalations    = "escalations"
)

// ackNote is a note that must be seen, and how far it got.
type ackNote struct {
	// ID is the note's delivery id (envelope.DeliveryID of its key): the
	// same notify called again with its idempotency_key is the same note.
	ID        string `json:"id"`
	Butler    string `json:"butler"`
	RequestID string `json:"request_id"` // the first call's
	Message   string `json:"message"`
	Subject   string `json:"subject,omitempty"`
	Urgency   string `json:"urgency,omitempty"`
	// Within is ack_within; Deadline when the current copy's time is up.
	Within   time.Duration `json:"within"`
	Deadline time.Time     `json:"deadline"`
	// First is the first copy's integration and when it was sent; Chain
	// the integrations it goes to next, Step how many of them it went to.
	First  string    `json:"first"`
	SentAt time.Time `json:"sent_at"`
	Chain  []string  `json:"chain,omitempty"`
	Step   int       `json:"step"`
	Copies []ackCopy `json:"copies,omitempty"`
	// Failed is why its first copy reached nobody (its delivery failed and
	// no message was sent): it went on through its chain at once, and what
	// is said of it later says so, not when it was first sent.
	Failed string `json:"failed,omitempty"`
	// Sent is how many escalations were handed to the messenger.
	Sent    int    `json:"sent,omitempty"`
	AckedBy string `json:"acked_by,omitempty"`
	Via     string `json:"via,omitempty"`
	// Done is when it was acknowledged or its chain ended; Told that its
	// butler was told so (and, acknowledged, its copies edited).
	Done  time.Time `json:"done,omitzero"`
	Ended bool      `json:"ended,omitempty"`
	Told  bool      `json:"told,omitempty"`
}

// ackCopy is one copy of a note: where it went, and as which message.
type ackCopy struct {
	Note      string `json:"note"`    // the note's id
	Channel   string `json:"channel"` // type:integration
	Chat      string `json:"chat"`
	RequestID string `json:"request_id"` // the notify that sent it
	MessageID string `json:"message_id,omitempty"`
	// Token is its acknowledge link's, if it has one (public_url).
	Token string `json:"token,omitempty"`
}

func ackKey(note string) string         { return "ack." + note }
func ackReqKey(requestID string) string { return "ackreq." + requestID }
func ackMsgKey(integration, chat, msg string) string {
	return "ackmsg." + integration + "." + bus.KeyToken(chat) + "." + bus.KeyToken(msg)
}

// Name is the attention's name in a delivery's relay header.
const Name = "ack"

// Feature is the notes that must be seen.
type Feature struct {
	env *core.Env
}

// New is the notes of env.
func New(_ context.Context, env *core.Env) (core.Feature, error) { return &Feature{env: env}, nil }

// Name is Name.
func (f *Feature) Name() string { return Name }

// Outbound makes a notify with ack_within one that must be seen (offerAck)
// and follows its outcome.
func (f *Feature) Outbound(ctx context.Context, d *core.Outbound) (bool, error) {
	ok, err := f.offerAck(ctx, d.Butler, d.Key, d.Integration, d.Route)
	if ok {
		d.Follow(Name)
		d.Await(core.ChatOf(d.Integration, d.Notify))
	}
	return false, err
}

// Outcome records a note's copy as sent, or sends the note on at once when
// its first copy reached nobody (ackSent).
func (f *Feature) Outcome(ctx context.Context, o *core.Outcome) error {
	onward, err := f.ackSent(ctx, o.RequestID, o.Response)
	if onward != "" {
		o.Tell(onward)
	}
	return err
}

// Inbound takes a message that acknowledges a note (acknowledged).
func (f *Feature) Inbound(ctx context.Context, m *core.Inbound) (bool, error) {
	return f.acknowledged(ctx, m.Integration, m.Msg)
}

// Link takes a click on an acknowledge link (ackLinked).
func (f *Feature) Link(ctx context.Context, m *core.Inbound) error {
	return f.ackLinked(ctx, m.Integration, m.Msg)
}

// Tick escalates the notes whose time is up (escalate).
func (f *Feature) Tick(ctx context.Context, now time.Time) { f.escalate(ctx, now) }

// offerAck makes a notify with ack_within one that must be seen: its
// record, its "Got it" button (or the line asking for a reply), and the
// check that every integration it may escalate to is the butler's. It
// reports whether it did: its outcome must come back (ackSent).
func (f *Feature) offerAck(ctx context.Context, butler, key string, it *config.Integration, r *envelope.Route) (bool, error) {
	n := r.Notify()
	for _, a := range n.Delivery.Actions {
		if strings.HasPrefix(a.Data, ackData) {
			return false, fmt.Errorf("%w: button data %q is Herald's own (acknowledging a note); a butler cannot send it", envelope.ErrForbidden, a.Data)
		}
	}
	if n.Delivery.AckWithin == "" {
		return false, nil
	}
	within, err := envelope.ParseAckWithin(n.Delivery.AckWithin)
	switch {
	case err != nil || within < envelope.MinAckWithin || within > envelope.MaxAckWithin:
		return false, fmt.Errorf("%w: ack_within %q must be between 30s and 7d", envelope.ErrValidation, n.Delivery.AckWithin)
	case n.Delivery.Intent == envelope.IntentReact:
		return false, fmt.Errorf("%w: ack_within is for a message (send or reply), not a reaction", envelope.ErrValidation)
	}
	chain := f.env.Config.EscalationChain(it.ID)
	for _, id := range chain {
		if !f.env.Config.Integration(id).Grants.Allows(butler) {
			return false, fmt.Errorf("%w: ack_within would escalate through %s (escalate_to of %s), which is not granted to %s; grant it or drop ack_within", envelope.ErrForbidden, id, it.ID, butler)
		}
	}
	id, requestID := envelope.DeliveryID(key), r.RequestContext.RequestID
	now := time.Now().UTC()
	note := ackNote{ID: id, Butler: butler, RequestID: requestID, Message: n.Delivery.Message, Subject: n.Delivery.Subject, Urgency: n.Delivery.Urgency,
		Within: within, Deadline: now.Add(within), First: it.Channel(), SentAt: now, Chain: chain}
	b, err := json.Marshal(note)
	if err != nil {
		return false, fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	// A route redelivered, or the same notify called again with its
	// idempotency_key, keeps the record its first made.
	if _, err := f.env.Sessions.Create(ctx, ackKey(id), b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return false, fmt.Errorf("%w: recording note %s: %w", envelope.ErrTargetUnavailable, id, err)
	}
	c := ackCopy{Note: id, Channel: it.Channel(), Chat: core.ChatOf(it, n), RequestID: requestID}
	if err := f.askForAck(ctx, it, &n.Delivery, &c); err != nil {
		return false, err
	}
	if err := f.env.PutJSON(ctx, ackReqKey(requestID), c); err != nil {
		return false, err
	}
	return true, nil
}

// askForAck puts the way to acknowledge a note under its copy c: the "Got
// it" button; where the channel has none, a line asking for a reply, and
// with public_url a link to acknowledge it (ackLink).
func (f *Feature) askForAck(ctx context.Context, it *config.Integration, d *envelope.Delivery, c *ackCopy) error {
	if ch, _ := config.ChannelOf(it.Type); ch.Buttons {
		d.Actions = append(d.Actions, envelope.Action{Label: ackButton, Data: ackData + c.Note})
		return nil
	}
	if !f.env.Config.AckLinks(it) {
		d.Message += "\n\nReply to this message to acknowledge it."
		return nil
	}
	token := newAckToken()
	if err := f.env.PutJSON(ctx, ackLinkKey(token), c); err != nil {
		return err
	}
	c.Token = token
	d.Message += "\n\nSeen it? Acknowledge it: " + AckLinkURL(f.env.Config.PublicURL, it.ID, token) + " (or reply to this message)."
	return nil
}

// Acknowledge links (public_url): the messenger serves GET and POST
// /ack/<integration>/<token>; a POST comes in as an ingress with meta
// event_type ack_link and ack_token, and acknowledges the note the token
// was made for (ackLinked). The token, 128 random bits, is the credential:
// whoever holds the mail may acknowledge it.
func ackLinkKey(token string) string { return "acklink." + token }

func newAckToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// AckLinkURL is the link that acknowledges a note by token, mailed through
// integration.
func AckLinkURL(publicURL, integration, token string) string {
	return strings.TrimSuffix(publicURL, "/") + "/ack/" + integration + "/" + token
}

// ackLinked handles a click on an acknowledge link: the note its token
// names is acknowledged in the name of the copy's recipient. An unknown
// token does nothing but the audit.
func (f *Feature) ackLinked(ctx context.Context, it *config.Integration, in *envelope.Ingress) error {
	token := in.Meta[envelope.MetaAckToken]
	var c ackCopy
	found := false
	if envelope.AckTokenPattern.MatchString(token) {
		var err error
		if found, err = f.env.GetJSON(ctx, ackLinkKey(token), &c); err != nil {
			return err
		}
	}
	if !found || c.Channel != it.Channel() {
		f.env.Refuse(ctx, in, it.Channel(), audit.Rejected, core.ReasonAckLinkUnknown)
		return nil
	}
	in.RequestContext.SourceSenderIdentity = c.Chat
	delete(in.Meta, "user")
	return f.acknowledge(ctx, it, in, c.Note)
}

// ackSent records a copy of a note as sent (so a reply to it acknowledges
// the note), and edits it at once if the note was acknowledged meanwhile.
// Sent or not, the copy (of a note, or of a question: no Note) is no longer
// on its way (copyOnItsWay): it is recorded first (a question's by
// copySent, which relay runs before), so a reply waiting for it
// (awaitCopy) finds it.
//
// It returns what the butler is to be told besides the outcome: a note's
// first copy that reached nobody goes on at once (firstCopyFailed).
func (f *Feature) ackSent(ctx context.Context, requestID string, nr *envelope.NotifyResponse) (string, error) {
	var c ackCopy
	if found, err := f.env.GetJSON(ctx, ackReqKey(requestID), &c); err != nil || !found {
		return "", err
	}
	onward := ""
	if c.Note != "" {
		if err := f.recordCopy(ctx, requestID, c, nr); err != nil {
			return "", err
		}
		var err error
		if onward, err = f.firstCopyFailed(ctx, c, nr); err != nil {
			return "", err
		}
	}
	return onward, nil
}

// firstCopyFailed handles a note whose first copy c reached nobody: nr says
// its delivery failed, and no message of it was sent. Nobody can
// acknowledge a message they never got, so waiting for its deadline helps
// no one: with an escalation chain the note goes on through it at once (the
// next escalate tick), its escalation saying the first copy could not be
// delivered; with none it ends here, and its butler, told the notify
// failed, is told nothing more about it. It returns what the butler is to
// be told besides the failure, so that it does not send the note again.
func (f *Feature) firstCopyFailed(ctx context.Context, c ackCopy, nr *envelope.NotifyResponse) (string, error) {
	if nr == nil || nr.Error == nil || (nr.Delivery != nil && len(nr.Delivery.MessageIDs) > 0) {
		return "", nil
	}
	now := time.Now().UTC()
	changed := false
	n, err := f.changeNote(ctx, c.Note, func(n *ackNote) bool {
		// A later step's copy, or a first copy after another was sent (the
		// same notify called again), is not the note's first word.
		if n.Step > 0 || n.Sent > 0 || len(n.Copies) > 0 || n.Failed != "" || !n.Done.IsZero() {
			return false
		}
		n.Failed = nr.Error.Message
		if len(n.Chain) == 0 {
			n.Done, n.Ended, n.Told = now, true, true
		} else {
			n.Deadline = now
		}
		changed = true
		return true
	})
	// An outcome relayed again (its first relay failed after the change)
	// is told the same, as long as the note has not gone on yet.
	if err != nil || n == nil || !changed && (n.Failed == "" || n.Step > 0 || len(n.Copies) > 0) {
		return "", err
	}
	if len(n.Chain) == 0 {
		if changed {
			f.env.Log.InfoContext(ctx, "a note's first copy could not be delivered and it has no escalation chain; it ends here", "butler", n.Butler, "note_request_id", n.RequestID, "via", n.First)
		}
		return "", nil
	}
	next := n.Chain[0]
	if it := f.env.Config.Integration(next); it != nil {
		next = it.Channel()
	}
	if changed {
		f.env.Log.InfoContext(ctx, "a note's first copy could not be delivered; it goes on through its escalation chain at once", "butler", n.Butler, "note_request_id", n.RequestID, "via", n.First, "next", next)
	}
	return fmt.Sprintf("It must be seen (ack_within), so Herald sends it on at once through %s, as an escalation: do not send it again", next), nil
}

// recordCopy records copy c of a note as the message nr says it was sent
// as, if it was sent.
func (f *Feature) recordCopy(ctx context.Context, requestID string, c ackCopy, nr *envelope.NotifyResponse) error {
	if nr == nil || nr.Status != envelope.StatusOK || nr.Delivery == nil {
		return nil
	}
	for i := len(nr.Delivery.MessageIDs) - 1; i >= 0 && c.MessageID == ""; i-- {
		c.MessageID = nr.Delivery.MessageIDs[i]
	}
	if c.MessageID == "" {
		return nil
	}
	_, integration, _ := strings.Cut(c.Channel, ":")
	if err := f.env.PutJSON(ctx, ackMsgKey(integration, c.Chat, c.MessageID), c.Note); err != nil {
		return err
	}
	n, err := f.changeNote(ctx, c.Note, func(n *ackNote) bool {
		if slices.ContainsFunc(n.Copies, func(x ackCopy) bool { return x.RequestID == requestID }) {
			return false
		}
		n.Copies = append(n.Copies, c)
		n.Failed = "" // a copy reached someone after all
		return true
	})
	if err != nil || n == nil || n.AckedBy == "" {
		return err
	}
	return f.editNoteCopy(ctx, n, c)
}

// changeNote applies change to note id by compare-and-set, retrying on a
// race, and returns the note as it stands (nil if there is none). change
// reports whether it changed anything.
func (f *Feature) changeNote(ctx context.Context, id string, change func(*ackNote) bool) (*ackNote, error) {
	for range 10 {
		e, err := f.env.Sessions.Get(ctx, ackKey(id))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading note %s: %w", envelope.ErrTargetUnavailable, id, err)
		}
		var n ackNote
		if err := json.Unmarshal(e.Value(), &n); err != nil {
			return nil, fmt.Errorf("%w: note %s: %w", envelope.ErrInternal, id, err)
		}
		if !change(&n) {
			return &n, nil
		}
		b, err := json.Marshal(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", envelope.ErrInternal, err)
		}
		if _, err := f.env.Sessions.Update(ctx, ackKey(id), b, e.Revision()); err == nil {
			return &n, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("%w: writing note %s: %w", envelope.ErrTargetUnavailable, id, err)
		}
	}
	return nil, fmt.Errorf("%w: note %s: too many changes at once", envelope.ErrTargetUnavailable, id)
}

// acknowledged handles in if it acknowledges a note: a tap on "Got it"
// (done: never chat), or a reply to a copy (acknowledges, and goes on to
// the butler as the message it also is).
func (f *Feature) acknowledged(ctx context.Context, it *config.Integration, in *envelope.Ingress) (bool, error) {
	chats := core.ChatsOf(in)
	if id, ok := strings.CutPrefix(in.Meta["callback_data"], ackData); ok {
		_, found, err := f.copyOfNote(ctx, it, chats, id)
		if err != nil {
			return true, err
		}
		if !found {
			f.env.Refuse(ctx, in, it.Channel(), audit.Rejected, core.ReasonVerdictUnknownID)
			return true, f.env.Tell(ctx, it, in, "Note", "Herald: no note that needs acknowledging was sent to you here; nothing was passed on.")
		}
		return true, f.acknowledge(ctx, it, in, id)
	}
	// A reaction acknowledges a note and goes no further; a reply
	// acknowledges it and goes on to the butler as the message it is.
	reaction := in.Meta[envelope.MetaEventType] == envelope.EventReaction
	replyTo := core.RepliedTo(in)
	if replyTo == "" {
		return false, nil
	}
	id, found, err := f.noteOfCopy(ctx, it, chats, replyTo)
	switch {
	case err != nil:
		return true, err
	case !found && reaction:
		f.env.Refuse(ctx, in, it.Channel(), audit.Dropped, core.ReasonReactionIgnored)
		return true, nil
	case !found:
		return false, nil
	}
	return reaction, f.acknowledge(ctx, it, in, id)
}

// noteOfCopy is the note whose copy in one of chats is message msg.
func (f *Feature) noteOfCopy(ctx context.Context, it *config.Integration, chats []string, msg string) (id string, found bool, err error) {
	for _, chat := range chats {
		if found, err = f.env.GetJSON(ctx, ackMsgKey(it.ID, chat, msg), &id); err != nil || found {
			return id, found, err
		}
	}
	return "", false, nil
}

// copyOfNote reports whether note id has a copy in one of chats.
func (f *Feature) copyOfNote(ctx context.Context, it *config.Integration, chats []string, id string) (string, bool, error) {
	var n ackNote
	found, err := f.env.GetJSON(ctx, ackKey(id), &n)
	if err != nil || !found {
		return "", false, err
	}
	return id, slices.ContainsFunc(n.Copies, func(c ackCopy) bool { return c.Channel == it.Channel() && slices.Contains(chats, c.Chat) }), nil
}

// acknowledge records that the sender of in saw note id: once. Every copy
// is edited to say who saw it and where, and the butler is told (finish).
// A later tap is told who was first.
func (f *Feature) acknowledge(ctx context.Context, it *config.Integration, in *envelope.Ingress, id string) error {
	who := core.Who(in)
	n, err := f.changeNote(ctx, id, func(n *ackNote) bool {
		if n.AckedBy != "" {
			return false
		}
		n.AckedBy, n.Via, n.Done = who, it.Channel(), time.Now().UTC()
		return true
	})
	if err != nil || n == nil {
		return err
	}
	if n.AckedBy != who || n.Via != it.Channel() || n.Told {
		if in.Meta["callback_data"] != "" {
			return f.env.Tell(ctx, it, in, "Note", "Herald: this note was acknowledged already, by "+n.AckedBy+" via "+n.Via+".")
		}
		return nil
	}
	return f.finish(ctx, n)
}

// finish tells a note's butler how it ended, once, and edits its copies if
// it was acknowledged. Every step is keyed, so running it again (a
// redelivered tap, the next look for deadlines after a crash) repeats none.
func (f *Feature) finish(ctx context.Context, n *ackNote) error {
	// Its audit record is stored before the note is marked told: killed
	// in between, the next look tells again and writes the record again.
	confirms := &bus.Confirms{Soon: true}
	ctx = bus.WithConfirms(ctx, confirms)
	if n.AckedBy != "" {
		for _, c := range n.Copies {
			if err := f.editNoteCopy(ctx, n, c); err != nil {
				return err
			}
		}
		if err := f.tellButler(ctx, n, envelope.KindAcknowledged, n.Via,
			fmt.Sprintf("%s acknowledged your note (request_id %s) via %s.", n.AckedBy, n.RequestID, n.Via), map[string]string{MetaAcknowledgedBy: n.AckedBy}); err != nil {
			return err
		}
		f.env.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: n.Butler, Channel: n.Via, RequestID: n.RequestID, Reason: ReasonAcknowledged})
		f.env.Log.InfoContext(ctx, "note acknowledged", "butler", n.Butler, "note_request_id", n.RequestID, "by", n.AckedBy, "via", n.Via)
	} else {
		text := fmt.Sprintf("Nobody acknowledged your note (request_id %s), sent %s via %s", n.RequestID, n.SentAt.Format(time.RFC3339), n.First)
		if n.Failed != "" {
			text = fmt.Sprintf("Nobody acknowledged your note (request_id %s), which could not be delivered via %s at %s (%s)", n.RequestID, n.First, n.SentAt.Format(time.RFC3339), n.Failed)
		}
		if n.Step > 0 {
			text += " and escalated through " + strings.Join(n.Chain[:n.Step], ", ")
		}
		if err := f.tellButler(ctx, n, envelope.KindUnacknowledged, n.First, text+".", map[string]string{MetaEscalations: fmt.Sprint(n.Step)}); err != nil {
			return err
		}
		f.env.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: n.Butler, RequestID: n.RequestID, Reason: ReasonUnacknowledged})
		f.env.Log.InfoContext(ctx, "nobody acknowledged a note; its escalation chain ended", "butler", n.Butler, "note_request_id", n.RequestID, "escalations", n.Step)
	}
	if err := confirms.Wait(bus.ConfirmWait); err != nil {
		return err
	}
	_, err := f.changeNote(ctx, n.ID, func(n *ackNote) bool {
		was := n.Told
		n.Told = true
		return !was
	})
	return err
}

// editNoteCopy edits copy c of an acknowledged note to say who saw it, its
// button gone.
func (f *Feature) editNoteCopy(ctx context.Context, n *ackNote, c ackCopy) error {
	if c.MessageID == "" {
		return nil // edited when it is reported sent (ackSent)
	}
	body := n.Message
	if len(body) > 3000 {
		body, _, _ = strings.Cut(body, "\n")
	}
	subject := n.Subject
	if subject == "" {
		subject, _, _ = strings.Cut(n.Message, "\n")
	}
	return f.env.EditCopy(ctx, approval.Copy{Butler: n.Butler, ID: n.ID, Channel: c.Channel, Chat: c.Chat, Headline: body,
		RequestID: c.RequestID, MessageID: c.MessageID, Subject: "Re: " + subject}, "✅ seen by "+n.AckedBy+" via "+n.Via, nil, 0)
}

// tellButler puts a notice about note n on its butler's inbox: a channel
// message its model sees, once.
func (f *Feature) tellButler(ctx context.Context, n *ackNote, kind, channel, text string, meta map[string]string) error {
	notice := envelope.NewAttentionNotice(n.RequestID, kind, channel, text, meta)
	notice.Meta[MetaNoteRequestID] = n.RequestID
	notice.Meta[MetaNoteDeliveryID] = n.ID
	ir := envelope.NewInboundRoute(n.Butler, notice)
	b, err := json.Marshal(ir)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if _, err := bus.Publish(ctx, f.env.JS, bus.InboxSubject(n.Butler), b, kind+":"+n.ID, nil); err != nil {
		return fmt.Errorf("%w: telling butler %s about note %s: %w", envelope.ErrTargetUnavailable, n.Butler, n.RequestID, err)
	}
	return nil
}

// escalate looks for notes whose time is up: each goes to the next
// integration of its chain, or, at the chain's end, its butler is told
// nobody acknowledged it. What a crash left half done (an escalation not
// handed on, a butler not told) is done now; finished notes are forgotten
// after ackKeep.
func (f *Feature) escalate(ctx context.Context, now time.Time) {
	keys, err := f.env.Sessions.ListKeysFiltered(ctx, "ack.*")
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
			f.env.Log.WarnContext(ctx, "looking for notes to escalate", "err", err)
		}
		return
	}
	unhandled := f.unhandledInbound(ctx)
	for k := range keys.Keys() {
		id := strings.TrimPrefix(k, "ack.")
		n, err := f.changeNote(ctx, id, func(n *ackNote) bool {
			switch {
			case !n.Done.IsZero() || now.Before(n.Deadline):
				return false
			case now.Sub(n.Deadline) < tapGrace && unhandled().Before(n.Deadline):
				// What people sent before the deadline is not all handled
				// (a switchboard killed while holding it; a backlog): it
				// may be this note's tap. It is looked at first.
				return false
			case n.Step < len(n.Chain):
				n.Step++
				n.Deadline = now.Add(n.Within)
			default:
				n.Ended, n.Done = true, now
			}
			return true
		})
		if err == nil && n != nil && n.AckedBy == "" && n.Sent < n.Step {
			// The step is marked sent only once its audit record is stored:
			// killed before, the next look sends it again (one delivery, by
			// its key) and writes the record again.
			c := &bus.Confirms{Soon: true}
			if err = f.sendEscalation(bus.WithConfirms(ctx, c), n, n.Step); err == nil {
				err = c.Wait(bus.ConfirmWait)
			}
			if err == nil {
				step := n.Step
				_, err = f.changeNote(ctx, id, func(n *ackNote) bool {
					if n.Sent >= step {
						return false
					}
					n.Sent = step
					return true
				})
			}
		}
		if err == nil && n != nil && !n.Done.IsZero() && !n.Told {
			err = f.finish(ctx, n)
		}
		switch {
		case err != nil:
			f.env.Log.WarnContext(ctx, "a note's deadline passed and what follows is not done yet; tried again shortly", "note", id, "err", err)
		case n != nil && n.Told && now.Sub(n.Done) > ackKeep:
			for _, c := range n.Copies {
				_, integration, _ := strings.Cut(c.Channel, ":")
				_ = f.env.Sessions.Delete(ctx, ackMsgKey(integration, c.Chat, c.MessageID))
				_ = f.env.Sessions.Delete(ctx, ackReqKey(c.RequestID))
				if c.Token != "" {
					_ = f.env.Sessions.Delete(ctx, ackLinkKey(c.Token))
				}
			}
			_ = f.env.Sessions.Delete(ctx, k)
		}
	}
}

// tapGrace bounds how long an escalation waits, past its deadline, for the
// inbound messages stored before that deadline to be handled: longer than a
// killed switchboard's inbound message takes to come back (bus.AckWait) and
// its restart, short enough that a stuck inbound message (retried while a
// butler's inbox is unavailable) delays an escalation only so long.
const tapGrace = 15 * time.Second

// unhandledInbound returns a func that tells when the oldest inbound message
// not yet handled was stored (HERALD_INGRESS is a work queue: a handled
// message is gone); far in the future if there is none. It asks NATS once,
// the first time it is called: only a look that finds a note past its
// deadline pays for it. If NATS cannot say, it answers as if there were
// none: the escalation goes ahead as it did before this check.
func (f *Feature) unhandledInbound(ctx context.Context) func() time.Time {
	var (
		asked  bool
		oldest = time.Now().Add(ackKeep)
	)
	return func() time.Time {
		if asked {
			return oldest
		}
		asked = true
		st, err := f.env.JS.Stream(ctx, bus.StreamIngress)
		if err != nil {
			f.env.Log.DebugContext(ctx, "looking for inbound messages not yet handled", "err", err)
			return oldest
		}
		if info := st.CachedInfo(); info.State.Msgs > 0 {
			oldest = info.State.FirstTime
		}
		return oldest
	}
}

// sendEscalation sends note n through the step-th integration of its
// chain, marked as an escalation with the first copy's time. Its key makes
// it one delivery however often this runs.
func (f *Feature) sendEscalation(ctx context.Context, n *ackNote, step int) error {
	it := f.env.Config.Integration(n.Chain[step-1])
	if it == nil || it.Disabled {
		return fmt.Errorf("integration %s is gone from the configuration", n.Chain[step-1])
	}
	subject := n.Subject
	if subject == "" {
		subject, _, _ = strings.Cut(n.Message, "\n")
	}
	why := fmt.Sprintf("first sent %s via %s", n.SentAt.Format("2006-01-02 15:04 MST"), n.First)
	if n.Failed != "" {
		why = fmt.Sprintf("which could not be delivered via %s at %s (%s)", n.First, n.SentAt.Format("2006-01-02 15:04 MST"), n.Failed)
	}
	d := envelope.Delivery{
		Intent: envelope.IntentSend, Channel: it.Channel(), Recipient: it.DefaultRecipient(), Urgency: "high", Subject: "Escalation: " + subject,
		Message: fmt.Sprintf("⏰ Escalation: nobody has acknowledged this note from %s, %s.\n\n%s", n.Butler, why, n.Message),
	}
	c := ackCopy{Note: n.ID, Channel: it.Channel(), Chat: d.Recipient}
	if err := f.askForAck(ctx, it, &d, &c); err != nil {
		return err
	}
	note := envelope.NewNotify(n.Butler, d, nil)
	note.IdempotencyKey = fmt.Sprintf("escalation.%s.%d", n.ID, step)
	r := envelope.NewRoute(note)
	if err := envelope.Check(schemas.Route, r); err != nil {
		return fmt.Errorf("%w: escalating note %s: %w", envelope.ErrInternal, n.RequestID, err)
	}
	copyID := r.RequestContext.RequestID
	c.RequestID = copyID
	if err := f.env.PutJSON(ctx, ackReqKey(copyID), c); err != nil {
		return err
	}
	if _, err := f.env.Deliver(ctx, r, r.IdempotencyKey(), nil, &core.Copy{Channel: c.Channel, Chat: c.Chat, RequestID: copyID}, Name); err != nil {
		return fmt.Errorf("escalating note %s: %w", n.RequestID, err)
	}
	f.env.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: n.Butler, Channel: it.Channel(), Intent: envelope.IntentSend, Recipient: d.Recipient, RequestID: copyID, Reason: ReasonEscalated})
	f.env.Log.InfoContext(ctx, "note escalated: nobody acknowledged it in time", "butler", n.Butler, "note_request_id", n.RequestID, "to", it.Channel(), "step", step)
	return nil
}
