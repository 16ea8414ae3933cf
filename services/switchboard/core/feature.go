package core

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/obs"
)

// A Feature is one human-in-the-loop feature of the switchboard (a note
// that must be seen, quiet hours, a claimed thread, a permission prompt, a
// question). The core calls every feature, in the order they are listed,
// at four fixed points; docs/extending.md says how to add one.
type Feature interface {
	// Name tells the feature's outcomes apart: a delivery it follows
	// comes back to its Outcome only.
	Name() string
	// Outbound sees a notify once the core has checked who sends it and
	// where it goes. It may change it (add buttons), follow its outcome
	// (d.Follow), or take it (held: the feature answered the butler
	// itself, and nothing goes to the messenger). An error refuses it.
	Outbound(ctx context.Context, d *Outbound) (taken bool, err error)
	// Outcome sees the outcome of a delivery it followed, and of every
	// route refused (o.Refused) whoever followed it.
	Outcome(ctx context.Context, o *Outcome) error
	// Inbound sees a message a person sent, once it is let in. Taken, it
	// goes no further (a tap on a button); else it goes on to the next
	// feature and then to m.Butler.
	Inbound(ctx context.Context, m *Inbound) (taken bool, err error)
	// Tick runs every TickEvery, for the work a clock starts (expiry,
	// escalation, digests).
	Tick(ctx context.Context, now time.Time)
}

// LinkTaker is a feature that takes messages whose credential is a link's
// token rather than their sender (an acknowledge link, envelope.EventAckLink).
// Such a message skips the sender's checks, so it goes to these features
// only, never to Inbound or a butler.
type LinkTaker interface {
	Link(ctx context.Context, m *Inbound) error
}

// TickEvery is how often Tick runs.
const TickEvery = 2 * time.Second

// New makes a feature from the switchboard's stores.
type New func(ctx context.Context, env *Env) (Feature, error)

// Outbound is a notify on its way to the messenger.
type Outbound struct {
	Butler      string
	Route       *envelope.Route
	Notify      *envelope.Notify // Route.Notify()
	Integration *config.Integration
	Key         string // the delivery's idempotency key
	follow      []string
	awaited     *Copy
}

// Follow asks for the delivery's outcome to come back to the feature
// named (its Outcome).
func (d *Outbound) Follow(name string) {
	if !slices.Contains(d.follow, name) {
		d.follow = append(d.follow, name)
	}
}

// Followed reports whether a feature follows the delivery: something about
// it waits for an answer, so it must go out now.
func (d *Outbound) Followed() bool { return len(d.follow) > 0 }

// Await marks the delivery's copy as on its way to chat until its outcome
// comes back: a reply to it there may come first, and waits for it
// (Copies). It follows nothing by itself.
func (d *Outbound) Await(chat string) {
	d.awaited = &Copy{Channel: d.Integration.Channel(), Chat: chat, RequestID: d.Route.RequestContext.RequestID}
}

// Outcome is a delivery's outcome, as the core relays it to its butler.
type Outcome struct {
	Butler    string
	RequestID string
	// Response is what the messenger answered (nil: it never reached
	// the messenger, or failed before).
	Response *envelope.NotifyResponse
	// Refused: the route was refused before it reached the messenger.
	Refused bool
	told    []string
}

// Tell adds a sentence to what the butler is told of a failed delivery.
func (o *Outcome) Tell(sentence string) { o.told = append(o.told, sentence) }

// Inbound is a message a person sent, let in.
type Inbound struct {
	Integration *config.Integration
	Msg         *envelope.Ingress
	// Butler is whom it goes to if no feature takes it: by binding, or
	// the butler's forum topic. A feature may change it (a claimed thread).
	Butler string
	// Redelivered: it was handed out before (a try that stopped midway).
	Redelivered bool
}

// Env is what a feature is given: the switchboard's stores and writers, and
// the few things every feature does (tell a person, put a message on a
// butler's inbox, edit a copy Herald sent). It holds nothing of routing.
type Env struct {
	Config    *config.Config
	NC        *nats.Conn
	JS        jetstream.JetStream
	Log       *slog.Logger
	Audit     *audit.Writer
	Metrics   *obs.Metrics
	Ledger    *ledger.Ledger
	Approvals *approval.Store
	// Sessions is herald_sessions: threads' sessions and every feature's
	// records of its copies (PutJSON, GetJSON).
	Sessions jetstream.KeyValue
	// Requests are the inbound messages routed to butlers (RecordRouted).
	Requests jetstream.KeyValue
	// Copies are the copies on their way to a chat.
	Copies *Copies
}

// relayKinds is the relay header of the features d follows (bus.HeaderRelay).
func relayKinds(follow []string) string {
	s := slices.Clone(follow)
	slices.Sort(s)
	return strings.Join(s, ",")
}
