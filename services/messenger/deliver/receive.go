package deliver

import (
	"context"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
)

// Receiver takes what people send on one integration (Telegram updates,
// inbound mail, web chat posts) and hands each message to a Sink. It runs
// until ctx is done.
type Receiver interface {
	Receive(ctx context.Context, sink Sink) error
}

// Sink is where a receiver's messages go.
type Sink interface {
	// Ingress stores in durably on the bus (deduplicated by its NativeID);
	// once it returns nil the message cannot be lost, so only then may the
	// receiver confirm it to the provider (advance an offset, answer 250).
	Ingress(ctx context.Context, in *envelope.Ingress) error
	// Dropped records a message the receiver refused on arrival (an
	// auto-reply, a mail to a foreign domain) in the audit log, with a short
	// snake_case reason; in may be partly filled.
	Dropped(ctx context.Context, in *envelope.Ingress, reason string)
	// Status reports the receiver's health for channel_status.
	Status(s Status)
}

// Receiver states.
const (
	StateRunning  = envelope.ReceiverRunning
	StateStandby  = envelope.ReceiverStandby
	StateConflict = envelope.ReceiverConflict
	StateError    = envelope.ReceiverError
)

// Status is one receiver's health (envelope.ReceiverStatus: what a butler
// reads back).
type Status = envelope.ReceiverStatus

// ReceiverFactory builds the receiver of one integration; it returns nil, nil
// when the integration takes no inbound messages.
type ReceiverFactory func(in config.Integration, env Env) (Receiver, error)
