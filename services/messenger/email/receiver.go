package email

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/mail"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/nats-io/nats.go/jetstream"

	emailspec "github.com/heraldhq/herald/pkg/channel/email"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ratelimit"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Timeouts and limits of the SMTP listener.
const (
	// readTimeout bounds each command and, since go-smtp does not extend
	// it while DATA is read, a whole message: RFC 5321 §4.5.3.2 gives the
	// data 10 minutes.
	readTimeout  = 10 * time.Minute
	writeTimeout = time.Minute
	// ingressTimeout bounds handing one mail to the sink; slower than that,
	// the mail is answered 451 and the sending server retries it.
	ingressTimeout = 30 * time.Second
	// drainTimeout is how long a stopping listener lets open sessions
	// finish before it drops them.
	drainTimeout = 10 * time.Second
	// maxRecipients per mail: the minimum RFC 5321 §4.5.3.1.8 asks for.
	maxRecipients   = 100
	defaultMaxBytes = emailspec.DefaultMaxBytes
)

// relistenBackoff are the waits before listening again after the listener
// failed (the address taken, say); the last repeats.
var relistenBackoff = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second}

// The SMTP replies the listener gives of its own accord. go-smtp sends an
// *smtp.SMTPError as it is (it does not unwrap), so these are returned bare.
var (
	errAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	errBadSender    = &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 1, 7}, Message: "Sender address is not valid"}
	errBadRecipient = &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 1, 3}, Message: "Recipient address is not valid"}
	errMalformed    = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Message header could not be parsed"}
	errTryLater     = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Message could not be stored just now; try again later"}
	errInvalid      = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Message content is not acceptable"}
)

func errRelayDenied(domain string) error {
	return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: fmt.Sprintf("Relaying denied: this server takes no mail for %q", domain)}
}

// Receiver is the SMTP listener of one email integration: it takes mail
// for the integration's domains from anyone (who may reach a butler is the
// switchboard's decision) and hands each mail to the sink as one
// ingress.v1, answering 250 only once the sink has it. Auto-replies, list
// mail and bounces are accepted and dropped, so no loop can form and no
// sender retries them.
type Receiver struct {
	id        string
	addr      string
	domains   map[string]bool
	host      string // the name in the greeting
	maxBytes  int64
	tlsConfig *tls.Config // nil: no STARTTLS
	// user and pass, when set, are required through AUTH PLAIN before MAIL.
	user, pass string
	instance   string
	log        *slog.Logger
	now        func() time.Time
	// trusted are the authserv-ids of inbound.trusted_relays, lower-cased.
	trusted map[string]bool
	// lookupTXT fetches DKIM keys: the system's resolver unless a test
	// gives its own (WithLookupTXT).
	lookupTXT LookupTXT
	// js holds the mails' attachments in herald_files (nil: none is kept).
	js jetstream.JetStream

	mu          sync.Mutex // serialises status reports
	lastInbound time.Time
	state       string
	detail      string
}

var _ deliver.ReceiverFactory = NewReceiver

// A ReceiverOption changes what a receiver depends on outside its
// configuration (see NewReceiverFactory).
type ReceiverOption func(*Receiver)

// WithLookupTXT makes receivers fetch DKIM keys (TXT records at
// <selector>._domainkey.<domain>) with lookup instead of the system's DNS
// resolver: tests serve the keys they made.
func WithLookupTXT(lookup LookupTXT) ReceiverOption {
	return func(r *Receiver) { r.lookupTXT = lookup }
}

// NewReceiverFactory is NewReceiver with options.
func NewReceiverFactory(opts ...ReceiverOption) deliver.ReceiverFactory {
	return func(in config.Integration, env deliver.Env) (deliver.Receiver, error) {
		return newReceiver(in, env, opts)
	}
}

// NewReceiver builds the SMTP listener of an email integration from its
// inbound block: nil, nil when the integration takes no inbound mail.
// Errors wrap config.ErrInvalid and never contain the AUTH password.
func NewReceiver(in config.Integration, env deliver.Env) (deliver.Receiver, error) {
	return newReceiver(in, env, nil)
}

