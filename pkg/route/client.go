// Package route is how a butler hands a notify to the switchboard and waits
// for the answer: publish route.v1 on herald.route.<butler> with its
// idempotency key, listen on herald.reply.<butler>.<request_id>, and if
// JetStream says the publish was a duplicate, answer from the delivery ledger.
package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
)

// ErrQueued means JetStream holds the route but no answer came in time: it is
// not lost, and will be delivered when the switchboard and messenger run.
var ErrQueued = errors.New("queued")

// Client sends routes.
type Client struct {
	NC      *nats.Conn
	JS      jetstream.JetStream
	Ledger  *ledger.Ledger
	Timeout time.Duration // default 30s
}

// Send publishes r and waits for its route_response. Errors: ErrQueued (held,
// no answer yet), or a classified error if the bus would not take it.
func (c *Client) Send(ctx context.Context, r *envelope.Route) (*envelope.RouteResponse, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding route: %v", envelope.ErrInternal, err)
	}
	butler, id, key := r.Target.Butler, r.RequestContext.RequestID, r.IdempotencyKey()
	replies := make(chan *nats.Msg, 1)
	sub, err := c.NC.ChanSubscribe(bus.ReplySubject(butler, id), replies)
	if err != nil {
		return nil, fmt.Errorf("%w: NATS: %v", envelope.ErrTargetUnavailable, err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	ack, err := bus.Publish(ctx, c.JS, bus.RouteSubject(butler), data, key, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: the bus did not accept the notification (%v); retry when NATS is reachable", envelope.ErrTargetUnavailable, err)
	}
	// A duplicate is the same notify again: its answer is, or will be, in the
	// ledger (or on the same reply subject, if it is the same route).
	fromLedger := make(chan *ledger.Record, 1)
	if ack.Duplicate && c.Ledger != nil {
		go func() {
			if rec, err := c.Ledger.Wait(ctx, butler, key); err == nil {
				fromLedger <- rec
			}
		}()
	}
	select {
	case m := <-replies:
		var resp envelope.RouteResponse
		if err := json.Unmarshal(m.Data, &resp); err != nil {
			return nil, fmt.Errorf("%w: undecodable answer: %v", envelope.ErrInternal, err)
		}
		return &resp, nil
	case rec := <-fromLedger:
		return envelope.Answer(r, rec.Response(id)), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: request_id %s", ErrQueued, id)
	}
}
