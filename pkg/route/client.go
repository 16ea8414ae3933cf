// Package route is how a butler hands a notify to the switchboard and waits
// for the answer: routed at once over core NATS (herald.direct.<butler>), else
// published on herald.route.<butler> until JetStream stores it; the answer
// comes on herald.reply.<butler>.<request_id> (replies.go), or from the
// delivery ledger when JetStream says the publish was a duplicate.
//
//   - Client, Client.Send: send a route.v1 and wait for its route_response.v1.
//   - ErrQueued, ErrNotAccepted, ErrUnconfirmed: stored but unanswered; never
//     stored (safe to call again); perhaps stored (delivered at most once).
//   - DirectPause: how long direct routes rest after one went unanswered.
//
// Every answer is true: docs/reliability.md, "The answers a model gets, and
// what each one means", says what each one promises.
package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/obs"
)

var (
	// ErrQueued means JetStream stored the route, so it will be delivered
	// or the butler told it failed, but no answer came in time.
	ErrQueued = errors.New("queued")
	// ErrNotAccepted means the bus never had the route; it is wrapped with
	// envelope.ErrTargetUnavailable.
	ErrNotAccepted = errors.New("not accepted")
	// ErrUnconfirmed means no publish was confirmed in time though one may
	// have been stored; it is wrapped with envelope.ErrTimeout.
	ErrUnconfirmed = errors.New("NATS did not confirm it stored the notification")
)

// Client sends routes.
type Client struct {
	NC      *nats.Conn
	JS      jetstream.JetStream
	Ledger  *ledger.Ledger
	Timeout time.Duration // default 30s
	// Store, if set, counts the routes NATS did not store and says why in
	// the error when the process's probe finds NATS cannot store.
	Store *obs.StoreWatch
	// Log, if set, says when direct routes go unanswered (nil: slog's
	// default).
	Log *slog.Logger

	// directOff is when direct routes may be tried again after one went
	// unanswered (unix nanoseconds; 0: now).
	directOff atomic.Int64

	mu      sync.Mutex
	replies map[string]*replies // by butler: one subscription each
}

// Send publishes r until JetStream stores it and waits for its
// route_response. Errors: ErrQueued (stored; will be delivered or reported,
// no answer yet), ErrNotAccepted wrapped in a class (nothing was sent), or
// ErrUnconfirmed wrapped in envelope.ErrTimeout (at most once).
func (c *Client) Send(ctx context.Context, r *envelope.Route) (*envelope.RouteResponse, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if r.TraceContext != nil {
		// Its publishes carry the trace (header traceparent).
		ctx = envelope.WithTraceparent(ctx, r.TraceContext.Traceparent)
	}

	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding route: %w", envelope.ErrInternal, err)
	}
	butler, id, key := r.Target.Butler, r.RequestContext.RequestID, r.IdempotencyKey()
	n := r.Notify()
	keyed := n != nil && n.IdempotencyKey != "" && c.Ledger != nil
	if keyed {
		if resp, found, err := c.recorded(ctx, timeout/4, r, n, key); found {
			return resp, err
		}
	}
	rs, err := c.repliesFor(butler)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: NATS: %w", envelope.ErrTargetUnavailable, ErrNotAccepted, err)
	}
	replies, leave := rs.wait(id)
	defer leave()

	routed, unsure := c.direct(ctx, butler, data, min(bus.DirectWait, timeout/4))
	if routed {
		// Routed and stored: a repeat is answered from the ledger by the
		// switchboard, as the stream's duplicate would be.
		return awaitAnswer(ctx, r, replies, nil, keyed)
	}
	ack, maybe, err := c.publish(ctx, bus.RouteSubject(butler), data, key)
	if err != nil {
		return nil, c.notStored(err, maybe || unsure, id, timeout)
	}
	fromLedger := c.watchLedger(ctx, ack, butler, key)
	return awaitAnswer(ctx, r, replies, fromLedger, keyed)
}