func newReceiver(in config.Integration, env deliver.Env, opts []ReceiverOption) (deliver.Receiver, error) {
	if !in.Inbound.Enabled || in.Disabled {
		return nil, nil
	}
	c, err := config.CheckedSettings[*Config](&in)
	if err != nil {
		return nil, err
	}
	ib := c.Inbound
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	log := env.Log()
	r := &Receiver{
		id:        in.ID,
		addr:      strings.TrimSpace(ib.Listen),
		domains:   map[string]bool{},
		maxBytes:  ib.MaxBytes,
		instance:  env.Instance,
		log:       log.With("channel", channelType+":"+in.ID),
		now:       time.Now,
		trusted:   map[string]bool{},
		lookupTXT: net.DefaultResolver.LookupTXT,
		js:        env.JS,
	}
	if r.maxBytes <= 0 {
		r.maxBytes = defaultMaxBytes
	}
	if err := r.takeDomains(ib.Domains, c.From); err != nil {
		return nil, err
	}
	if err := r.loadTLS(ib.TLSCertFile, ib.TLSKeyFile); err != nil {
		return nil, err
	}
	if err := r.requireAuth(ib.AuthEnv, getenv); err != nil {
		return nil, err
	}
	if err := r.trustRelays(ib.TrustedRelays); err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

// invalid is an error in the receiver's configuration, naming its
// integration.
func (r *Receiver) invalid(format string, a ...any) error {
	return fmt.Errorf("%w: email integration %q: %s", config.ErrInvalid, r.id, fmt.Sprintf(format, a...))
}

// takeDomains sets the domains the listener takes mail for, the first
// named being the one it greets with: inbound.domains, else the domain of
// from.
func (r *Receiver) takeDomains(domains []string, from string) error {
	for _, d := range domains {
		d = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(d), "@"), "."))
		if d == "" || strings.ContainsAny(d, "@ \t<>") {
			return r.invalid("inbound.domains entry %q is not a domain like example.com", d)
		}
		r.domains[d] = true
		if r.host == "" {
			r.host = d
		}
	}
	if len(r.domains) == 0 {
		// No domains listed: take mail for the address we send from, and
		// nothing else: never an open relay.
		a, err := mail.ParseAddress(from)
		_, d, ok := strings.Cut(addressOf(a, err), "@")
		if !ok || d == "" {
			return r.invalid("inbound.domains is empty and from %q names no domain; list the domains to take mail for in inbound.domains", from)
		}
		r.domains[d], r.host = true, d
	}
	return nil
}

// loadTLS enables STARTTLS with the certificate and key of
// inbound.tls_cert_file and tls_key_file, when they are set.
func (r *Receiver) loadTLS(certFile, keyFile string) error {
	if certFile == "" {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return r.invalid("inbound.tls_cert_file and tls_key_file: %v", err)
	}
	r.tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return nil
}

// requireAuth makes the listener require AUTH with the user:password held
// by the variable inbound.auth_env names, when it names one. The errors
// never hold the password.
func (r *Receiver) requireAuth(authEnv string, getenv config.Getenv) error {
	if authEnv == "" {
		return nil
	}
	secret, err := config.Secret(getenv, authEnv, "")
	if err != nil {
		return fmt.Errorf("%w (email integration %q, inbound.auth_env)", err, r.id)
	}
	user, pass, ok := strings.Cut(secret, ":")
	if !ok || user == "" || pass == "" {
		return r.invalid("environment variable %s (inbound.auth_env) must hold user:password", authEnv)
	}
	r.user, r.pass = user, pass
	return nil
}

