// Package testkit is what Herald's tests share: Eventually (and Poll), a
// poll until a condition holds; Buffer, a log sink safe for the goroutines
// that write it while the test reads it; FreeAddr and SkipWithoutEnv; Clock,
// a clock the test moves; Tail, the last lines of a process's log file; and
// for fake servers, Signal (wake the waiters when state changes), Recorder
// (the calls a fake received, to read and to wait for), Hooks (what a
// test asks of the calls a fake accepts: a hook, a hang-up), and Calls, the
// two together for a fake HTTP API of several methods, with RandomString and
// WriteJSON for its tokens and answers.
//
// It imports only the standard library, so that every module's tests (pkg,
// services, e2e) may use it.
package testkit

import (
	"testing"
	"time"
)

// Interval is how often Eventually checks its condition.
const Interval = 20 * time.Millisecond

// Eventually calls cond every Interval until it reports true, and fails t
// (t.Fatalf, naming what and within) if it has not within that time. cond
// runs at least once.
func Eventually(t testing.TB, within time.Duration, cond func() bool, what string) {
	t.Helper()
	EventuallyEvery(t, within, Interval, cond, what)
}

// EventuallyEvery is Eventually checking every every, for a condition that
// is slow to check (one that runs a command) and should not run back to
// back.
func EventuallyEvery(t testing.TB, within, every time.Duration, cond func() bool, what string) {
	t.Helper()
	if !Poll(within, every, cond) {
		t.Fatalf("%s: not within %s", what, within)
	}
}

// Poll calls cond every every until it reports true, and reports whether it
// did within within: Eventually for a caller that says more than "not
// within" when it fails, or must not fail at once. cond runs at least once.
func Poll(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}
