package deliver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/envelope"
)

// DefaultMaxAnswer is how much of an answer a Caller reads when its
// MaxAnswer is not set: more than any provider's JSON answer to one call.
const DefaultMaxAnswer = 1 << 20

// maxSays bounds what of an answer's text a CallError repeats.
const maxSays = 200

// Doer sends one HTTP request: an *http.Client (NewClient's), or a wrapper
// of one that changes requests on their way.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// Caller makes a sender's HTTP calls to its provider: everything between
// the request the sender builds and what it makes of the answer. It notes
// whether the request went out whole (TraceWrites), sends it, reads the
// answer up to a bound, and reports a failure as a *CallError: the status,
// the Retry-After, whether the provider may have carried the call out
// (OutcomeUnknown), the redirect that was refused, and texts from which
// Secrets are scrubbed. Senders keep their own sentences, and classes
// where their provider says more than its status (CallError.Class).
// Waiting out rate limits is RateLimits'. A Caller is safe for concurrent
// use.
type Caller struct {
	// Client sends the requests: NewClient's, so that a 3xx is never
	// followed.
	Client Doer
	// Secrets are scrubbed from every text of a CallError (nil: none).
	Secrets *Scrubber
	// MaxAnswer bounds the answer read into memory; 0 means
	// DefaultMaxAnswer. The rest of a longer answer is skipped.
	MaxAnswer int64
	// StatusAnswers: the status alone answers a call (a webhook receiver's
	// 2xx is its acceptance), so an answer whose body is cut short still
	// counts, with what came of it. Otherwise the body is part of the
	// answer (a provider's JSON saying what it did), and without all of it
	// the outcome is unknown.
	StatusAnswers bool
}

// Answer is a provider's answer to one call.
type Answer struct {
	Status int
	Header http.Header
	// Body is the answer's body up to the Caller's MaxAnswer (with
	// StatusAnswers, as much as came), as the provider sent it: a sender
	// scrubs (Caller.Secrets) what it shows of it.
	Body []byte
}