// trustRelays takes the authserv-ids of inbound.trusted_relays, and warns
// when anyone who can reach the listener could write a relay's header.
func (r *Receiver) trustRelays(ids []string) error {
	for _, id := range ids {
		id = strings.ToLower(strings.TrimSpace(id))
		if id == "" || strings.ContainsAny(id, " \t;()\"=") {
			return r.invalid("inbound.trusted_relays entry %q is not an authserv-id: name the relay as it names itself in the first word of its Authentication-Results header, like mx.example.com", id)
		}
		r.trusted[id] = true
	}
	if len(r.trusted) > 0 && r.user == "" && !loopback(r.addr) {
		// Whoever reaches the listener without passing the relay can write
		// the relay's header themselves.
		r.log.Warn("inbound.trusted_relays is set but the listener takes mail from anyone who can reach it; set auth_env so only the relay can deliver, or keep the port reachable from the relay alone", "addr", r.addr)
	}
	return nil
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func addressOf(a *mail.Address, err error) string {
	if err != nil || a == nil {
		return ""
	}
	return strings.ToLower(a.Address)
}

// Receive listens until ctx is done, then stops taking connections, lets
// open sessions finish for up to drainTimeout, and returns nil. A listener
// that fails is reported (StateError, with the reason) and opened again
// after a pause, so a port that is briefly taken does not leave the
// integration deaf.
func (r *Receiver) Receive(ctx context.Context, sink deliver.Sink) error {
	attempt := 0
	for {
		started := time.Now()
		err := r.serve(ctx, sink)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > time.Minute {
			attempt = 0
		}
		wait := relistenBackoff[min(attempt, len(relistenBackoff)-1)]
		attempt++
		r.log.ErrorContext(ctx, "inbound SMTP listener failed", "err", err, "retry_in", wait.String())
		r.report(sink, deliver.StateError, fmt.Sprintf("%v; trying again in %s", err, wait))
		if ratelimit.Sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// serve runs one listener until ctx is done (nil) or it fails (the error).
func (r *Receiver) serve(ctx context.Context, sink deliver.Sink) error {
	l, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", r.addr, err)
	}
	ln := &trackingListener{Listener: l, conns: map[net.Conn]struct{}{}}

	// Mail taken before ctx ended is finished under its own deadline, so
	// that stopping does not turn a mail half stored into a 451.
	mailCtx := context.WithoutCancel(ctx)
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{r: r, sink: sink, ctx: mailCtx, conn: c}, nil
	}))
	srv.Domain = r.host
	srv.TLSConfig = r.tlsConfig
	srv.AllowInsecureAuth = false
	srv.MaxMessageBytes = r.maxBytes
	srv.MaxRecipients = maxRecipients
	srv.ReadTimeout = readTimeout
	srv.WriteTimeout = writeTimeout
	srv.EnableSMTPUTF8 = true
	srv.ErrorLog = smtpLog{r.log}

	r.report(sink, deliver.StateRunning, "listening on "+l.Addr().String())
	r.log.InfoContext(ctx, "inbound SMTP listening", "addr", l.Addr().String(), "starttls", r.tlsConfig != nil, "auth", r.user != "")

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		_ = srv.Close()
		if err == nil {
			err = errors.New("the server stopped")
		}
		return fmt.Errorf("the SMTP listener on %s failed: %w", l.Addr(), err)
	case <-ctx.Done():
	}

	// Stop accepting, and wait for Serve to return before Shutdown, so no
	// connection is taken while Shutdown waits for the open ones. (Serve
	// registers the listener with go-smtp only once its goroutine runs, so
	// Shutdown alone could miss it.)
	_ = ln.Close()
	<-served
	drained := make(chan struct{})
	go func() {
		// Shutdown waits for every session's goroutine to end.
		_ = srv.Shutdown(context.Background())
		close(drained)
	}()
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		// go-smtp's Close does nothing after Shutdown, so the connections
		// are closed here; a DATA being stored still finishes first.
		ln.closeAll()
		<-drained
	}
	return nil
}

// received notes a mail handed to the sink, for channel_status.
func (r *Receiver) received(sink deliver.Sink) {
	r.mu.Lock()
	r.lastInbound = r.now().UTC()
	state, detail := r.state, r.detail
	r.mu.Unlock()
	r.report(sink, state, detail)
}

