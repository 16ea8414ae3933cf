// Package smtptest runs an SMTP server for tests, like net/http/httptest: a
// real go-smtp server on 127.0.0.1 that records every mail it accepts,
// parsed into headers and MIME parts.
//
//   - NewServer, WithAuth, WithSTARTTLS, WithImplicitTLS, WithMaxBytes: a
//     server that enforces AUTH, offers TLS, or limits a mail's size.
//   - URL, Addr, CertPEM, WriteCertFile, ClientTLSConfig: how a client reaches it.
//   - Messages, WaitMessages, Auths: what it accepted, and every AUTH attempt.
//   - FailNext, FailNextRcpt, OnAccept, HangUpNext: refusals, a slow server,
//     and a reply lost.
//
// What it checks as a mail server does is in docs/testing.md, "The fakes".
package smtptest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
)

// Option configures a Server.
type Option func(*options)

type options struct {
	user, pass  string
	startTLS    bool
	implicitTLS bool
	maxBytes    int64
}

// WithAuth makes the server offer AUTH PLAIN and refuse MAIL (530) until a
// client has authenticated as user with pass. Without TLS the server offers
// AUTH in clear too, so a test can prove that its client never uses it: see
// Server.Auths.
func WithAuth(user, pass string) Option {
	return func(o *options) { o.user, o.pass = user, pass }
}

// WithSTARTTLS makes the server offer STARTTLS with a self-signed certificate
// for 127.0.0.1 and localhost; trust it through CertPEM or WriteCertFile.
// Combined with WithAuth, AUTH is offered only after STARTTLS, as on a real
// submission server.
func WithSTARTTLS() Option {
	return func(o *options) { o.startTLS = true }
}

// WithImplicitTLS makes the server speak TLS from the first byte (smtps://,
// the submission port 465), with the same self-signed certificate.
func WithImplicitTLS() Option {
	return func(o *options) { o.implicitTLS = true }
}

// WithMaxBytes makes the server take mails of up to n bytes (10 MiB
// without it): it advertises SIZE n and answers a longer one, at its end,
// with go-smtp's "552 5.3.4 Maximum message size exceeded".
func WithMaxBytes(n int64) Option {
	return func(o *options) { o.maxBytes = n }
}

// Message is one message the server accepted.
type Message struct {
	// From and To are the envelope: MAIL FROM and every RCPT TO.
	From string
	To   []string
	// Data is the message exactly as received after DATA, dot-unstuffed.
	Data []byte
	// TLS reports whether the connection was encrypted when DATA arrived.
	TLS bool
	// User is the authenticated user, empty without AUTH.
	User string

	// Header is the parsed top-level header; Parts are the leaf MIME parts in
	// order (a message that is not multipart has one part). Err is set when
	// Data could not be parsed; the message is recorded anyway.
	Header mail.Header
	Parts  []Part
	Err    error
}

// Subject is the Subject header with RFC 2047 encoded words decoded.
func (m Message) Subject() string {
	s := m.Header.Get("Subject")
	if d, err := new(mime.WordDecoder).DecodeHeader(s); err == nil {
		return d
	}
	return s
}

// Part returns the first leaf part of that media type ("text/html").
func (m Message) Part(mediaType string) (Part, bool) {
	for _, p := range m.Parts {
		if p.MediaType == mediaType {
			return p, true
		}
	}
	return Part{}, false
}

// Attachments are the parts with Content-Disposition attachment, in
// order.
func (m Message) Attachments() []Part {
	var out []Part
	for _, p := range m.Parts {
		if p.Disposition == "attachment" {
			out = append(out, p)
		}
	}
	return out
}

// Part is one leaf MIME part.
type Part struct {
	// MediaType is the lower-case media type of Content-Type ("text/plain"),
	// Params its parameters ("charset", "name"), RFC 2231 decoded.
	MediaType string
	Params    map[string]string
	// Disposition is the lower-case Content-Disposition ("attachment",
	// "inline", "" without one), Filename its filename parameter, RFC 2231
	// decoded as mime.ParseMediaType does (continuations too).
	Disposition, Filename string
	// Header is the part's header as sent, Content-Transfer-Encoding included.
	Header textproto.MIMEHeader
	// Body is the content with its transfer encoding (quoted-printable,
	// base64) undone.
	Body string
}

// Auth is one AUTH attempt the server saw.
type Auth struct {
	User string
	// TLS reports whether the attempt came over an encrypted connection: a
	// client that sends a password with TLS false has leaked it.
	TLS bool
	OK  bool
}

// failure is an injected SMTP reply.
type failure struct {
	n    int
	code int
	msg  string
}

// Server is a running SMTP sink. Its methods are safe for concurrent use.
type Server struct {
	opts    options
	srv     *smtp.Server
	ln      net.Listener
	certPEM []byte

	messages testkit.Recorder[Message]
	hooks    testkit.Hooks[Message] // of key ""

	mu       sync.Mutex
	closed   bool
	auths    []Auth
	failData failure
	failRcpt failure
}

