// Package email is Herald's email channel: it delivers send and reply as
// mail through an SMTP submission server, one session per delivery, and
// takes people's mail through an SMTP listener of its own.
//
//   - sender.go, message.go, errors.go: Sender, the mail it composes, and
//     each failure's class.
//   - receiver.go, parse.go, ingress.go: Receiver, reading a mail, and the
//     ingress.v1 made of it.
//   - auth.go: whether anything vouches for a mail's From (DKIM, relays).
//   - files.go: files out as attachments, and attachments in (herald_files).
//
// docs/channels.md#email has how it works.
package email

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Default ports when the URL names none: the submission port with STARTTLS
// (RFC 6409) and submissions with implicit TLS (RFC 8314).
const (
	DefaultPort    = "587"
	DefaultTLSPort = "465"
)

// Timeouts of one SMTP session, unless deliver.Env.CallTimeout replaces
// them; the delivery's context can end it sooner.
const (
	dialTimeout    = 30 * time.Second
	commandTimeout = time.Minute
	// submitTimeout covers the server's answer after the final dot, when it
	// may scan the message.
	submitTimeout = 5 * time.Minute
)

// Sender delivers mail of one email integration. It holds no connection
// between deliveries, so it needs no Close.
type Sender struct {
	id          string
	addr        string // host:port
	host        string
	implicitTLS bool
	user, pass  string
	// secretName says where the SMTP URL came from ("$SMTP_URL" or a file),
	// for error messages that tell the operator what to fix.
	secretName string
	from       *mail.Address
	defaultTo  *mail.Address
	tlsConfig  *tls.Config
	log        *slog.Logger
	now        func() time.Time

	dialTimeout, commandTimeout, submitTimeout time.Duration
}

var _ deliver.Factory = New

// New builds the sender of an email integration: it resolves the SMTP URL
// from smtp_url_env or smtp_url_file and checks from, default_to and
// ca_file. Errors wrap config.ErrInvalid and never contain the password.
func New(in config.Integration, env deliver.Env) (deliver.Sender, error) {
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	log := env.Log()
	c, err := config.CheckedSettings[*Config](&in)
	if err != nil {
		return nil, err
	}
	s := &Sender{id: in.ID, log: log, now: time.Now, secretName: secretName(c),
		dialTimeout: env.Timeout(dialTimeout), commandTimeout: env.Timeout(commandTimeout), submitTimeout: env.Timeout(submitTimeout)}

	raw, err := config.Secret(getenv, c.SMTPURLEnv, c.SMTPURLFile)
	if err != nil {
		return nil, fmt.Errorf("%w (email integration %q)", err, in.ID)
	}
	if err := s.parseURL(raw); err != nil {
		return nil, fmt.Errorf("%w: email integration %q: %s", config.ErrInvalid, in.ID, err)
	}
	s.from, _ = mail.ParseAddress(c.From) // Check parsed both
	if c.DefaultTo != "" {
		s.defaultTo, _ = mail.ParseAddress(c.DefaultTo)
	}

	s.tlsConfig = &tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: email integration %q: ca_file: %w", config.ErrInvalid, in.ID, err)
		}
		roots, err := x509.SystemCertPool()
		if err != nil {
			roots = x509.NewCertPool()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: email integration %q: ca_file %s holds no PEM certificate", config.ErrInvalid, in.ID, c.CAFile)
		}
		s.tlsConfig.RootCAs = roots
	}
	return s, nil
}

func secretName(c *Config) string {
	if c.SMTPURLEnv != "" {
		return "$" + c.SMTPURLEnv
	}
	return c.SMTPURLFile
}

// parseURL reads smtp://user:pass@host:port or smtps://. Its errors never
// quote the URL, which holds the password.
func (s *Sender) parseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// No detail from url.Parse: its errors quote the URL, or the part of
		// the password that did not parse.
		return fmt.Errorf("the SMTP URL in %s is not a URL like smtp://user:password@host:587; check the port and percent-encode special characters in the user and password", s.secretName)
	}
	switch u.Scheme {
	case "smtp":
	case "smtps":
		s.implicitTLS = true
	default:
		return fmt.Errorf("the SMTP URL in %s has scheme %q; use smtp:// (STARTTLS) or smtps:// (implicit TLS)", s.secretName, u.Scheme)
	}
	s.host = u.Hostname()
	if s.host == "" {
		return fmt.Errorf("the SMTP URL in %s names no host; write it like smtp://user:password@host:587", s.secretName)
	}
	port := u.Port()
	if port == "" {
		port = DefaultPort
		if s.implicitTLS {
			port = DefaultTLSPort
		}
	}
	s.addr = net.JoinHostPort(s.host, port)
	if u.User != nil {
		s.user = u.User.Username()
		s.pass, _ = u.User.Password()
		if s.user == "" && s.pass != "" {
			return fmt.Errorf("the SMTP URL in %s has a password but no user; write it like smtp://user:password@host:587", s.secretName)
		}
	}
	return nil
}

