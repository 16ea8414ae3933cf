package webhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// classifyStatus turns a receiver's answer other than 2xx into one of the
// envelope error classes, with a sentence saying what to do. Standard
// Webhooks' advice is followed: 3xx and 410 mean the URL is to be changed,
// 429 and 502/503/504 that the receiver is loaded, Retry-After is honoured.
func (s *sender) classifyStatus(dest, name string, u *url.URL, resp *http.Response, answer []byte) error {
	code := resp.StatusCode
	status := strconv.Itoa(code)
	if t := http.StatusText(code); t != "" {
		status += " " + t
	}
	status += s.says(u, answer)
	switch {
	case code >= 300 && code < 400:
		to := ""
		if l, err := resp.Location(); err == nil {
			to = " to " + redact(l)
		}
		return fmt.Errorf("%w: %s redirects%s (%s); Herald does not follow redirects: put the final URL in recipients.%s",
			envelope.ErrNotFound, dest, to, status, name)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%w: %s refused the webhook (%s): make the receiver verify Standard Webhooks signatures with the secret in secret_env %s of integration %q, and check that its clock is within 5 minutes of Herald's",
			envelope.ErrForbidden, dest, status, s.secretEnv, s.id)
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %s does not exist (%s): check the URL of recipients.%s", envelope.ErrNotFound, dest, status, name)
	case code == http.StatusGone:
		return fmt.Errorf("%w: %s is gone (%s): the receiver no longer takes webhooks; remove recipients.%s or give it a new URL", envelope.ErrNotFound, dest, status, name)
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if wait, ok := retryAfter(resp.Header.Get("Retry-After"), s.now()); ok {
			// Class first, then what happened: a RetryAfterError's own
			// text says only how long to wait.
			detail := fmt.Sprintf("%s is busy (%s); Herald tries again then", dest, status)
			return fmt.Errorf("%w: %s", &envelope.RetryAfterError{Wait: wait, Err: errors.New(detail)}, detail)
		}
		fallthrough
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly || code >= 500:
		return fmt.Errorf("%w: %s is unavailable (%s); Herald tries again later", envelope.ErrTargetUnavailable, dest, status)
	case code >= 400:
		return fmt.Errorf("%w: %s refused the webhook (%s): check what the receiver expects of Herald's JSON body (type, delivery_id, intent, butler, recipient, message, …)",
			envelope.ErrValidation, dest, status)
	}
	return fmt.Errorf("%w: %s gave no webhook answer (%s); Herald tries again later", envelope.ErrTargetUnavailable, dest, status)
}

// classifyTransport turns a failed POST (no answer) into an error class;
// written says whether the webhook went out whole (deliver.TraceWrites). A
// webhook sent and not answered may be at the receiver: a timeout, which the
// messenger treats as uncertain (on_uncertain), and a resend carries the
// same webhook-id. One that never went out is target_unavailable. The
// client's error is not wrapped: its text holds the whole URL.
func (s *sender) classifyTransport(ctx context.Context, dest, name string, u *url.URL, err error, written bool) error {
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	switch {
	case deliver.OutcomeUnknown(err, written) && ctx.Err() != nil:
		return fmt.Errorf("%w: %s did not answer before the delivery's deadline (%w); the receiver may have the webhook, and a resend carries the same webhook-id",
			envelope.ErrTimeout, dest, ctx.Err())
	case deliver.OutcomeUnknown(err, written):
		return fmt.Errorf("%w: %s gave no answer to the webhook (%s); the receiver may have it, and a resend carries the same webhook-id",
			envelope.ErrTimeout, dest, s.scrub(cause.Error(), u))
	case ctx.Err() != nil:
		return fmt.Errorf("%w: the webhook to %s was not sent: %w", envelope.ErrTargetUnavailable, dest, ctx.Err())
	}
	return fmt.Errorf("%w: %s could not be reached (%s): check that the receiver is up and that recipients.%s is right; Herald tries again later",
		envelope.ErrTargetUnavailable, dest, s.scrub(cause.Error(), u), name)
}

// retryAfter reads a Retry-After header, seconds or an HTTP date, as a wait
// of at least a second.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
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

// maxSays bounds what of a receiver's answer goes into an error.
const maxSays = 200

// says is what the receiver's answer says, for an error message: its
// beginning on one line, with secrets and the URL's tokens removed; "" for
// an empty answer or an HTML page.
func (s *sender) says(u *url.URL, answer []byte) string {
	text := strings.TrimSpace(string(answer))
	if text == "" || strings.HasPrefix(text, "<") {
		return ""
	}
	text = strings.Join(strings.FieldsFunc(text, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	text = s.scrub(text, u)
	if len(text) > maxSays {
		text = clip(text, maxSays) + "…"
	}
	return "; the receiver says: " + text
}

// scrub removes from text what must never be shown: the secrets, and the
// parts of the recipient's URL that may be tokens (user info, long path
// segments, query values), which a receiver may echo.
func (s *sender) scrub(text string, u *url.URL) string {
	var hide []string
	for _, r := range s.secrets.raw {
		hide = append(hide, r, strings.TrimPrefix(r, SecretPrefix))
	}
	if u != nil {
		hide = append(hide, u.String(), u.RawQuery, u.EscapedPath(), u.Path)
		if u.User != nil {
			hide = append(hide, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				hide = append(hide, p)
			}
		}
		for _, seg := range strings.Split(u.Path, "/") {
			if len(seg) >= 8 {
				hide = append(hide, seg)
			}
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				if len(v) >= 4 {
					hide = append(hide, v, url.QueryEscape(v))
				}
			}
		}
	}
	// Longest first, so a part is not left behind by a shorter one inside it.
	slices.SortFunc(hide, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, h := range hide {
		if len(h) >= 4 {
			text = strings.ReplaceAll(text, h, "<redacted>")
		}
	}
	return text
}
