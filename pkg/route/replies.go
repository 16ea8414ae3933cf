package route

import (
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
)

// replies is one subscription, on herald.reply.<butler>.>, for every Send
// of one butler in this process, instead of a subscription per request: a
// notify then costs the server no SUB and UNSUB, and nats.go no subscription
// to set up and tear down (performance.md).
//
// Several processes may serve one butler (a stdio butler per Claude Code
// session), each with its own subscription, so every one of them sees every
// answer. Each takes only the answers to its own Sends:
//   - an answer a Send of this process waits for goes to it, and the Send
//     confirms it;
//   - an answer to a Send of this process that gave up ("queued") is
//     answered as the NATS server answers a request nobody listens to, a
//     reply with the status header 503 and no data: nats.go turns that into
//     nats.ErrNoResponders, so whoever answered (the messenger, the
//     switchboard relaying) knows at once that the caller has left and
//     stores the outcome for the butler's inbox, as when each request had
//     its own subscription;
//   - an answer to a request this process never made is left alone: it is
//     another process's to confirm. If that process is gone, whoever
//     answered hears nothing within bus.AnswerWait and stores the outcome
//     all the same.
type replies struct {
	prefix string
	sub    *nats.Subscription

	mu      sync.Mutex
	waiting map[string]chan *nats.Msg // by request id
	left    map[string]time.Time      // request ids whose Send gave up, and when
}

// A Send that gave up is remembered, so that its late answer is told at
// once that nobody takes it; maxLeft bounds how many are, and once that many
// are, those older than leftFor make room. One not remembered is answered as
// another process's: whoever answered waits bus.AnswerWait, then stores it.
const (
	leftFor = time.Hour
	maxLeft = 10000
)

// noResponders is the reply that says nobody is waiting, as the server
// words it (nats.go checks for it on every request's answer).
var noResponders = nats.Header{"Status": []string{"503"}}

// subscribeReplies starts butler's reply subscription on nc. A Send
// publishes its route on nc after this, and the server takes one
// connection's messages in order, so the subscription is in place before
// anything can answer the route.
func subscribeReplies(nc *nats.Conn, butler string) (*replies, error) {
	r := &replies{prefix: bus.ReplySubject(butler, ""), waiting: map[string]chan *nats.Msg{}, left: map[string]time.Time{}}
	sub, err := nc.Subscribe(bus.ReplySubject(butler, ">"), r.dispatch)
	if err != nil {
		return nil, err
	}
	r.sub = sub
	return r, nil
}

// dispatch hands an answer to the Send waiting for its request id, says
// nobody will take it if that Send gave up, and leaves any other alone.
func (r *replies) dispatch(m *nats.Msg) {
	id := strings.TrimPrefix(m.Subject, r.prefix)
	r.mu.Lock()
	ch := r.waiting[id]
	delete(r.waiting, id)   // one answer per wait: a second finds it gone
	_, gaveUp := r.left[id] // kept: the switchboard may relay it again
	r.mu.Unlock()
	switch {
	case ch != nil:
		ch <- m // buffered for the one answer
	case gaveUp:
		gone(m)
	}
}

// wait registers a Send for the answer to request id; leave must be called
// when it stops waiting, whether an answer came or not.
func (r *replies) wait(id string) (answers <-chan *nats.Msg, leave func()) {
	ch := make(chan *nats.Msg, 1)
	r.mu.Lock()
	r.waiting[id] = ch
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		if r.waiting[id] == ch {
			// No answer came: a late one is to hear at once that nobody
			// takes it.
			delete(r.waiting, id)
			r.rememberLocked(id)
		}
		r.mu.Unlock()
		// An answer that came as the Send gave up was not taken: say so.
		select {
		case m := <-ch:
			gone(m)
		default:
		}
	}
}

// rememberLocked notes that the Send of id gave up.
func (r *replies) rememberLocked(id string) {
	now := time.Now()
	if len(r.left) >= maxLeft {
		r.forgetLocked(now)
	}
	if len(r.left) < maxLeft {
		r.left[id] = now
	}
}

// forgetLocked drops the Sends that gave up more than leftFor ago.
func (r *replies) forgetLocked(now time.Time) {
	for id, at := range r.left {
		if now.Sub(at) > leftFor {
			delete(r.left, id)
		}
	}
}

// gone answers m as the server answers a request with no responders.
func gone(m *nats.Msg) {
	if m.Reply != "" {
		_ = m.RespondMsg(&nats.Msg{Header: noResponders})
	}
}

// repliesFor is butler's reply subscription, started on first use.
func (c *Client) repliesFor(butler string) (*replies, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.replies[butler]; r != nil {
		return r, nil
	}
	r, err := subscribeReplies(c.NC, butler)
	if err != nil {
		return nil, err
	}
	if c.replies == nil {
		c.replies = map[string]*replies{}
	}
	c.replies[butler] = r
	return r, nil
}