// Deliver sends d as one mail. Send and reply are supported; react is not,
// since mail has no reactions. A delivery whose mail an earlier attempt
// already sent (d.Done) is answered from d.Done without sending again.
func (s *Sender) Deliver(ctx context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	switch d.Intent {
	case "", "send", "reply":
	case "react":
		return deliver.Receipt{}, fmt.Errorf("%w: react is not supported on email, which has no reactions; answer with intent reply instead", envelope.ErrValidation)
	default:
		return deliver.Receipt{}, fmt.Errorf("%w: unknown intent %q; use send or reply on email", envelope.ErrValidation, d.Intent)
	}
	if len(d.Done) > 0 {
		return deliver.Receipt{MessageIDs: d.Done}, nil
	}
	if strings.TrimSpace(d.Message) == "" {
		return deliver.Receipt{}, fmt.Errorf("%w: the message is empty; an email needs a body", envelope.ErrValidation)
	}
	to, err := s.recipient(d)
	if err != nil {
		return deliver.Receipt{}, err
	}
	m, err := compose(d, s.from, to, s.now())
	if err != nil {
		return deliver.Receipt{}, fmt.Errorf("%w: composing the mail: %w", envelope.ErrInternal, err)
	}
	if err := d.Calling(); err != nil {
		return deliver.Receipt{}, err
	}
	if err := s.send(ctx, to.Address, m); err != nil {
		return deliver.Receipt{}, err
	}
	s.log.DebugContext(ctx, "email sent", "channel", "email:"+s.id, "butler", d.Butler, "message_id", m.messageID)
	return d.SentOne(m.messageID, "mail")
}

// recipient resolves who gets the mail: the notify's recipient, else for a
// reply the person who wrote, else the integration's default_to.
func (s *Sender) recipient(d deliver.Delivery) (*mail.Address, error) {
	raw, what := d.Recipient, "recipient"
	if raw == "" && d.Intent == "reply" && d.Sender != "" {
		// A reply to a sender whose From was not authenticated (let in by
		// allow_from "*" or pairing) goes to the address the mail named,
		// as any mail client's reply would.
		raw, what = strings.TrimPrefix(d.Sender, UnverifiedPrefix), "the sender of the message replied to (request_context.source_sender_identity)"
	}
	if raw == "" {
		if s.defaultTo == nil {
			return nil, fmt.Errorf("%w: no recipient: set recipient to an email address or default_to on email integration %q", envelope.ErrValidation, s.id)
		}
		return s.defaultTo, nil
	}
	addr, err := mail.ParseAddress(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q is not an email address like name@example.com", envelope.ErrValidation, what, clean(raw))
	}
	return addr, nil
}