// direct asks a switchboard to route data at once, over core NATS
// (herald.direct.<butler>), and reports whether one did: then the route is
// stored for the messenger, and "queued" is true of it as of one in
// HERALD_ROUTE. No switchboard, a refusal, an error or no answer within
// wait (bus.DirectWait, or a quarter of a shorter notify timeout, so that a
// route not answered is still stored and "queued"): Send publishes it to
// HERALD_ROUTE, where it is retried, refused and audited as ever, and a
// route that went both ways is still one delivery (the deliver stream's
// duplicate window, then the ledger).
// unsure reports that, not routed, it may still have been stored for the
// messenger (a switchboard took it and did not answer, or could not tell):
// then if HERALD_ROUTE does not take it either, the caller is not told
// nothing was sent.
func (c *Client) direct(ctx context.Context, butler string, data []byte, wait time.Duration) (routed, unsure bool) {
	if !c.NC.IsConnected() || time.Now().UnixNano() < c.directOff.Load() {
		return false, false
	}
	m := &nats.Msg{Subject: bus.DirectSubject(butler), Data: data, Header: nats.Header{}}
	if tp := envelope.Traceparent(ctx); tp != "" {
		m.Header.Set(envelope.HeaderTraceparent, tp)
	}
	dctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	resp, err := c.NC.RequestMsgWithContext(dctx, m)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return false, false
	case err != nil:
		if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
			c.directUnanswered(butler, err)
		}
		return false, true
	case resp.Header.Get(bus.HeaderDirect) == bus.DirectRouted:
		return true, false
	}
	return false, resp.Header.Get(bus.HeaderDirect) != bus.DirectNotRouted
}

// DirectPause is how long a butler routes through HERALD_ROUTE alone after a
// direct route went unanswered, so that a NATS that refuses its direct
// subject (permissions from before it) costs one notify bus.DirectWait a
// minute, not every notify.
const DirectPause = time.Minute

// directUnanswered pauses direct routes for DirectPause and says why.
func (c *Client) directUnanswered(butler string, err error) {
	c.directOff.Store(time.Now().Add(DirectPause).UnixNano())
	log := c.Log
	if log == nil {
		log = slog.Default()
	}
	why := ""
	if last := c.NC.LastError(); last != nil && strings.Contains(strings.ToLower(last.Error()), "permissions violation") {
		why = "; NATS refuses it (" + last.Error() + "): permissions generated before Herald routed directly lack " + bus.DirectSubject(butler) + ", so run herald nats-auth again and reload nats-server"
	}
	log.Warn("no switchboard answered a direct route in time; notifies go through "+bus.StreamRoute+" alone for "+DirectPause.String()+why, "butler", butler, "err", err)
}

// recorded answers a keyed call (n carries an idempotency key) from its
// ledger record, if the call was named before: found is false when there is
// no record, or the ledger did not answer within wait, or the record holds no
// answer yet (then the call goes on to the publish, whose duplicate ack finds
// the same record). A call named before is never sent again; with other
// arguments it is refused (err).
func (c *Client) recorded(ctx context.Context, wait time.Duration, r *envelope.Route, n *envelope.Notify, key string) (resp *envelope.RouteResponse, found bool, err error) {
	lctx, lcancel := context.WithTimeout(ctx, wait)
	rec, err := c.Ledger.Get(lctx, r.Target.Butler, key)
	lcancel()
	if err != nil || rec == nil {
		return nil, false, nil
	}
	if err := rec.Matches(n); err != nil {
		return nil, true, err
	}
	if rec.Final() || rec.Status == ledger.Refused && rec.Error != nil && !rec.Error.Retryable {
		return envelope.Answer(r, rec.Response(r.RequestContext.RequestID)), true, nil
	}
	return nil, false, nil
}