// report tells the sink the listener's state. Reports are serialised, so
// the sink never sees an older one after a newer.
func (r *Receiver) report(sink deliver.Sink, state, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state, r.detail = state, detail
	sink.Status(deliver.Status{
		Integration: r.id,
		Channel:     channelType,
		State:       state,
		Detail:      detail,
		LastInbound: r.lastInbound,
		Instance:    r.instance,
		UpdatedAt:   r.now().UTC(),
	})
}

// partial is the ingress of a mail refused before its content was read:
// who sent it to whom, for the audit log.
func (r *Receiver) partial(mailFrom string, rcpts []string) *envelope.Ingress {
	endpoint := unknownSender
	if len(rcpts) > 0 {
		endpoint = identity(rcpts[0], unknownSender)
	}
	sender := identity(strings.ToLower(mailFrom), unknownSender)
	meta := map[string]string{"envelope_from": sender, "to": joinLimited(rcpts, ", "), "chat_type": "private"}
	return envelope.NewIngress(r.id, channelType, endpoint, sender, "", "", "", meta)
}

// accept decides what becomes of one mail that arrived in full, and so
// what DATA is answered: 250 once the sink has it (or it was dropped on
// purpose), 451 if the sink failed, so the sending server retries and
// nothing is lost.
func (r *Receiver) accept(ctx context.Context, sink deliver.Sink, raw []byte, mailFrom string, rcpts []string) error {
	m, err := parseMail(raw)
	if err != nil {
		sink.Dropped(ctx, r.partial(mailFrom, rcpts), reasonMalformed)
		r.log.InfoContext(ctx, "inbound mail refused", "reason", reasonMalformed, "err", err)
		return errMalformed
	}
	if reason := dropReason(m, mailFrom); reason != "" {
		// Accepted and discarded: a refusal would make the sender bounce,
		// and a bounce to an auto-responder is the loop this prevents.
		in := newIngress(r.id, m, raw, mailFrom, rcpts, r.now(), senderAuth{how: authNotChecked})
		sink.Dropped(ctx, withoutContent(in), reason)
		r.log.InfoContext(ctx, "inbound mail dropped", "reason", reason, "message_id", in.NativeID)
		return nil
	}
	auth := r.authenticate(ctx, m, raw)
	if auth.retry {
		r.log.WarnContext(ctx, "inbound mail sender could not be checked just now; answered 451 so the sender retries",
			"sender_auth", auth.how, "by", auth.by, "detail", auth.detail, "message_id", mailID(m, raw))
		return errTryLater
	}
	if len(m.attachments) > 0 {
		m.attachments = holdAttachments(raw, r.holder(ctx, mailID(m, raw)))
	}
	in := newIngress(r.id, m, raw, mailFrom, rcpts, r.now(), auth)
	if !auth.ok {
		// The switchboard audits what it does with the stranger under this
		// request_id; this says why they are one. No content is logged.
		r.log.InfoContext(ctx, "inbound mail sender not authenticated; it reaches the switchboard as "+UnverifiedPrefix+"<address>",
			"sender_auth", auth.how, "from", in.Meta["chat_id"], "by", auth.by, "detail", auth.detail,
			"message_id", in.NativeID, "request_id", in.RequestContext.RequestID)
	}
	if err := sink.Ingress(ctx, in); err != nil {
		if errors.Is(err, envelope.ErrValidation) {
			// It can never be stored: refuse it for good (the sender bounces
			// it) rather than have it retried for days, and audit why.
			sink.Dropped(ctx, withoutContent(in), reasonInvalid)
			return errInvalid
		}
		r.log.WarnContext(ctx, "inbound mail not stored; answered 451 so the sender retries", "message_id", in.NativeID, "err", err)
		return errTryLater
	}
	r.log.DebugContext(ctx, "inbound mail received", "message_id", in.NativeID, "request_id", in.RequestContext.RequestID)
	r.received(sink)
	return nil
}

