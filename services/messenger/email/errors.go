package email

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/emersion/go-smtp"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// The stages of an SMTP session, named as in error messages.
const (
	stageStartTLS = "STARTTLS"
	stageEHLO     = "EHLO"
	stageAuth     = "AUTH"
	stageMail     = "MAIL FROM"
	stageRcpt     = "RCPT TO"
	stageData     = "DATA"
)

// classify maps what went wrong at one stage of the session to an envelope
// error class: any 4xx reply is temporary (target_unavailable); a rejected
// password is forbidden; a refused recipient is not_found; any other 5xx is
// a validation error, since sending the same mail again fails the same way.
// Errors without an SMTP reply are broken connections, worth a retry: before
// the end of the mail was sent (after it, afterEnd decides).
func (s *Sender) classify(stage, to string, err error) error {
	var se *smtp.SMTPError
	if !errors.As(err, &se) {
		if isTLSError(err) {
			return s.tlsFailed(err)
		}
		return fmt.Errorf("%w: the session with SMTP server %s broke off at %s: %w; retry later", envelope.ErrTargetUnavailable, s.addr, stage, err)
	}
	reply := replyText(se)
	policy := se.EnhancedCode[0] == 5 && se.EnhancedCode[1] == 7 // X.7.X: security or policy
	switch {
	case se.Code >= 400 && se.Code < 500:
		return replyErr(envelope.ErrTargetUnavailable, se, "SMTP server %s answered %s with %q, a temporary failure; retry later", s.addr, stage, reply)
	case se.Code < 500 || se.Code >= 600:
		return replyErr(envelope.ErrTargetUnavailable, se, "SMTP server %s answered %s with the unexpected %q; retry later", s.addr, stage, reply)
	case stage == stageAuth && (se.Code == 535 || se.EnhancedCode == smtp.EnhancedCode{5, 7, 8}):
		return replyErr(envelope.ErrForbidden, se, "SMTP server %s rejected the credentials (%q); check the user and password in the SMTP URL in %s", s.addr, reply, s.secretName)
	case stage == stageAuth:
		return replyErr(envelope.ErrForbidden, se, "SMTP server %s refused AUTH PLAIN with %q; check the account and the SMTP URL in %s", s.addr, reply, s.secretName)
	case se.Code == 530:
		return replyErr(envelope.ErrForbidden, se, "SMTP server %s requires authentication (%q); put user:password in the SMTP URL in %s", s.addr, reply, s.secretName)
	case stage == stageRcpt && policy:
		return replyErr(envelope.ErrForbidden, se, "SMTP server %s will not deliver to %s for this account (%q); check that the server relays for %s", s.addr, to, reply, s.from.Address)
	case stage == stageRcpt:
		return replyErr(envelope.ErrNotFound, se, "SMTP server %s refused recipient %s (%q); check the address", s.addr, to, reply)
	case policy:
		return replyErr(envelope.ErrForbidden, se, "SMTP server %s refused %s for policy reasons (%q); check that the account may send as %s", s.addr, stage, reply, s.from.Address)
	default:
		return replyErr(envelope.ErrValidation, se, "SMTP server %s rejected the mail at %s with %q; it was not sent, and sending it again fails the same way", s.addr, stage, reply)
	}
}

// afterEnd classifies a failure after the end of the mail was sent: the
// server's reply as classify does, or, when no reply came (a timeout, a
// reset), a timeout: the server may have taken the mail.
func (s *Sender) afterEnd(to string, err error) error {
	if deliver.OutcomeUnknown(err, true) {
		return fmt.Errorf("%w: SMTP server %s gave no answer to the end of the mail (%w), and it may have taken the mail", envelope.ErrTimeout, s.addr, err)
	}
	return s.classify(stageData, to, err)
}

// replyError is an SMTP reply classified: its message says what happened
// and what to do, and errors.Is and errors.As find both the envelope class
// and go-smtp's *smtp.SMTPError.
type replyError struct {
	msg   string
	class error
	reply *smtp.SMTPError
}

