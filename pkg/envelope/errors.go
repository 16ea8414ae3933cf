package envelope

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The error classes of architecture.md §3. Wrap them category first,
// fmt.Errorf("%w: unknown channel %q", ErrValidation, ch), and ErrorBodyFrom maps
// any error to the wire form a caller sees.
var (
	// ErrValidation: the envelope or its arguments are malformed. Not retryable.
	ErrValidation = errors.New("validation_error")
	// ErrForbidden: the sender may not do this. Not retryable.
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: the target (integration, chat, message) does not exist. Not retryable.
	ErrNotFound = errors.New("not_found")
	// ErrTargetUnavailable: the provider or a Herald service is down for now. Retryable.
	ErrTargetUnavailable = errors.New("target_unavailable")
	// ErrTimeout: no answer in time. Retryable.
	ErrTimeout = errors.New("timeout")
	// ErrOverload: a rate limit refused the request. Retryable.
	ErrOverload = errors.New("overload_rejected")
	// ErrInternal: a bug or an unexpected state. Not retryable.
	ErrInternal = errors.New("internal_error")
)

// classes maps each sentinel to its wire class and whether a retry can help.
var classes = []struct {
	err       error
	retryable bool
}{
	{ErrValidation, false},
	{ErrForbidden, false},
	{ErrNotFound, false},
	{ErrTargetUnavailable, true},
	{ErrTimeout, true},
	{ErrOverload, true},
	{ErrInternal, false},
}

// ErrorBody is the `error` object of notify_response.v1 and route_response.v1.
type ErrorBody struct {
	Class     string `json:"class"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// Error makes an ErrorBody usable as a Go error that still matches its class
// sentinel with errors.Is.
func (e *ErrorBody) Error() string { return e.Message }

// Is matches the sentinel of the body's class.
func (e *ErrorBody) Is(target error) bool {
	return target.Error() == e.Class && ClassOf(target) == e.Class
}

// ClassOf returns the wire class of err: the class of the outermost wrap, so
// fmt.Errorf("%w: ...: %w", ErrTargetUnavailable, validationErr) is
// target_unavailable whatever the cause says. Anything unclassified is
// internal_error; a context deadline with no class around it is timeout.
func ClassOf(err error) string {
	if c := outermostClass(err); c != "" {
		return c
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrTimeout.Error()
	}
	return ErrInternal.Error()
}

// outermostClass walks err's tree in the order errors.Is does (depth first,
// wrapping before wrapped, left to right) and returns the first class found.
func outermostClass(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range classes {
		if err == c.err {
			return c.err.Error()
		}
	}
	if body, ok := err.(*ErrorBody); ok {
		return body.Class
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return outermostClass(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if c := outermostClass(e); c != "" {
				return c
			}
		}
	}
	return ""
}

// Retryable reports whether the class of err says a retry can help.
func Retryable(err error) bool {
	class := ClassOf(err)
	for _, c := range classes {
		if c.err.Error() == class {
			return c.retryable
		}
	}
	return false
}

// ErrorBodyFrom is the wire form of err.
func ErrorBodyFrom(err error) *ErrorBody {
	class := ClassOf(err)
	// A relayed body is the answer as it came, unless a wrap outside it
	// says otherwise.
	var body *ErrorBody
	if errors.As(err, &body) && body.Class == class {
		return body
	}
	// The class travels in its own field; the message need not repeat it.
	return &ErrorBody{Class: class, Message: strings.TrimPrefix(err.Error(), class+": "), Retryable: Retryable(err)}
}

// RetryAfterError says a provider asked to wait before trying again (Telegram's
// 429 retry_after). It is an ErrOverload.
type RetryAfterError struct {
	Wait time.Duration
	Err  error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v: rate limited by the provider, retry after %s", ErrOverload, e.Wait)
}

// Unwrap lets errors.Is find ErrOverload and the provider's own error.
func (e *RetryAfterError) Unwrap() []error { return []error{ErrOverload, e.Err} }
