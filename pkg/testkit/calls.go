package testkit

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Calls is what a fake HTTP API of several kinds of call keeps of the calls
// it received: a Recorder of them and the Hooks a test set, by key (a
// method, a route). It gives the fake the methods its tests call (Of,
// Accepted, WaitCalls, OnAccept, HangUpNext), and the step of a handler
// between carrying a call out and answering it (Accept, Answer).
//
// Set Fake, Key and OK before the fake serves; the Recorder's Clone may be
// set too. Its methods are safe for concurrent use, and all but Answer may
// be called with the fake's own lock held.
type Calls[C any] struct {
	Recorder[C]
	// Fake names the fake in failures ("slacktest").
	Fake string
	// Key is a call's key.
	Key func(C) string
	// Fold makes keys compare without regard to case (Telegram's method
	// names).
	Fold bool
	// OK reports whether the fake carried a call out.
	OK func(C) bool

	hooks Hooks[C]
}

// is keeps the calls of key, or every call for "".
func (l *Calls[C]) is(key string) func(C) bool {
	return func(c C) bool {
		if key == "" {
			return true
		}
		if l.Fold {
			return strings.EqualFold(l.Key(c), key)
		}
		return l.Key(c) == key
	}
}

// hookKey is key as the hooks are held by.
func (l *Calls[C]) hookKey(key string) string {
	if l.Fold {
		return strings.ToLower(key)
	}
	return key
}

// Of is a copy of the calls of key, or of every call for "", in the order
// they arrived.
func (l *Calls[C]) Of(key string) []C { return l.Select(l.is(key)) }

// Accepted is a copy of the calls of key (or of every call, for "") that
// the fake carried out (OK), in the order they arrived.
func (l *Calls[C]) Accepted(key string) []C {
	of := l.is(key)
	return l.Select(func(c C) bool { return of(c) && l.OK(c) })
}

// WaitCalls waits until at least n calls of key have arrived and returns
// them all; it fails t if they do not arrive within within.
func (l *Calls[C]) WaitCalls(t testing.TB, key string, n int, within time.Duration) []C {
	t.Helper()
	return l.Wait(t, within, n, l.is(key), l.Fake+": "+key+" calls")
}

// OnAccept makes fn run on each call of key the fake accepts (Answer runs
// it); a nil fn removes the hook.
func (l *Calls[C]) OnAccept(key string, fn func(C)) { l.hooks.OnAccept(l.hookKey(key), fn) }

// HangUpNext makes the fake hang up on the next n calls of key it accepts.
func (l *Calls[C]) HangUpNext(key string, n int) { l.hooks.HangUpNext(l.hookKey(key), n) }

// Accept is what the test asked of a call of key the fake carried out: a
// hook to run before answering (nil for none), and whether to hang up
// instead of answering, which uses up one of HangUpNext.
func (l *Calls[C]) Accept(key string) (hook func(C), hangUp bool) {
	return l.hooks.Accepted(l.hookKey(key))
}

// Answer is the last step before the fake answers call i: it runs hook
// (from Accept; nil for none) on a copy of the call, then changes the call
// with answered (e.g. to set when it was answered). The fake's own lock
// must not be held, so that the hook may call the fake.
func (l *Calls[C]) Answer(i int, hook func(C), answered func(*C)) {
	if hook != nil {
		hook(l.At(i))
	}
	l.Update(i, answered)
}

// RandomString is n characters drawn at random from alphabet: a token or a
// secret shaped like a provider's.
func RandomString(alphabet string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// WriteJSON answers status with body as JSON of contentType; if body does
// not marshal, it answers 500 with fallback instead.
func WriteJSON(w http.ResponseWriter, status int, contentType string, body any, fallback string) {
	b, err := json.Marshal(body)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(fallback)
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
