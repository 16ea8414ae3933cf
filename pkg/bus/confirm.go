package bus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
)

// Confirms are the publishes one piece of work made without waiting for
// their acks (audit records, which audit.Writer gathers and publishes
// asynchronously). Whoever acknowledges the work waits for them first
// (Then): a Worker before it acks the message, the switchboard before it
// answers a direct route. So a process killed in between leaves the work
// to be done again, and its records written again: acknowledged work never
// lacks its records.
type Confirms struct {
	// Soon says someone waits for the work's answer (a direct route's
	// butler): a publisher that gathers records sends these soon, not after
	// its full linger.
	Soon bool

	mu      sync.Mutex
	pending int
	err     error       // the first failure
	then    func(error) // set by Then while some are pending
	timer   *time.Timer
}

// ConfirmWait bounds the wait for a piece of work's records. NATS not
// confirming them by then is taken as NATS not storing them: the work is
// not acknowledged (ErrUnconfirmed).
const ConfirmWait = 2 * time.Second

// ErrUnconfirmed is wrapped by the error Then reports when a record was not
// confirmed: refused by NATS, or not answered within its wait.
var ErrUnconfirmed = fmt.Errorf("%w: NATS did not confirm storing the audit records of this work", envelope.ErrTimeout)

type confirmsKey struct{}

// WithConfirms returns ctx carrying c: what is published for ctx's work
// without waiting is counted in c.
func WithConfirms(ctx context.Context, c *Confirms) context.Context {
	return context.WithValue(ctx, confirmsKey{}, c)
}

// ConfirmsOf is the Confirms ctx carries, or nil: work nobody acknowledges
// after it (a timer's, a KV watcher's).
func ConfirmsOf(ctx context.Context) *Confirms {
	c, _ := ctx.Value(confirmsKey{}).(*Confirms)
	return c
}

// Add counts one publish more; its publisher calls confirmed once with
// NATS's answer (nil: stored). Calls after Then has reported are ignored.
func (c *Confirms) Add() (confirmed func(error)) {
	c.mu.Lock()
	c.pending++
	c.mu.Unlock()
	var once sync.Once
	return func(err error) { once.Do(func() { c.done(err) }) }
}

func (c *Confirms) done(err error) {
	c.mu.Lock()
	c.pending--
	if err != nil && c.err == nil {
		c.err = err
	}
	if c.then == nil || (c.pending > 0 && c.err == nil) {
		c.mu.Unlock()
		return
	}
	c.report()
}

// Then calls f once every publish counted is confirmed (nil), or with
// ErrUnconfirmed once one fails or wait passes first: at once (on this
// goroutine) if none is pending, else on the publisher's goroutine or a
// timer's. Then is called once, after the work.
func (c *Confirms) Then(wait time.Duration, f func(error)) {
	c.mu.Lock()
	c.then = f
	if c.pending == 0 || c.err != nil {
		c.report()
		return
	}
	c.timer = time.AfterFunc(wait, func() {
		c.mu.Lock()
		if c.then == nil {
			c.mu.Unlock()
			return
		}
		if c.err == nil {
			c.err = fmt.Errorf("%d not confirmed within %s", c.pending, wait)
		}
		c.report()
	})
	c.mu.Unlock()
}

// report calls then, once, with c.mu held on entry; it unlocks.
func (c *Confirms) report() {
	f, err := c.then, c.err
	c.then = nil
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrUnconfirmed, err)
	}
	f(err)
}

// Wait is Then for a caller that can block: it returns Then's error.
func (c *Confirms) Wait(wait time.Duration) error {
	ch := make(chan error, 1)
	c.Then(wait, func(err error) { ch <- err })
	return <-ch
}
