package bus

import (
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/envelope"
)

// unfixableCauses are the NATS errors that say the request itself is wrong: the
// same key, subject or message is refused the same way on every try, so
// no retry can fix them, whatever class the code around them chose. Herald
// wraps most store errors as target_unavailable (a store that is down comes
// back); "nats: invalid key" wrapped so (a question with an empty chat made
// an empty key token) was retried for 24 h, and its retries held the route
// consumer (issue 37).
var unfixableCauses = []error{
	jetstream.ErrInvalidKey, nats.ErrInvalidKey,
	jetstream.ErrInvalidSubject, nats.ErrBadSubject,
	nats.ErrMaxPayload, jetstream.ErrStreamMessageExceedsMaximum,
}

// unfixable returns err as internal_error if a class a retry could help
// (target_unavailable, timeout, overload) wraps a NATS error no retry can
// fix (a key or subject Herald built that NATS refuses, a message over its
// limit); otherwise err itself. The Worker applies it to every handler's
// error, so such a message is answered and dead-lettered at once.
func unfixable(err error) error {
	if err == nil || !envelope.Retryable(err) {
		return err
	}
	for _, u := range unfixableCauses {
		if errors.Is(err, u) {
			return &unfixableError{err}
		}
	}
	return err
}

// unfixableError is internal_error around an error whose own class said a
// retry could help; errors.Is and errors.As still reach the cause.
type unfixableError struct{ err error }

func (e *unfixableError) Error() string {
	cause := strings.TrimPrefix(e.err.Error(), envelope.ClassOf(e.err)+": ")
	return envelope.ErrInternal.Error() + ": " + cause + " (a fault in Herald that a retry cannot fix)"
}

func (e *unfixableError) Unwrap() []error { return []error{envelope.ErrInternal, e.err} }