// send runs one SMTP session: connect, STARTTLS, AUTH PLAIN, MAIL, RCPT,
// DATA, QUIT.
func (s *Sender) send(ctx context.Context, to string, m composed) (err error) {
	c, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	// go-smtp sets its own deadline per command; closing the connection is
	// how the context ends a session early.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	// ended: the mail's final dot was sent. Before it the server cannot
	// have taken the mail (RFC 5321 §4.1.1.4: a transaction cut off in DATA
	// is discarded); after it, only the server's reply says whether it did.
	ended := false
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = s.ctxErr(ctx, ended)
		}
	}()

	if s.user != "" {
		if _, ok := c.TLSConnectionState(); !ok {
			// connect never gets here without TLS; this guard keeps it so.
			return fmt.Errorf("%w: refusing to send the SMTP password to %s without TLS", envelope.ErrInternal, s.addr)
		}
		if !c.SupportsAuth(sasl.Plain) {
			_, mechs := c.Extension("AUTH")
			return fmt.Errorf("%w: SMTP server %s does not offer AUTH PLAIN (offers %q); remove the credentials from the SMTP URL in %s or use a server that accepts PLAIN", envelope.ErrValidation, s.addr, mechs, s.secretName)
		}
		if err := c.Auth(sasl.NewPlainClient("", s.user, s.pass)); err != nil {
			return s.classify(stageAuth, to, err)
		}
	}

	var opts *smtp.MailOptions
	if !isASCII(s.from.Address) || !isASCII(to) {
		if ok, _ := c.Extension("SMTPUTF8"); !ok {
			return fmt.Errorf("%w: SMTP server %s cannot take the non-ASCII address %s or %s (no SMTPUTF8); use an ASCII address", envelope.ErrValidation, s.addr, s.from.Address, to)
		}
		opts = &smtp.MailOptions{UTF8: true}
	}
	if err := c.Mail(s.from.Address, opts); err != nil {
		return s.classify(stageMail, to, err)
	}
	if err := c.Rcpt(to, nil); err != nil {
		return s.classify(stageRcpt, to, err)
	}
	w, err := c.Data()
	if err != nil {
		return s.classify(stageData, to, err)
	}
	sent := &counter{w: w}
	if err := m.writeTo(sent); err != nil {
		// No dot goes out after the error: the connection is closed with
		// the mail cut off, which the server discards, so a file that
		// could not be read is never delivered half.
		if errors.Is(err, envelope.ErrInternal) {
			return err
		}
		return s.classify(stageData, to, err)
	}
	ended = true
	if err := w.Close(); err != nil {
		if big := s.tooLarge(c, err, sent.n); big != nil {
			return big
		}
		return s.afterEnd(to, err)
	}
	// The server has taken the mail; a failed QUIT changes nothing.
	_ = c.Quit()
	return nil
}

// connect dials the server and makes the session secure: TLS from the start
// for smtps://, STARTTLS for smtp:// whenever the server offers it, and
// never clear text when there is a password to send.
func (s *Sender) connect(ctx context.Context) (*smtp.Client, error) {
	if s.implicitTLS {
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: s.dialTimeout}, Config: s.tlsConfig}
		conn, err := d.DialContext(ctx, "tcp", s.addr)
		if err != nil {
			return nil, s.dialFailed(ctx, err)
		}
		return s.client(conn), nil
	}

	conn, err := s.dial(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	c, err := smtp.NewClientStartTLS(conn, s.tlsConfig)
	switch {
	case err == nil:
		s.setTimeouts(c)
		// EHLO again over TLS now, so a bad certificate shows up as a TLS
		// error rather than as a failed AUTH or MAIL.
		if err := c.Hello("localhost"); err != nil {
			c.Close()
			if ctx.Err() != nil {
				return nil, s.ctxErr(ctx, false)
			}
			return nil, s.classify(stageEHLO, "", err)
		}
		return c, nil
	case ctx.Err() != nil:
		return nil, s.ctxErr(ctx, false)
	case !errNoStartTLS(err):
		return nil, s.classify(stageStartTLS, "", err)
	case s.user != "":
		return nil, fmt.Errorf("%w: SMTP server %s does not offer STARTTLS, and the password in the SMTP URL is never sent in clear; use a server or port with STARTTLS (587) or implicit TLS (smtps://, 465), or remove the credentials for a relay that needs none", envelope.ErrValidation, s.addr)
	}
	// No STARTTLS and nothing secret to send: a local relay. go-smtp cannot
	// upgrade a session it started without TLS, so dial again in clear.
	conn, err = s.dial(ctx)
	if err != nil {
		return nil, err
	}
	return s.client(conn), nil
}

func (s *Sender) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: s.dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return nil, s.dialFailed(ctx, err)
	}
	return conn, nil
}

func (s *Sender) client(conn net.Conn) *smtp.Client {
	c := smtp.NewClient(conn)
	s.setTimeouts(c)
	return c
}

func (s *Sender) setTimeouts(c *smtp.Client) {
	c.CommandTimeout = s.commandTimeout
	c.SubmissionTimeout = s.submitTimeout
}

// errNoStartTLS recognises go-smtp's refusal to go on when the server does
// not advertise STARTTLS. go-smtp has no sentinel for it; it is the one error
// of NewClientStartTLS that is neither an SMTP reply nor a network error, and
// a test (TestCredentialsNeverInClear) pins the wording.
func errNoStartTLS(err error) bool {
	var smtpErr *smtp.SMTPError
	var netErr net.Error
	return !errors.As(err, &smtpErr) && !errors.As(err, &netErr) &&
		strings.Contains(err.Error(), "doesn't support STARTTLS")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