// Do sends req and returns the provider's answer of status 2xx. Any other
// outcome is a *CallError: no answer, an answer cut short, a redirect the
// client refused to follow, or an answer of another status (its Answer
// set, for the provider's own account of what was wrong).
func (c Caller) Do(req *http.Request) (*Answer, error) {
	ctx, written := TraceWrites(req.Context())
	resp, err := c.Client.Do(req.WithContext(ctx))
	if err != nil {
		return nil, c.failed(err, written())
	}
	defer resp.Body.Close()
	limit := c.MaxAnswer
	if limit <= 0 {
		limit = DefaultMaxAnswer
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil && !c.StatusAnswers {
		// Without the whole answer, whether the call was carried out is
		// not known.
		return nil, &CallError{Status: resp.StatusCode, Unknown: OutcomeUnknown(err, true),
			Cause: fmt.Errorf("reading the answer: %s", c.Secrets.Scrub(err.Error()))}
	}
	// What is left of a longer answer is skipped, so that the connection can
	// serve the next call.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, limit))
	ans := &Answer{Status: resp.StatusCode, Header: resp.Header, Body: body}
	if ans.Status >= 200 && ans.Status <= 299 {
		return ans, nil
	}
	e := &CallError{Status: ans.Status, Answer: ans, Says: c.says(body)}
	e.RetryAfter, _ = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return nil, e
}

// failed is the CallError of a request that got no answer; written says
// whether it went out whole.
func (c Caller) failed(err error, written bool) *CallError {
	if moved, ok := errors.AsType[*RedirectError](err); ok {
		r := &RedirectError{Status: moved.Status, Location: c.Secrets.Scrub(moved.Location)}
		return &CallError{Status: moved.Status, Redirect: r}
	}
	cause := err
	if ue, ok := errors.AsType[*url.Error](err); ok {
		// Its text starts with the request's URL, which may hold a token
		// and which the sender names better itself.
		cause = ue.Err
	}
	return &CallError{Unknown: OutcomeUnknown(err, written), Cause: errors.New(c.Secrets.Scrub(cause.Error()))}
}

// says is what the text of an answer says, for an error message: its
// beginning on one line, with the secrets scrubbed; "" for an empty answer
// or an HTML page.
func (c Caller) says(body []byte) string {
	text := strings.TrimSpace(string(body))
	if text == "" || strings.HasPrefix(text, "<") {
		return ""
	}
	text = strings.Join(strings.FieldsFunc(text, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	text = c.Secrets.Scrub(text)
	if len(text) > maxSays {
		cut := maxSays
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return text
}

// CallError is a provider call that did not succeed (Caller.Do). Its texts
// (Error, Says, Cause, Redirect) hold no secret of the Caller's and not the
// request's URL; Answer is as the provider sent it.
type CallError struct {
	// Status is the provider's HTTP status; 0 when no answer came.
	Status int
	// RetryAfter is what the answer's Retry-After header asked to wait (at
	// least a second); 0 when it had none that could be read.
	RetryAfter time.Duration
	// Unknown: the request went out whole and no whole answer came back
	// (OutcomeUnknown), so the provider may have carried the call out.
	Unknown bool
	// Redirect is a 3xx the client refused to follow (NewClient), where it
	// pointed scrubbed. A client that hands a 3xx back as its answer gives
	// an Answer of that status instead.
	Redirect *RedirectError
	// Answer is the provider's answer of a status other than 2xx, for its
	// own account of what was wrong; nil when none came whole.
	Answer *Answer
	// Says is the beginning of Answer's text on one line, scrubbed; "" for
	// none or an HTML page.
	Says string
	// Cause is why no whole answer came, scrubbed; nil when one did.
	Cause error
}

func (e *CallError) Error() string {
	switch {
	case e.Redirect != nil:
		return e.Redirect.Error()
	case e.Cause != nil:
		return e.Cause.Error()
	}
	text := "HTTP " + strconv.Itoa(e.Status)
	if t := http.StatusText(e.Status); t != "" {
		text += " " + t
	}
	if e.Says != "" {
		text += ": " + e.Says
	}
	return text
}

// Unwrap lets errors.As find the Redirect, or errors.Is the Cause.
func (e *CallError) Unwrap() error {
	if e.Redirect != nil {
		return e.Redirect
	}
	return e.Cause
}

// Class is the envelope error class of the failure for a provider that
// says no more than its status: envelope.ErrTimeout when the outcome is
// unknown, else StatusClass of the status (envelope.ErrTargetUnavailable
// when no answer came: the provider has nothing).
func (e *CallError) Class() error {
	if e.Unknown {
		return envelope.ErrTimeout
	}
	return StatusClass(e.Status)
}

// StatusClass is the envelope error class of a provider's answer of HTTP
// status other than 2xx. A sender wraps it with a sentence of its own that
// says what to do:
//
//   - 3xx: envelope.ErrNotFound; the provider moved, Herald follows no
//     redirect, and the address in the configuration is to be fixed;
//   - 401, 403: envelope.ErrForbidden (credentials, permissions);
//   - 404, 410: envelope.ErrNotFound;
//   - 408, 425, 429, 5xx: envelope.ErrTargetUnavailable (busy or down:
//     later may work);
//   - other 4xx: envelope.ErrValidation (the request as sent is refused).
//
// Any other status, and 0 for no answer, is envelope.ErrTargetUnavailable.
func StatusClass(status int) error {
	switch {
	case status >= 300 && status <= 399:
		return envelope.ErrNotFound
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return envelope.ErrForbidden
	case status == http.StatusNotFound, status == http.StatusGone:
		return envelope.ErrNotFound
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly, status == http.StatusTooManyRequests, status >= 500:
		return envelope.ErrTargetUnavailable
	case status >= 400:
		return envelope.ErrValidation
	}
	return envelope.ErrTargetUnavailable
}

// ParseRetryAfter reads a Retry-After header, seconds or an HTTP date, as a
// wait from now of at least a second; false when v is empty or neither.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return max(time.Duration(min(n, 1<<31))*time.Second, time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now).Round(time.Second), time.Second), true
	}
	return 0, false
}