func (e *replyError) Error() string   { return e.msg }
func (e *replyError) Unwrap() []error { return []error{e.class, e.reply} }

func replyErr(class error, reply *smtp.SMTPError, format string, args ...any) error {
	return &replyError{msg: class.Error() + ": " + fmt.Sprintf(format, args...), class: class, reply: reply}
}

// replyText is an SMTP reply as the server wrote it: "451 4.3.0 try later".
func replyText(se *smtp.SMTPError) string {
	ec := se.EnhancedCode
	if ec == smtp.NoEnhancedCode || ec == smtp.EnhancedCodeNotSet {
		return fmt.Sprintf("%d %s", se.Code, se.Message)
	}
	return fmt.Sprintf("%d %d.%d.%d %s", se.Code, ec[0], ec[1], ec[2], se.Message)
}

// dialFailed is a connection that could not be opened.
func (s *Sender) dialFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return s.ctxErr(ctx, false)
	}
	if isTLSError(err) {
		return s.tlsFailed(err)
	}
	return fmt.Errorf("%w: cannot connect to SMTP server %s: %w; check the host and port in the SMTP URL in %s and that the server is up; retry later", envelope.ErrTargetUnavailable, s.addr, err, s.secretName)
}

// tlsFailed is a failed TLS handshake, most often a certificate the system
// does not trust.
func (s *Sender) tlsFailed(err error) error {
	return fmt.Errorf("%w: TLS with SMTP server %s failed: %w; if the server's certificate comes from a private CA, name it in ca_file", envelope.ErrTargetUnavailable, s.addr, err)
}

// ctxErr says that the delivery's context ended the session; ended says
// whether the end of the mail had been sent, so the server may have it.
func (s *Sender) ctxErr(ctx context.Context, ended bool) error {
	switch {
	case deliver.OutcomeUnknown(ctx.Err(), ended):
		return fmt.Errorf("%w: the delivery stopped before SMTP server %s answered the end of the mail, and it may have taken the mail: %w", envelope.ErrTimeout, s.addr, ctx.Err())
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: SMTP server %s did not take the mail before the delivery's deadline, and has nothing; retry later: %w", envelope.ErrTargetUnavailable, s.addr, ctx.Err())
	}
	return fmt.Errorf("%w: the delivery to SMTP server %s was cancelled before the mail was sent; retry later: %w", envelope.ErrTargetUnavailable, s.addr, ctx.Err())
}

func isTLSError(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		alert     tls.AlertError
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &record) || errors.As(err, &alert) ||
		errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// tooLarge names the limits when the server refused the mail as too large:
// a 552 to its end (RFC 5321 §4.5.3.1.10; a 5.2.2 is a full mailbox, not
// this), or the enhanced codes 5.3.4 and 5.2.3 (RFC 3463). size is what was
// sent; the server's own limit is its SIZE (RFC 1870), where it tells it.
// nil for any other error.
func (s *Sender) tooLarge(c *smtp.Client, err error, size int64) error {
	se, ok := errors.AsType[*smtp.SMTPError](err)
	if !ok || !sizeRefusal(se) {
		return nil
	}
	limit := "what it takes"
	if has, v := c.Extension("SIZE"); has {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
			limit = "its limit of " + bus.Bytes(n)
		}
	}
	ch, _ := config.ChannelOf(channelType)
	return replyErr(envelope.ErrValidation, se, "SMTP server %s refused the mail as too large (%q): with its files in base64 it was %s, over %s; email sends files of up to %s each, and most servers take mails of up to 25 MB: send fewer or smaller files, or a link",
		s.addr, replyText(se), bus.Bytes(size), limit, bus.Bytes(ch.MaxFile))
}

func sizeRefusal(se *smtp.SMTPError) bool {
	switch se.EnhancedCode {
	case smtp.EnhancedCode{5, 3, 4}, smtp.EnhancedCode{5, 2, 3}:
		return true
	case smtp.EnhancedCode{5, 2, 2}:
		return false
	}
	return se.Code == 552
}

// counter counts the bytes written through it.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