// NewServer starts a sink on 127.0.0.1 on a free port and closes it when the
// test ends.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{}
	for _, o := range opts {
		o(&s.opts)
	}

	var tlsConfig *tls.Config
	if s.opts.startTLS || s.opts.implicitTLS {
		cert, certPEM, err := selfSigned()
		if err != nil {
			t.Fatalf("smtptest: generating a certificate: %v", err)
		}
		s.certPEM = certPEM
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("smtptest: listening: %v", err)
	}
	srv := smtp.NewServer(smtp.BackendFunc(s.newSession))
	srv.Domain = "localhost"
	srv.ReadTimeout = 30 * time.Second
	srv.WriteTimeout = 30 * time.Second
	srv.MaxMessageBytes = 10 << 20
	if s.opts.maxBytes > 0 {
		srv.MaxMessageBytes = s.opts.maxBytes
	}
	srv.ErrorLog = testLogger{s: s, t: t}
	if s.opts.implicitTLS {
		ln = tls.NewListener(ln, tlsConfig)
	} else {
		srv.TLSConfig = tlsConfig
		// Without any TLS, AUTH is offered in clear so a careless client
		// would be caught sending its password (Auths records TLS false).
		srv.AllowInsecureAuth = !s.opts.startTLS
	}
	s.srv, s.ln = srv, ln

	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(s.Close)
	return s
}

// Close stops the server and drops its connections. It is called when the
// test ends; calling it earlier simulates a server that went away.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	// Serve registers the listener with go-smtp only once its goroutine
	// runs; close it here too so a server closed right away takes nothing.
	_ = s.ln.Close()
	_ = s.srv.Close()
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the server's address in the form SMTP_URL takes:
// smtp://user:pass@127.0.0.1:port, smtps:// with WithImplicitTLS, without
// userinfo unless WithAuth.
func (s *Server) URL() string {
	u := url.URL{Scheme: "smtp", Host: s.Addr()}
	if s.opts.implicitTLS {
		u.Scheme = "smtps"
	}
	if s.opts.user != "" {
		u.User = url.UserPassword(s.opts.user, s.opts.pass)
	}
	return u.String()
}

// CertPEM is the server's self-signed certificate in PEM, which is also its
// own CA; nil without TLS.
func (s *Server) CertPEM() []byte { return bytes.Clone(s.certPEM) }

// WriteCertFile writes CertPEM to a file in t.TempDir and returns its path,
// for configurations that name a CA file.
func (s *Server) WriteCertFile(t testing.TB) string {
	t.Helper()
	if s.certPEM == nil {
		t.Fatal("smtptest: WriteCertFile on a server without TLS; use WithSTARTTLS or WithImplicitTLS")
	}
	path := filepath.Join(t.TempDir(), "smtptest-ca.pem")
	if err := os.WriteFile(path, s.certPEM, 0o600); err != nil {
		t.Fatalf("smtptest: writing the certificate: %v", err)
	}
	return path
}

// ClientTLSConfig is a client configuration that trusts the server's
// certificate; nil without TLS.
func (s *Server) ClientTLSConfig() *tls.Config {
	if s.certPEM == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.certPEM)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// Messages returns the messages accepted so far, oldest first.
func (s *Server) Messages() []Message { return s.messages.Select(nil) }

// WaitMessages waits until at least n messages have been accepted and returns
// them all; it fails the test if that takes longer than timeout.
func (s *Server) WaitMessages(t testing.TB, n int, timeout time.Duration) []Message {
	t.Helper()
	return s.messages.Wait(t, timeout, n, nil, "smtptest: messages")
}

// Auths returns every AUTH attempt so far, oldest first.
func (s *Server) Auths() []Auth {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Auth(nil), s.auths...)
}

// FailNext makes the server answer the next n DATA commands with code and
// msg (451 for a temporary failure, 550 or 554 for a permanent one) instead of
// accepting the message. The message is not recorded.
func (s *Server) FailNext(n, code int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failData = failure{n: n, code: code, msg: msg}
}

// FailNextRcpt makes the server answer the next n RCPT TO commands with code
// and msg (550 for "no such user", 451 to defer).
func (s *Server) FailNextRcpt(n, code int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failRcpt = failure{n: n, code: code, msg: msg}
}

// OnAccept makes fn run each time the server took a mail, after recording
// it and before its reply to the end of the mail (250): the client waits
// until fn returns (a server slow to answer, one that never does). fn runs
// without the server's lock. A nil fn removes the hook.
func (s *Server) OnAccept(fn func(Message)) { s.hooks.OnAccept("", fn) }

// HangUpNext makes the server take the next n mails (they are recorded) and
// then reset the connection instead of replying to the end of the mail,
// after any OnAccept hook: the mail is delivered, and the client cannot
// know.
func (s *Server) HangUpNext(n int) { s.hooks.HangUpNext("", n) }

// accepted records m and says what follows: the hook to run, and whether to
// hang up instead of replying.
func (s *Server) accepted(m Message) (hook func(Message), hangUp bool) {
	s.messages.Add(m)
	return s.hooks.Accepted("")
}