// notStored is Send's error for a route JetStream did not confirm it stored,
// after counting it (Store), with the reason NATS cannot store if the probe
// knows one. maybe (a publish may still have been stored) makes it
// ErrUnconfirmed; otherwise it is ErrNotAccepted. "Queued" is said only of a
// stored route: one that lived in this process's memory would be lost by its
// restart.
func (c *Client) notStored(err error, maybe bool, id string, timeout time.Duration) error {
	c.Store.Failed()
	why := ""
	if serr := c.Store.Err(); serr != nil {
		why = "; " + serr.Error()
	}
	if maybe {
		return fmt.Errorf("%w: request_id %s: %w: no answer within %s (%w)%s",
			envelope.ErrTimeout, id, ErrUnconfirmed, timeout, err, why)
	}
	return fmt.Errorf("%w: %w: the bus did not take the notification (%w)%s; nothing was sent, so calling notify again is safe once NATS can take it",
		envelope.ErrTargetUnavailable, ErrNotAccepted, err, why)
}

// watchLedger waits, if ack says the publish was a duplicate, for the
// answer the ledger records under key, and sends it on the channel it
// returns (which nothing is sent on otherwise, or if ctx ends first).
//
// A duplicate is the same notify again: its answer is, or will be, in the
// ledger (or on the same reply subject, if it is the same route). If the
// switchboard refused the copy JetStream kept, within its duplicate window,
// that refusal is the answer.
func (c *Client) watchLedger(ctx context.Context, ack *jetstream.PubAck, butler, key string) <-chan *ledger.Record {
	fromLedger := make(chan *ledger.Record, 1)
	if ack.Duplicate && c.Ledger != nil {
		since := time.Now().Add(-bus.DuplicateWindow)
		go func() {
			if rec, err := c.Ledger.WaitAnswer(ctx, butler, key, since); err == nil {
				fromLedger <- rec
			}
		}()
	}
	return fromLedger
}

// awaitAnswer is Send's wait for the first answer to r: the switchboard's
// reply, or the ledger's record of a duplicate (checked against r's notify
// if keyed), or ErrQueued when ctx ends first.
func awaitAnswer(ctx context.Context, r *envelope.Route, replies <-chan *nats.Msg, fromLedger <-chan *ledger.Record, keyed bool) (*envelope.RouteResponse, error) {
	id := r.RequestContext.RequestID
	select {
	case m := <-replies:
		// Tell the switchboard the answer arrived; without this it would
		// also send the butler a notice, as to a caller that left.
		_ = m.Respond(nil)
		resp, err := envelope.DecodeTrustedResponse(m.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: undecodable answer: %w", envelope.ErrInternal, err)
		}
		return resp, nil
	case rec := <-fromLedger:
		if keyed {
			if err := rec.Matches(r.Notify()); err != nil {
				return nil, err
			}
		}
		return envelope.Answer(r, rec.Response(id)), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: request_id %s", ErrQueued, id)
	}
}

// publish publishes until JetStream stores the message (or says it is a
// duplicate of one it has) or ctx ends. maybe reports whether a publish that
// failed may still have been stored, or may be sent later: a try that timed
// out while connected. Tries are made only while connected, so nothing waits
// in the client's reconnect buffer.
func (c *Client) publish(ctx context.Context, subject string, data []byte, key string) (ack *jetstream.PubAck, maybe bool, err error) {
	delay := 100 * time.Millisecond
	for {
		if c.NC.IsConnected() {
			tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			// One request per try: the library's own retries on "no
			// responders" would make a definite no look like a timeout.
			ack, err = bus.Publish(tctx, c.JS, subject, data, key, nil, jetstream.WithRetryAttempts(0))
			cancel()
			if err == nil {
				return ack, false, nil
			}
			if mayBeStored(err) {
				maybe = true
			}
		} else if err == nil {
			err = fmt.Errorf("NATS is not connected (%s)", c.NC.Status())
		}
		select {
		case <-ctx.Done():
			return nil, maybe, err
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// mayBeStored reports whether a failed publish may have reached the stream:
// anything but an answer that it was not (no stream, an API error, a closed
// connection).
func mayBeStored(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case bus.IsNoResponders(err), errors.As(err, &apiErr),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		return false
	}
	return true
}
