package delivertest

import (
	"context"
	"sync"
	"testing"
)

// Deadline is a context whose deadline passes when the test calls Pass,
// not at a set time: a test ends a delivery's context at the point it
// means (once the provider holds the message), however loaded the
// machine. Err is context.DeadlineExceeded after Pass, as a delivery's
// timeout gives.
type Deadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

// NewDeadline is a Deadline under t's context; it passes at t's end if
// the test has not passed it.
func NewDeadline(t *testing.T) *Deadline {
	d := &Deadline{Context: t.Context(), done: make(chan struct{})}
	t.Cleanup(d.Pass)
	return d
}

// Pass makes the deadline pass.
func (d *Deadline) Pass() { d.once.Do(func() { close(d.done) }) }

// Done is closed when the deadline has passed.
func (d *Deadline) Done() <-chan struct{} { return d.done }

// Err is context.DeadlineExceeded once the deadline has passed, else nil.
func (d *Deadline) Err() error {
	select {
	case <-d.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
