package testkit

import (
	"sync"
	"testing"
	"time"
)

// Signal wakes the goroutines waiting for a fake's state to change: the
// fake calls Notify after each change, and a test waits with Wait until a
// condition on that state holds. The zero Signal is ready to use; its
// methods are safe for concurrent use, and Notify may be called with the
// fake's own lock held or not.
type Signal struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced by Notify
}

// Notify wakes every Wait in progress, to check its condition again.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
	}
	s.ch = make(chan struct{})
}

// changed is closed at the next Notify.
func (s *Signal) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Wait calls cond, and again after each Notify, until it reports true, and
// reports whether it did within within. cond takes whatever lock the state
// it reads needs; a change is not missed as long as Notify follows it.
func (s *Signal) Wait(within time.Duration, cond func() bool) bool {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		changed := s.changed()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			return false
		}
	}
}

// Recorder holds the calls a fake server received, in the order they
// arrived, for a test to read and to wait for; C is the fake's call type.
// The zero Recorder is empty and ready to use; its methods are safe for
// concurrent use, and may be called with the fake's own lock held (the
// Recorder's lock is taken last).
type Recorder[C any] struct {
	// Clone, if set, copies a call for a reader, so that the reader cannot
	// change what the fake holds (e.g. a maps.Clone of a parameter map).
	Clone func(C) C

	mu     sync.Mutex
	calls  []C
	signal Signal
}

// Add records c and returns its index, for Update and At.
func (r *Recorder[C]) Add(c C) int {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	i := len(r.calls) - 1
	r.mu.Unlock()
	r.signal.Notify()
	return i
}

// Update changes the call at index i in place with f (e.g. to set when it
// was answered).
func (r *Recorder[C]) Update(i int, f func(*C)) {
	r.mu.Lock()
	f(&r.calls[i])
	r.mu.Unlock()
	r.signal.Notify()
}

// At is a copy of the call at index i.
func (r *Recorder[C]) At(i int) C {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clone(r.calls[i])
}

// Select is a copy of every call keep accepts (every call, for a nil
// keep), in the order they arrived.
func (r *Recorder[C]) Select(keep func(C) bool) []C {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []C
	for _, c := range r.calls {
		if keep == nil || keep(c) {
			out = append(out, r.clone(c))
		}
	}
	return out
}

func (r *Recorder[C]) clone(c C) C {
	if r.Clone != nil {
		return r.Clone(c)
	}
	return c
}

// Wait waits until at least n calls keep accepts have arrived and returns
// them all, as Select does; it fails t if they do not arrive within within,
// naming what ("slacktest: chat.postMessage calls") and how many came.
func (r *Recorder[C]) Wait(t testing.TB, within time.Duration, n int, keep func(C) bool, what string) []C {
	t.Helper()
	var calls []C
	if !r.signal.Wait(within, func() bool {
		calls = r.Select(keep)
		return len(calls) >= n
	}) {
		t.Fatalf("%s: got %d within %s, want %d", what, len(calls), within, n)
	}
	return calls
}

// Hooks are what a test asks of a fake server about the calls it accepts,
// by key (a method, a route; "" in a fake of one kind of call): a function
// to run on each (OnAccept), and how many to hang up on instead of
// answering (HangUpNext), the provider having taken the call and its answer
// lost on the way. The zero Hooks is ready to use; its methods are safe for
// concurrent use, and may be called with the fake's own lock held.
type Hooks[C any] struct {
	mu       sync.Mutex
	onAccept map[string]func(C)
	hangUps  map[string]int
}

// OnAccept makes fn run on each call of key the fake accepts; a nil fn
// removes the hook.
func (h *Hooks[C]) OnAccept(key string, fn func(C)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fn == nil {
		delete(h.onAccept, key)
		return
	}
	if h.onAccept == nil {
		h.onAccept = map[string]func(C){}
	}
	h.onAccept[key] = fn
}

// HangUpNext makes the fake hang up on the next n calls of key it accepts.
func (h *Hooks[C]) HangUpNext(key string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hangUps == nil {
		h.hangUps = map[string]int{}
	}
	h.hangUps[key] += n
}

// Accepted says what the fake does with a call of key it accepted: run
// hook (nil for none) once the call is recorded and before answering, and
// hang up instead of answering if hangUp, which uses up one of HangUpNext.
func (h *Hooks[C]) Accepted(key string) (hook func(C), hangUp bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hangUps[key] > 0 {
		h.hangUps[key]--
		hangUp = true
	}
	return h.onAccept[key], hangUp
}
