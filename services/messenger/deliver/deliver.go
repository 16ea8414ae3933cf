// Package deliver is the one small interface every channel implements, so that
// adding a channel touches one folder and one registration line (and its
// leaf package under pkg/channel).
//
// It also holds the plumbing every HTTP channel shares, so that a channel
// writes only what its provider says: NewClient (no redirect followed), a
// Caller making each call (the answer, or a *CallError with its status,
// Retry-After, unknown outcome and scrubbed texts), StatusClass, the
// Scrubber of secrets, and RateLimits waiting out 429s.
package deliver

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
)

// Delivery is one notify to carry out on one integration, with everything the
// switchboard resolved. Senders resolve the recipient themselves: Recipient if
// set, else (reply, react) the chat of Thread or the Sender, else the
// integration's default.
type Delivery struct {
	// Key is the idempotency key; email derives its Message-ID from it.
	Key       string
	Intent    string // send | reply | react
	Butler    string // origin_butler
	Recipient string
	Subject   string
	Message   string // markdown
	Emoji     string
	Urgency   string // low | normal | high
	Topic     string
	// Level is the notify's info | warn | error, where it gave one.
	Level string
	// Thread is request_context.source_thread_identity: Telegram
	// "<chat_id>:<message_id>", email Message-ID.
	Thread string
	// Sender is request_context.source_sender_identity.
	Sender string
	// Actions are buttons to show under the message, where the channel has
	// them; channels without buttons ignore them (the text says how to answer).
	Actions []envelope.Action

	// Files go with the message, each spooled to a local file whose bytes
	// match what the notify named (the channel opens Path).
	Files []File

	// Edit, if set, is the provider id of a message this integration sent
	// to Recipient (as its Receipt named it) that is to be replaced rather
	// than a new one sent: its text becomes Message and its buttons Actions
	// (none: a closed permission prompt). Senders that are not an Editor get such a
	// delivery as a new message.
	Edit string

	// Done holds the provider ids of the chunks an earlier attempt already
	// sent (an empty id: a chunk skipped as uncertain); a sender skips that
	// many chunks, so a retry never sends one twice.
	Done []string
	// Begin, if set, is called just before each provider call: it records
	// that the call is in flight. If it fails the call must not be made;
	// return its error.
	Begin func() error
	// Sent, if set, is called after each chunk is accepted by the provider, with
	// its id, so that progress is kept before the next chunk goes out.
	Sent func(messageID string) error
}

// File is one file of a delivery, checked and ready to send: Path holds
// its Size bytes, of MediaType (told from the bytes by the butler).
type File struct {
	Name      string
	Size      int64
	MediaType string
	SHA256    string
	Path      string
}

// Editor is a Sender that can replace a message it sent (Delivery.Edit):
// the text becomes the delivery's Message, in one message (what does not fit
// is cut), and its buttons become the delivery's Actions: none takes them
// away (a closed prompt), the same keeps them (a prompt still waiting for
// its quorum). Its Receipt names the edited message.
type Editor interface {
	Edit(ctx context.Context, d Delivery) (Receipt, error)
}

// Typer is a Sender that can show, in the chat of d (its Recipient, else
// the chat of its Thread, as a reply's), that the agent is writing: one
// call shows it for a few seconds (Telegram 5, Discord 10). Best effort:
// no ledger, no retry.
type Typer interface {
	Typing(ctx context.Context, d Delivery) error
}

// Fetcher is a Sender whose channel can fetch what people attached to
// their messages, with its credentials: Fetch writes the file a.Ref names
// to w as it comes (never whole in memory). A file the provider will not
// hand over (too big for its API) is an envelope.ErrValidation naming its
// limit; one it no longer has, envelope.ErrNotFound.
type Fetcher interface {
	Fetch(ctx context.Context, a envelope.Attachment, w io.Writer) error
}

// Calling is what a sender calls just before each provider call (Begin).
func (d *Delivery) Calling() error {
	if d.Begin == nil {
		return nil
	}
	return d.Begin()
}

// Receipt is what the provider accepted: one id per chunk (including Done).
type Receipt struct {
	MessageIDs []string
}

// Sender delivers to one integration. Errors wrap the envelope error classes
// (envelope.ErrValidation, ErrNotFound, ErrTargetUnavailable, ...) so the
// messenger knows whether to retry; *envelope.RetryAfterError carries a wait.
// envelope.ErrTimeout means exactly that the provider may have acted on the
// last call (OutcomeUnknown): the messenger then treats that call as
// uncertain. A call that cannot have reached the provider is never a
// timeout, however long it took to fail.
type Sender interface {
	Deliver(ctx context.Context, d Delivery) (Receipt, error)
}

// Closer is implemented by senders holding connections.
type Closer interface {
	Close() error
}

// Env is what a sender's or receiver's constructor gets besides its
// integration.
type Env struct {
	Getenv config.Getenv
	Logger *slog.Logger
	// JS gives receivers the bus's key-value buckets (leases, offsets).
	JS jetstream.JetStream
	// Instance names this messenger replica (for leases and status).
	Instance string
	// HTTP is where a receiver that is pushed to mounts its endpoints (nil
	// in tests that serve none).
	HTTP *HTTP
	// CallTimeout, if set, bounds every provider call in place of the
	// channel's own limit (an HTTP request with its answer; an SMTP command,
	// or the answer to a mail's end). The messenger leaves it zero; tests
	// shorten it to see what a call that gets no answer in time does.
	CallTimeout time.Duration
}

// Log is the channel's logger: Logger, or slog's default.
func (e Env) Log() *slog.Logger {
	if e.Logger == nil {
		return slog.Default()
	}
	return e.Logger
}

// Lookup resolves the integration's variables: Getenv, or one that finds
// none.
func (e Env) Lookup() config.Getenv {
	if e.Getenv == nil {
		return func(string) string { return "" }
	}
	return e.Getenv
}

// Timeout is CallTimeout, or def when it is not set.
func (e Env) Timeout(def time.Duration) time.Duration {
	if e.CallTimeout > 0 {
		return e.CallTimeout
	}
	return def
}

// Factory builds the sender of one integration.
type Factory func(in config.Integration, env Env) (Sender, error)
