package core

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// The direct route (docs/decisions.md): a butler asks a switchboard over
// core NATS (herald.direct.<butler>) before it publishes a route to
// HERALD_ROUTE. A switchboard that routes it (stores it in HERALD_DELIVER,
// or holds it for quiet hours) answers bus.DirectRouted, and the route is
// stored once instead of twice. Anything else it answers, an error
// included, sends the butler to HERALD_ROUTE, where the route is retried,
// refused and audited as ever; a route that went both ways is one delivery.

// serveDirect answers direct routes with up to concurrency at once (0:
// bus.DefaultConcurrency, as HERALD_ROUTE's worker) until ctx ends; the
// switchboards share them (one queue group).
func (s *Core) serveDirect(ctx context.Context, concurrency int) (*nats.Subscription, error) {
	if concurrency <= 0 {
		concurrency = bus.DefaultConcurrency
	}
	work := make(chan *nats.Msg)
	for range concurrency {
		s.background.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case m := <-work:
					s.direct(ctx, m)
				}
			}
		})
	}
	sub, err := s.NC.QueueSubscribe(bus.DirectPrefix+"*", "switchboard", func(m *nats.Msg) {
		select {
		case work <- m:
		case <-ctx.Done():
			// Stopping: no answer sends the butler to the stream.
		}
	})
	if err != nil {
		return nil, err
	}
	// Once running, the server knows the subscription: a butler's next
	// direct route finds it. (Not connected now, it is sent on reconnect.)
	_ = s.NC.FlushTimeout(5 * time.Second)
	return sub, nil
}

// direct routes one direct route and answers whether it did.
func (s *Core) direct(ctx context.Context, m *nats.Msg) {
	ctx = envelope.WithTraceparent(ctx, m.Header.Get(envelope.HeaderTraceparent))
	butler := strings.TrimPrefix(m.Subject, bus.DirectPrefix)
	answer := &nats.Msg{Header: nats.Header{}}
	// Answered routed only once its records are stored: a switchboard
	// killed before leaves the butler to publish the route to
	// HERALD_ROUTE, where it is routed again (one delivery) and audited.
	confirms := &bus.Confirms{Soon: true}
	err := s.routeOne(bus.WithConfirms(ctx, confirms), butler, m.Subject, m.Data)
	if err == nil {
		err = unconfirmed(confirms.Wait(bus.ConfirmWait))
	}
	var unsure *deliverUnsure
	switch {
	case err == nil:
		answer.Header.Set(bus.HeaderDirect, bus.DirectRouted)
	case errors.As(err, &unsure):
		answer.Header.Set(bus.HeaderDirect, bus.DirectUnsure)
	default:
		answer.Header.Set(bus.HeaderDirect, bus.DirectNotRouted)
	}
	if err != nil {
		s.log.DebugContext(ctx, "a direct route was not taken; the butler publishes it to HERALD_ROUTE", "butler", butler, "err", err)
	}
	_ = m.RespondMsg(answer)
}

// deliverUnsure is a route's publish to HERALD_DELIVER that failed: it may
// still have been stored (a timeout), so a butler that cannot store the
// route in HERALD_ROUTE either must not say nothing was sent.
type deliverUnsure struct{ err error }

// unconfirmed is the error of a direct route whose records were not
// stored (bus.Confirms): the route itself was, so it is unsure.
func unconfirmed(err error) error {
	if err == nil {
		return nil
	}
	return &deliverUnsure{err}
}

func (e *deliverUnsure) Error() string { return e.err.Error() }
func (e *deliverUnsure) Unwrap() error { return e.err }
