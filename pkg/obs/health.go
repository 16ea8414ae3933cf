package obs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Errors of a State.
var (
	// ErrStarting: the part has not started its work yet.
	ErrStarting = errors.New("starting")
	// ErrStopped: the part has stopped its work.
	ErrStopped = errors.New("stopped")
)

// Check is one readiness check: nil when its part is ready, else why not.
// It must return promptly once ctx is done.
type Check func(ctx context.Context) error

// Health holds a process's named readiness checks, served as /readyz; /healthz
// only says the process is alive. A nil *Health registers nothing.
type Health struct {
	mu       sync.Mutex
	checks   map[string]Check
	degraded map[string]string
	// unable are the parts that cannot work (Unable); unless
	// unableReady, each fails the process's readiness.
	unable      map[string]string
	unableReady bool

	// recent is the last round's report and when it ran (Recent).
	recent   Report
	recentAt time.Time
	rounds   sync.Mutex
}

// recentFor is how old a report Recent answers with may be.
const recentFor = time.Second

// Recent is Ready's report of at most a second ago, one round at a time:
// the status answers of a process's many services (herald dev's butlers)
// share it instead of each running every check.
func (h *Health) Recent(ctx context.Context) Report {
	if h == nil {
		return h.Ready(ctx)
	}
	h.rounds.Lock()
	defer h.rounds.Unlock()
	if time.Since(h.recentAt) < recentFor {
		return h.recent
	}
	h.recent, h.recentAt = h.Ready(ctx), time.Now()
	return h.recent
}

// NewHealth is a Health with no checks: ready.
func NewHealth() *Health {
	return &Health{checks: map[string]Check{}, degraded: map[string]string{}, unable: map[string]string{}}
}

// Unable notes a part that cannot work at all (an integration whose secret
// is missing): /readyz answers 503 naming it and why, so a deployment does
// not count a process ready that cannot do what it was configured for;
// unless the operator chose "degraded but ready" (ReadyWhenUnable), in
// which case it is listed among the degraded parts and the process stays
// ready for the others. An empty reason clears the note.
func (h *Health) Unable(name, reason string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if reason == "" {
		delete(h.unable, name)
		return
	}
	h.unable[name] = reason
}

// ReadyWhenUnable sets whether parts that cannot work (Unable) leave the
// process ready: the configuration's ready_when_degraded.
func (h *Health) ReadyWhenUnable(ready bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unableReady = ready
}

// Degrade notes a part that cannot work while the rest does (an integration
// whose secret is missing): /readyz names it and why, and stays ready, so
// one misconfigured account neither hides nor stops the others. An empty
// reason clears the note.
func (h *Health) Degrade(name, reason string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if reason == "" {
		delete(h.degraded, name)
		return
	}
	h.degraded[name] = reason
}

// checkTimeout bounds a whole readiness round, so /readyz answers within a
// health prober's timeout even when NATS does not.
const checkTimeout = 2 * time.Second

// natsTimeout bounds the NATS check's JetStream request.
const natsTimeout = time.Second

// Add registers check under name ("nats", "switchboard.consumers"),
// replacing one of the same name.
func (h *Health) Add(name string, check Check) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[name] = check
}

// Report is the outcome of a readiness round, /readyz's body.
type Report struct {
	Ready bool `json:"ready"`
	// Checks maps each check's name to "ok" or why it failed.
	Checks map[string]string `json:"checks"`
	// Degraded maps each part that cannot work, though the process is
	// ready, to why (Health.Degrade).
	Degraded map[string]string `json:"degraded,omitempty"`
}

// Ready runs every check at once, within checkTimeout.
func (h *Health) Ready(ctx context.Context) Report {
	r := Report{Ready: true, Checks: map[string]string{}}
	if h == nil {
		return r
	}
	h.mu.Lock()
	checks := maps.Clone(h.checks)
	if len(h.degraded) > 0 {
		r.Degraded = maps.Clone(h.degraded)
	}
	for name, why := range h.unable {
		if h.unableReady {
			if r.Degraded == nil {
				r.Degraded = map[string]string{}
			}
			r.Degraded[name] = why
			continue
		}
		r.Checks[name], r.Ready = why, false
	}
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for name, check := range checks {
		wg.Go(func() {
			res := "ok"
			if err := check(ctx); err != nil {
				res = err.Error()
			}
			mu.Lock()
			defer mu.Unlock()
			r.Checks[name] = res
			if res != "ok" {
				r.Ready = false
			}
		})
	}
	wg.Wait()
	return r
}

// LiveHandler is /healthz: 200 "ok" while the process serves HTTP at all.
func (h *Health) LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
}

// ReadyHandler is /readyz: 200 when every check passes, else 503, with the
// Report as JSON either way.
func (h *Health) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := h.Ready(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !rep.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(rep)
	})
}

// NATSCheck is the standard check of a process's NATS connection: it is
// connected, and JetStream answers an account info request within a second.
// The connection's user needs $JS.API.INFO.
func NATSCheck(nc *nats.Conn) Check {
	js, jerr := jetstream.New(nc)
	return func(ctx context.Context) error {
		if jerr != nil {
			return jerr
		}
		if st := nc.Status(); st != nats.CONNECTED {
			return fmt.Errorf("NATS is %s", strings.ToLower(st.String()))
		}
		ctx, cancel := context.WithTimeout(ctx, natsTimeout)
		defer cancel()
		if _, err := js.AccountInfo(ctx); err != nil {
			return fmt.Errorf("JetStream does not answer: %w", err)
		}
		return nil
	}
}

// All is a check that passes when each of checks does, in order; it fails
// with the first failure.
func All(checks ...Check) Check {
	return func(ctx context.Context) error {
		for _, c := range checks {
			if err := c(ctx); err != nil {
				return err
			}
		}
		return nil
	}
}

// State is a readiness check a service sets as it goes: failing with
// ErrStarting until its work runs, nil while it does, failing with why once
// it stopped ("consumers running", "receivers healthy").
type State struct {
	mu  sync.Mutex
	err error
}

// NewState is a State failing with ErrStarting.
func NewState() *State { return &State{err: ErrStarting} }

// Set records the state: nil is ready.
func (s *State) Set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Check is the State as a Check.
func (s *State) Check(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LastError keeps a service's most recent error for its status answer.
// The zero value holds none.
type LastError struct {
	mu   sync.Mutex
	last *ErrorRecord
}

// ErrorRecord is an error and when it happened.
type ErrorRecord struct {
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// Record keeps err (nil is ignored).
func (l *LastError) Record(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = &ErrorRecord{Error: err.Error(), At: time.Now().UTC()}
}

// Noted is handler h with its errors recorded in l.
func Noted[M any](l *LastError, h func(context.Context, M) error) func(context.Context, M) error {
	return func(ctx context.Context, m M) error {
		err := h(ctx, m)
		l.Record(err)
		return err
	}
}

// Last is the most recent error, nil if none.
func (l *LastError) Last() *ErrorRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		return nil
	}
	c := *l.last
	return &c
}
