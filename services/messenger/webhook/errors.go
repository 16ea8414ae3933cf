package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// failed turns a POST that did not succeed (an error of deliver.Caller)
// into one of the envelope error classes, with a sentence saying what to
// do. A webhook sent and not answered may be at the receiver: a timeout,
// which the messenger treats as uncertain (on_uncertain), and a resend
// carries the same webhook-id. One that never went out is
// target_unavailable. The texts are the Caller's, scrubbed of the secrets
// and the URL's tokens.
func (s *sender) failed(ctx context.Context, dest, name string, r *recipient, b *signedBody, err error) error {
	failed, _ := errors.AsType[*deliver.CallError](err) // the Caller's every error
	switch {
	case failed.Unknown && ctx.Err() != nil:
		return fmt.Errorf("%w: %s did not answer before the delivery's deadline (%w); the receiver may have the webhook, and a resend carries the same webhook-id",
			envelope.ErrTimeout, dest, ctx.Err())
	case failed.Unknown:
		return fmt.Errorf("%w: %s gave no answer to the webhook (%s); the receiver may have it, and a resend carries the same webhook-id",
			envelope.ErrTimeout, dest, failed)
	case failed.Answer != nil:
		return s.refused(dest, name, r, b, failed)
	case ctx.Err() != nil:
		return fmt.Errorf("%w: the webhook to %s was not sent: %w", envelope.ErrTargetUnavailable, dest, ctx.Err())
	}
	return fmt.Errorf("%w: %s could not be reached (%s): check that the receiver is up and that recipients.%s is right; Herald tries again later",
		envelope.ErrTargetUnavailable, dest, failed, name)
}

// refused turns a receiver's answer other than 2xx into the class of its
// status (deliver.StatusClass), with a sentence saying what to do.
// Standard Webhooks' advice is followed: 3xx and 410 mean the URL is to be
// changed, 429 and 502/503/504 that the receiver is loaded, Retry-After is
// honoured. A 413 says how big the body was (b), since the receiver rarely
// says its limit.
func (s *sender) refused(dest, name string, r *recipient, b *signedBody, failed *deliver.CallError) error {
	code := failed.Status
	status := strconv.Itoa(code)
	if t := http.StatusText(code); t != "" {
		status += " " + t
	}
	if failed.Says != "" {
		status += "; the receiver says: " + failed.Says
	}
	if (code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable) && failed.RetryAfter > 0 {
		// Class first, then what happened: a RetryAfterError's own text
		// says only how long to wait.
		detail := fmt.Sprintf("%s is busy (%s); Herald tries again then", dest, status)
		return fmt.Errorf("%w: %s", &envelope.RetryAfterError{Wait: failed.RetryAfter, Err: errors.New(detail)}, detail)
	}
	class := deliver.StatusClass(code)
	var what string
	switch {
	case code >= 300 && code <= 399:
		to := ""
		if loc := failed.Answer.Header.Get("Location"); loc != "" {
			if l, err := r.url.Parse(loc); err == nil {
				to = " to " + redact(l)
			}
		}
		what = fmt.Sprintf("%s redirects%s (%s); Herald does not follow redirects: put the final URL in recipients.%s", dest, to, status, name)
	case class == envelope.ErrForbidden:
		what = fmt.Sprintf("%s refused the webhook (%s): make the receiver verify Standard Webhooks signatures with the secret in secret_env %s of integration %q, and check that its clock is within 5 minutes of Herald's",
			dest, status, s.secretEnv, s.id)
	case code == http.StatusGone:
		what = fmt.Sprintf("%s is gone (%s): the receiver no longer takes webhooks; remove recipients.%s or give it a new URL", dest, status, name)
	case class == envelope.ErrNotFound:
		what = fmt.Sprintf("%s does not exist (%s): check the URL of recipients.%s", dest, status, name)
	case code == http.StatusRequestEntityTooLarge:
		what = tooLarge(dest, status, b)
	case class == envelope.ErrValidation:
		what = fmt.Sprintf("%s refused the webhook (%s): check what the receiver expects of Herald's JSON body (type, delivery_id, intent, butler, recipient, message, …)",
			dest, status)
	default:
		what = fmt.Sprintf("%s is unavailable (%s); Herald tries again later", dest, status)
	}
	return fmt.Errorf("%w: %s", class, what)
}