// take consumes one injected failure, returning nil if none is pending.
func (s *Server) take(f *failure) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.n <= 0 {
		return nil
	}
	f.n--
	return &smtp.SMTPError{Code: f.code, EnhancedCode: smtp.EnhancedCodeNotSet, Message: f.msg}
}

func (s *Server) newSession(c *smtp.Conn) (smtp.Session, error) {
	return &session{s: s, conn: c}, nil
}

// session is one SMTP session; go-smtp calls its methods from the
// connection's goroutine only. After STARTTLS go-smtp starts a new session,
// so authentication never carries over from the clear-text part.
type session struct {
	s    *Server
	conn *smtp.Conn
	user string
	from string
	to   []string
}

var errAuthRequired = &smtp.SMTPError{
	Code:         530,
	EnhancedCode: smtp.EnhancedCode{5, 7, 0},
	Message:      "Authentication required",
}

func (se *session) isTLS() bool {
	_, ok := se.conn.TLSConnectionState()
	return ok
}

// AuthMechanisms offers PLAIN when the server requires authentication.
func (se *session) AuthMechanisms() []string {
	if se.s.opts.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

// Auth checks PLAIN credentials and records the attempt.
func (se *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain || se.s.opts.user == "" {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(identity, user, pass string) error {
		ok := (identity == "" || identity == user) && user == se.s.opts.user && pass == se.s.opts.pass
		se.s.mu.Lock()
		se.s.auths = append(se.s.auths, Auth{User: user, TLS: se.isTLS(), OK: ok})
		se.s.mu.Unlock()
		if !ok {
			return smtp.ErrAuthFailed
		}
		se.user = user
		return nil
	}), nil
}

// Mail refuses to start a transaction before AUTH when AUTH is required;
// go-smtp leaves that to the session.
func (se *session) Mail(from string, _ *smtp.MailOptions) error {
	if se.s.opts.user != "" && se.user == "" {
		return errAuthRequired
	}
	se.from = from
	return nil
}

func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := se.s.take(&se.s.failRcpt); err != nil {
		return err
	}
	se.to = append(se.to, to)
	return nil
}

func (se *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := se.s.take(&se.s.failData); err != nil {
		return err
	}
	m := Message{
		From: se.from,
		To:   append([]string(nil), se.to...),
		Data: data,
		TLS:  se.isTLS(),
		User: se.user,
	}
	m.Header, m.Parts, m.Err = parse(data)
	hook, hangUp := se.s.accepted(m)
	if hook != nil {
		hook(m)
	}
	if hangUp {
		delivertest.Reset(se.conn.Conn())
	}
	return nil
}

func (se *session) Reset() {
	se.from, se.to = "", nil
}

func (se *session) Logout() error { return nil }

// parse splits a message into its header and leaf MIME parts.
func parse(data []byte) (mail.Header, []Part, error) {
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the header: %w", err)
	}
	parts, err := parseParts(textproto.MIMEHeader(m.Header), m.Body)
	return m.Header, parts, err
}

func parseParts(h textproto.MIMEHeader, body io.Reader) ([]Part, error) {
	ct := h.Get("Content-Type")
	if ct == "" {
		ct = "text/plain; charset=us-ascii"
	}
	mediaType, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return nil, fmt.Errorf("Content-Type %q: %w", ct, err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") {
		b, err := decode(h.Get("Content-Transfer-Encoding"), body)
		if err != nil {
			return nil, fmt.Errorf("%s part: %w", mediaType, err)
		}
		p := Part{MediaType: mediaType, Params: params, Header: h, Body: string(b)}
		if cd := h.Get("Content-Disposition"); cd != "" {
			d, dparams, err := mime.ParseMediaType(cd)
			if err != nil {
				return nil, fmt.Errorf("Content-Disposition %q: %w", cd, err)
			}
			p.Disposition, p.Filename = d, dparams["filename"]
		}
		return []Part{p}, nil
	}
	if params["boundary"] == "" {
		return nil, fmt.Errorf("%s without a boundary", mediaType)
	}
	var parts []Part
	mr := multipart.NewReader(body, params["boundary"])
	for {
		// NextRawPart keeps Content-Transfer-Encoding visible to tests.
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return parts, fmt.Errorf("%s: %w", mediaType, err)
		}
		sub, err := parseParts(p.Header, p)
		parts = append(parts, sub...)
		if err != nil {
			return parts, err
		}
	}
}

func decode(encoding string, r io.Reader) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, r) // skips line breaks itself
	}
	return io.ReadAll(r)
}

// selfSigned makes a certificate for 127.0.0.1, ::1 and localhost that is
// its own CA, so a client trusts it by adding it to its roots.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "smtptest", Organization: []string{"Herald tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, certPEM, nil
}

// testLogger sends go-smtp's internal errors to the test log until the server
// is closed; logging after a test ends would panic.
type testLogger struct {
	s *Server
	t testing.TB
}

func (l testLogger) Printf(format string, v ...any) { l.log(fmt.Sprintf(format, v...)) }
func (l testLogger) Println(v ...any)               { l.log(fmt.Sprintln(v...)) }

func (l testLogger) log(msg string) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.s.closed {
		l.t.Logf("smtptest: %s", strings.TrimSpace(msg))
	}
}
