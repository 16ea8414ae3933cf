package route

import (
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
)

// replies is one subscription, on herald.reply.<butler>.>, for every Send
// of one butler, instead of a subscription per request: a notify then costs
// the server no SUB and UNSUB, and nats.go no subscription to set up and
// tear down (performance.md).
//
// An answer no Send waits for (its caller left with "queued", or never
// was) is answered as the NATS server answers a request nobody listens to:
// a reply with the status header 503 and no data. nats.go turns that into
// nats.ErrNoResponders, so whoever answered (the messenger, the switchboard
// relaying) knows at once that nobody took it and stores the outcome for the
// butler's inbox, exactly as when each request had its own subscription.
type replies struct {
	prefix string
	sub    *nats.Subscription

	mu      sync.Mutex
	waiting map[string]chan *nats.Msg // by request id
}

// noResponders is the reply that says nobody is waiting, as the server
// words it (nats.go checks for it on every request's answer).
var noResponders = nats.Header{"Status": []string{"503"}}

// subscribeReplies starts butler's reply subscription on nc. A Send
// publishes its route on nc after this, and the server takes one
// connection's messages in order, so the subscription is in place before
// anything can answer the route.
func subscribeReplies(nc *nats.Conn, butler string) (*replies, error) {
	r := &replies{prefix: bus.ReplySubject(butler, ""), waiting: map[string]chan *nats.Msg{}}
	sub, err := nc.Subscribe(bus.ReplySubject(butler, ">"), r.dispatch)
	if err != nil {
		return nil, err
	}
	r.sub = sub
	return r, nil
}

// dispatch hands an answer to the Send waiting for its request id, or says
// nobody is.
func (r *replies) dispatch(m *nats.Msg) {
	id := strings.TrimPrefix(m.Subject, r.prefix)
	r.mu.Lock()
	ch := r.waiting[id]
	delete(r.waiting, id) // one answer per wait: a second finds nobody
	r.mu.Unlock()
	if ch == nil {
		gone(m)
		return
	}
	ch <- m // buffered for the one answer
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
			delete(r.waiting, id)
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