// session is one SMTP session. go-smtp calls its methods from the
// connection's goroutine, and starts a new session after STARTTLS, so an
// AUTH never carries over from clear text.
type session struct {
	r      *Receiver
	sink   deliver.Sink
	ctx    context.Context
	conn   *smtp.Conn
	authed bool
	from   string
	to     []string
}

// AuthMechanisms offers PLAIN when the listener requires AUTH; go-smtp
// advertises it only over TLS.
func (s *session) AuthMechanisms() []string {
	if s.r.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

// Auth checks PLAIN credentials in constant time. Neither the user nor the
// password is ever logged.
func (s *session) Auth(mech string) (sasl.Server, error) {
	if s.r.user == "" {
		return nil, smtp.ErrAuthUnsupported
	}
	if mech != sasl.Plain {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(identity, user, pass string) error {
		okUser := subtle.ConstantTimeCompare([]byte(user), []byte(s.r.user))
		okPass := subtle.ConstantTimeCompare([]byte(pass), []byte(s.r.pass))
		if okUser&okPass != 1 || (identity != "" && identity != user) {
			s.r.log.WarnContext(s.ctx, "inbound SMTP authentication failed", "remote", s.remote())
			return smtp.ErrAuthFailed
		}
		s.authed = true
		return nil
	}), nil
}

// Mail starts a mail. With AUTH required, not before it: go-smtp leaves
// that to the session.
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.r.user != "" && !s.authed {
		return errAuthRequired
	}
	if len(from) > maxAddressLen || !utf8.ValidString(from) {
		return errBadSender
	}
	s.from, s.to = from, nil
	return nil
}

// Rcpt takes recipients in the listener's domains only: this is no relay.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	addr := strings.ToLower(to)
	if len(addr) > maxAddressLen || !utf8.ValidString(addr) {
		return errBadRecipient
	}
	domain := addr[strings.LastIndexByte(addr, '@')+1:]
	if !strings.Contains(addr, "@") || !s.r.domains[domain] {
		ctx, cancel := context.WithTimeout(s.ctx, ingressTimeout)
		defer cancel()
		s.sink.Dropped(ctx, s.r.partial(s.from, []string{addr}), reasonForeignDomain)
		return errRelayDenied(domain)
	}
	if !slices.Contains(s.to, addr) {
		s.to = append(s.to, addr)
	}
	return nil
}

// Data reads the mail and answers for it; see Receiver.accept.
func (s *session) Data(body io.Reader) error {
	from, to := s.from, slices.Clone(s.to)
	raw, err := io.ReadAll(body)
	ctx, cancel := context.WithTimeout(s.ctx, ingressTimeout)
	defer cancel()
	if errors.Is(err, smtp.ErrDataTooLarge) {
		s.sink.Dropped(ctx, s.r.partial(from, to), reasonTooLarge)
		return smtp.ErrDataTooLarge
	}
	if err != nil {
		return err // the connection broke; no one hears the answer
	}
	return s.r.accept(ctx, s.sink, raw, from, to)
}

func (s *session) Reset() { s.from, s.to = "", nil }

func (s *session) Logout() error { return nil }

func (s *session) remote() string {
	if c := s.conn.Conn(); c != nil {
		return c.RemoteAddr().String()
	}
	return ""
}

// trackingListener remembers its open connections, so that a stopping
// listener can close those that outlast the drain.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// smtpLog sends go-smtp's own messages to the logger: a broken connection
// (scanners, dropped clients) at debug, anything else at warn.
type smtpLog struct{ log *slog.Logger }

func (l smtpLog) Printf(format string, v ...any) { l.print(fmt.Sprintf(format, v...)) }
func (l smtpLog) Println(v ...any)               { l.print(fmt.Sprintln(v...)) }

func (l smtpLog) print(msg string) {
	msg = strings.TrimSpace(msg)
	if strings.HasPrefix(msg, "error handling ") {
		l.log.Debug("inbound SMTP connection ended with an error", "err", msg)
		return
	}
	l.log.Warn("inbound SMTP server", "err", msg)
}
