package email_test

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/email"
	"github.com/heraldhq/herald/services/messenger/email/smtptest"
)

const (
	user     = "herald@example.com"
	password = "pa55-W0RD-never-shown"
	wait     = 10 * time.Second
)

// integration is the email integration of the tests, pointed at srv through
// $SMTP_URL, trusting srv's certificate when it has one.
func integration(t *testing.T, srv *smtptest.Server) config.Integration {
	t.Helper()
	in := config.Integration{ID: "mail", Type: "email", Settings: &email.Config{SMTPURLEnv: "SMTP_URL", From: "Herald <herald@example.com>", DefaultTo: "me@example.com"}}
	if srv.CertPEM() != nil {
		in.Settings.(*email.Config).CAFile = srv.WriteCertFile(t)
	}
	return in
}

// env is a deliver.Env whose $SMTP_URL is smtpURL.
func env(t *testing.T, smtpURL string) deliver.Env {
	return delivertest.Env(t, map[string]string{"SMTP_URL": smtpURL})
}

func newSender(t *testing.T, srv *smtptest.Server) deliver.Sender {
	t.Helper()
	s, err := email.New(integration(t, srv), env(t, srv.URL()))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func deliverOne(t *testing.T, s deliver.Sender, d deliver.Delivery) deliver.Receipt {
	t.Helper()
	r, err := s.Deliver(t.Context(), d)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	return r
}

func TestSend(t *testing.T) {
	srv := smtptest.NewServer(t)
	s := newSender(t, srv)

	var sent []string
	r := deliverOne(t, s, deliver.Delivery{
		Key:     "3f2a9c",
		Intent:  "send",
		Butler:  "health",
		Message: "## **Disk** almost full\n\nOnly *5 %* left on `/var` — grüße.\n\n- clean logs\n- rotate backups",
		Sent:    func(id string) error { sent = append(sent, id); return nil },
	})

	m := srv.WaitMessages(t, 1, wait)[0]
	if m.Err != nil {
		t.Fatalf("the mail does not parse: %v\n%s", m.Err, m.Data)
	}
	if m.From != "herald@example.com" || !slices.Equal(m.To, []string{"me@example.com"}) {
		t.Errorf("envelope %s -> %v, want herald@example.com -> [me@example.com] (default_to)", m.From, m.To)
	}
	for name, want := range map[string]string{
		"From":           `"Herald" <herald@example.com>`,
		"To":             "<me@example.com>",
		"Message-ID":     "<3f2a9c@example.com>",
		"MIME-Version":   "1.0",
		"Auto-Submitted": "auto-generated",
	} {
		if got := m.Header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if got, want := m.Subject(), "[health] Disk almost full"; got != want {
		t.Errorf("Subject: %q, want %q", got, want)
	}
	if _, err := m.Header.Date(); err != nil {
		t.Errorf("Date: %v", err)
	}
	for _, h := range []string{"In-Reply-To", "References", "Importance", "X-Priority"} {
		if v := m.Header.Get(h); v != "" {
			t.Errorf("%s: %q on a normal send, want none", h, v)
		}
	}
	if !slices.Equal(r.MessageIDs, []string{"<3f2a9c@example.com>"}) || !slices.Equal(sent, r.MessageIDs) {
		t.Errorf("receipt %v, Sent called with %v; want both [<3f2a9c@example.com>]", r.MessageIDs, sent)
	}

	if ct := m.Header.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/alternative;") {
		t.Errorf("Content-Type: %q, want multipart/alternative", ct)
	}
	if len(m.Parts) != 2 {
		t.Fatalf("%d parts, want text/plain and text/html", len(m.Parts))
	}
	plain, html := m.Parts[0], m.Parts[1]
	if plain.MediaType != "text/plain" || html.MediaType != "text/html" {
		t.Errorf("parts %s, %s; want text/plain then text/html (the preferred last)", plain.MediaType, html.MediaType)
	}
	for _, p := range m.Parts {
		if p.Params["charset"] != "utf-8" || p.Header.Get("Content-Transfer-Encoding") != "quoted-printable" {
			t.Errorf("%s part: charset %q, encoding %q; want utf-8, quoted-printable", p.MediaType, p.Params["charset"], p.Header.Get("Content-Transfer-Encoding"))
		}
	}
	if want := "## **Disk** almost full\r\n\r\nOnly *5 %* left on `/var` — grüße.\r\n\r\n- clean logs\r\n- rotate backups"; plain.Body != want {
		t.Errorf("plain body:\n%q\nwant the markdown as written:\n%q", plain.Body, want)
	}
	for _, want := range []string{"<!DOCTYPE html>", "<strong>Disk</strong>", "grüße", "</html>"} {
		if !strings.Contains(html.Body, want) {
			t.Errorf("html body lacks %q:\n%s", want, html.Body)
		}
	}
	for i, line := range strings.Split(string(m.Data), "\r\n") {
		if len(line) > 78 && !strings.HasPrefix(line, "Content-Type:") {
			t.Errorf("line %d is %d characters long: %q", i+1, len(line), line)
		}
		for _, b := range []byte(line) {
			if b >= 0x80 {
				t.Fatalf("line %d has 8-bit data: %q", i+1, line)
			}
		}
	}
}

// A retry carries the same Message-ID, so the person who gets it twice sees
// one mail; another notify gets another.
func TestMessageIDFromKey(t *testing.T) {
	srv := smtptest.NewServer(t)
	s := newSender(t, srv)
	d := deliver.Delivery{Key: "c0ffee42", Intent: "send", Butler: "health", Message: "hello"}

	first := deliverOne(t, s, d)
	retry := deliverOne(t, s, d)
	d.Key = "c0ffee43"
	other := deliverOne(t, s, d)

	ms := srv.WaitMessages(t, 3, wait)
	if ms[0].Header.Get("Message-ID") != ms[1].Header.Get("Message-ID") || !slices.Equal(first.MessageIDs, retry.MessageIDs) {
		t.Errorf("a retry got Message-ID %s, the first attempt %s; want the same", ms[1].Header.Get("Message-ID"), ms[0].Header.Get("Message-ID"))
	}
	if ms[2].Header.Get("Message-ID") == ms[0].Header.Get("Message-ID") || slices.Equal(other.MessageIDs, first.MessageIDs) {
		t.Errorf("two keys share Message-ID %s", ms[0].Header.Get("Message-ID"))
	}
}

func TestReply(t *testing.T) {
	for _, thread := range []string{"CAB1234@mail.example.com", "<CAB1234@mail.example.com>", " <CAB1234@mail.example.com>\r\n"} {
		t.Run(strings.TrimSpace(thread), func(t *testing.T) {
			srv := smtptest.NewServer(t)
			s := newSender(t, srv)
			deliverOne(t, s, deliver.Delivery{
				Key:     "r1",
				Intent:  "reply",
				Butler:  "health",
				Message: "Done: the backup ran.",
				Thread:  thread,
				Sender:  "Alice <alice@example.com>",
			})
			m := srv.WaitMessages(t, 1, wait)[0]
			if !slices.Equal(m.To, []string{"alice@example.com"}) {
				t.Errorf("RCPT %v, want the sender alice@example.com", m.To)
			}
			for _, h := range []string{"In-Reply-To", "References"} {
				if got := m.Header.Get(h); got != "<CAB1234@mail.example.com>" {
					t.Errorf("%s: %q, want <CAB1234@mail.example.com>", h, got)
				}
			}
		})
	}
}

func TestRecipient(t *testing.T) {
	tests := []struct {
		name      string
		d         deliver.Delivery
		defaultTo string
		want      string // RCPT, or "" for a validation error
	}{
		{"recipient wins", deliver.Delivery{Intent: "reply", Recipient: "bob@example.com", Sender: "alice@example.com"}, "me@example.com", "bob@example.com"},
		{"reply goes to the sender", deliver.Delivery{Intent: "reply", Sender: "alice@example.com"}, "me@example.com", "alice@example.com"},
		{"reply to an unauthenticated sender goes to the From address", deliver.Delivery{Intent: "reply", Sender: "unverified:alice@example.com"}, "me@example.com", "alice@example.com"},
		{"send ignores the sender", deliver.Delivery{Intent: "send", Sender: "alice@example.com"}, "me@example.com", "me@example.com"},
		{"default_to", deliver.Delivery{Intent: "send"}, "me@example.com", "me@example.com"},
		{"reply without sender falls back", deliver.Delivery{Intent: "reply"}, "me@example.com", "me@example.com"},
		{"nobody", deliver.Delivery{Intent: "send"}, "", ""},
		{"not an address", deliver.Delivery{Intent: "send", Recipient: "12345"}, "me@example.com", ""},
		{"injected header", deliver.Delivery{Intent: "send", Recipient: "bob@example.com\r\nBcc: eve@example.com"}, "me@example.com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := smtptest.NewServer(t)
			in := integration(t, srv)
			in.Settings.(*email.Config).DefaultTo = tt.defaultTo
			s, err := email.New(in, env(t, srv.URL()))
			if err != nil {
				t.Fatal(err)
			}
			tt.d.Butler, tt.d.Message, tt.d.Key = "health", "hi", "k"
			_, err = s.Deliver(t.Context(), tt.d)
			if tt.want == "" {
				if !errors.Is(err, envelope.ErrValidation) {
					t.Fatalf("Deliver: %v, want a validation_error", err)
				}
				if n := len(srv.Messages()); n != 0 {
					t.Errorf("%d mails sent, want none", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m := srv.WaitMessages(t, 1, wait)[0]; !slices.Equal(m.To, []string{tt.want}) {
				t.Errorf("RCPT %v, want %s", m.To, tt.want)
			}
		})
	}
}

func TestUrgencyHigh(t *testing.T) {
	srv := smtptest.NewServer(t)
	s := newSender(t, srv)
	deliverOne(t, s, deliver.Delivery{Key: "u1", Intent: "send", Butler: "health", Urgency: "high", Subject: "Blood pressure alert", Message: "180/110 measured."})
	m := srv.WaitMessages(t, 1, wait)[0]
	if got, want := m.Subject(), "[URGENT] [health] Blood pressure alert"; got != want {
		t.Errorf("Subject: %q, want %q", got, want)
	}
	if m.Header.Get("Importance") != "high" || m.Header.Get("X-Priority") != "1" {
		t.Errorf("Importance %q, X-Priority %q; want high, 1", m.Header.Get("Importance"), m.Header.Get("X-Priority"))
	}
}

func TestSubjectOnTheWire(t *testing.T) {
	srv := smtptest.NewServer(t)
	s := newSender(t, srv)
	long := strings.Repeat("Überweisung bestätigt ", 10)
	deliverOne(t, s, deliver.Delivery{Key: "s1", Intent: "send", Butler: "finance", Message: long})
	m := srv.WaitMessages(t, 1, wait)[0]
	raw := m.Header.Get("Subject")
	if !strings.Contains(raw, "=?utf-8?q?") {
		t.Errorf("Subject %q is not RFC 2047 encoded", raw)
	}
	got := m.Subject()
	if !strings.HasPrefix(got, "[finance] Überweisung bestätigt") || !strings.HasSuffix(got, "…") {
		t.Errorf("Subject: %q, want the first line cut with …", got)
	}
}

// A subject, thread or butler with CR/LF must not add headers of its own.
func TestHeaderInjection(t *testing.T) {
	srv := smtptest.NewServer(t)
	s := newSender(t, srv)
	deliverOne(t, s, deliver.Delivery{
		Key:     "i1\r\nBcc: eve@example.com",
		Intent:  "reply",
		Butler:  "health",
		Subject: "Hello\r\nBcc: eve@example.com\r\n\r\nforged body",
		Thread:  "abc@example.com>\r\nBcc: eve@example.com",
		Sender:  "alice@example.com",
		Message: "real body",
	})
	m := srv.WaitMessages(t, 1, wait)[0]
	if v, ok := m.Header["Bcc"]; ok {
		t.Errorf("an injected Bcc header arrived: %q", v)
	}
	if !slices.Equal(m.To, []string{"alice@example.com"}) {
		t.Errorf("RCPT %v, want only alice@example.com", m.To)
	}
	if got, want := m.Subject(), "[health] Hello Bcc: eve@example.com forged body"; got != want {
		t.Errorf("Subject: %q, want %q (one line)", got, want)
	}
	if p, _ := m.Part("text/plain"); p.Body != "real body" {
		t.Errorf("plain body %q, want real body", p.Body)
	}
	if got := m.Header.Get("In-Reply-To"); strings.ContainsAny(got, " \r\n") || strings.Count(got, "<") != 1 {
		t.Errorf("In-Reply-To: %q, want one clean msg-id", got)
	}
}

func TestReactUnsupported(t *testing.T) {
	srv := smtptest.NewServer(t)
	s := newSender(t, srv)
	_, err := s.Deliver(t.Context(), deliver.Delivery{Key: "x", Intent: "react", Butler: "health", Emoji: "👍", Thread: "a@b"})
	if !errors.Is(err, envelope.ErrValidation) || !strings.Contains(err.Error(), "reply") {
		t.Errorf("react: %v, want a validation_error pointing to reply", err)
	}
}

func TestSTARTTLSWithAuth(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithSTARTTLS(), smtptest.WithAuth(user, password))
	s := newSender(t, srv)
	deliverOne(t, s, deliver.Delivery{Key: "t1", Intent: "send", Butler: "health", Message: "over TLS"})
	m := srv.WaitMessages(t, 1, wait)[0]
	if !m.TLS || m.User != user {
		t.Errorf("TLS %v, user %q; want an encrypted session authenticated as %s", m.TLS, m.User, user)
	}
	for _, a := range srv.Auths() {
		if !a.TLS {
			t.Errorf("AUTH in clear: %+v", a)
		}
	}
}

// With credentials, a server that does not offer STARTTLS gets no password,
// even though it would take one in clear.
func TestCredentialsNeverInClear(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithAuth(user, password))
	s := newSender(t, srv)
	_, err := s.Deliver(t.Context(), deliver.Delivery{Key: "c1", Intent: "send", Butler: "health", Message: "hi"})
	if err == nil || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("Deliver: %v, want an error about the missing STARTTLS", err)
	}
	if envelope.Retryable(err) {
		t.Errorf("class %s is retryable; a retry would fail the same way", envelope.ClassOf(err))
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("the error shows the password: %v", err)
	}
	if a := srv.Auths(); len(a) != 0 {
		t.Errorf("the server saw AUTH attempts %+v, want none", a)
	}
	if n := len(srv.Messages()); n != 0 {
		t.Errorf("%d mails sent, want none", n)
	}
}

// Without credentials there is nothing to protect; a relay without TLS works,
// and STARTTLS is used whenever the server offers it.
func TestNoCredentials(t *testing.T) {
	for _, tt := range []struct {
		name    string
		opts    []smtptest.Option
		wantTLS bool
	}{
		{"relay in clear", nil, false},
		{"opportunistic STARTTLS", []smtptest.Option{smtptest.WithSTARTTLS()}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := smtptest.NewServer(t, tt.opts...)
			s := newSender(t, srv)
			deliverOne(t, s, deliver.Delivery{Key: "n1", Intent: "send", Butler: "health", Message: "hi"})
			if m := srv.WaitMessages(t, 1, wait)[0]; m.TLS != tt.wantTLS {
				t.Errorf("TLS %v, want %v", m.TLS, tt.wantTLS)
			}
		})
	}
}

func TestImplicitTLS(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithImplicitTLS(), smtptest.WithAuth(user, password))
	s := newSender(t, srv)
	deliverOne(t, s, deliver.Delivery{Key: "i1", Intent: "send", Butler: "health", Message: "over smtps"})
	if m := srv.WaitMessages(t, 1, wait)[0]; !m.TLS || m.User != user {
		t.Errorf("TLS %v, user %q; want an encrypted session authenticated as %s", m.TLS, m.User, user)
	}
}

func TestUntrustedCertificate(t *testing.T) {
	for _, opt := range []smtptest.Option{smtptest.WithSTARTTLS(), smtptest.WithImplicitTLS()} {
		srv := smtptest.NewServer(t, opt, smtptest.WithAuth(user, password))
		in := integration(t, srv)
		in.Settings.(*email.Config).CAFile = ""
		s, err := email.New(in, env(t, srv.URL()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Deliver(t.Context(), deliver.Delivery{Key: "u1", Intent: "send", Butler: "health", Message: "hi"})
		if !errors.Is(err, envelope.ErrTargetUnavailable) || !strings.Contains(err.Error(), "ca_file") {
			t.Errorf("%s: %v, want target_unavailable naming ca_file", srv.URL(), err)
		}
		if a := srv.Auths(); len(a) != 0 {
			t.Errorf("%s: the password went to an untrusted server: %+v", srv.URL(), a)
		}
	}
}

// Every failure maps to the class that tells the messenger whether to retry,
// and no error ever shows the password.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(srv *smtptest.Server)
		password  string
		class     error
		retryable bool
	}{
		{"451 on DATA", func(srv *smtptest.Server) { srv.FailNext(1, 451, "greylisted, try again later") }, password, envelope.ErrTargetUnavailable, true},
		{"421 on RCPT", func(srv *smtptest.Server) { srv.FailNextRcpt(1, 421, "too busy") }, password, envelope.ErrTargetUnavailable, true},
		{"550 on RCPT", func(srv *smtptest.Server) { srv.FailNextRcpt(1, 550, "no such user") }, password, envelope.ErrNotFound, false},
		{"554 on DATA", func(srv *smtptest.Server) { srv.FailNext(1, 554, "message looks like spam") }, password, envelope.ErrValidation, false},
		{"wrong password", func(*smtptest.Server) {}, "not-" + password, envelope.ErrForbidden, false},
		{"server gone", func(srv *smtptest.Server) { srv.Close() }, password, envelope.ErrTargetUnavailable, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := smtptest.NewServer(t, smtptest.WithSTARTTLS(), smtptest.WithAuth(user, password))
			smtpURL := strings.Replace(srv.URL(), ":"+password+"@", ":"+tt.password+"@", 1)
			s, err := email.New(integration(t, srv), env(t, smtpURL))
			if err != nil {
				t.Fatal(err)
			}
			tt.setup(srv)
			_, err = s.Deliver(t.Context(), deliver.Delivery{Key: "e1", Intent: "send", Butler: "health", Message: "hi"})
			if !errors.Is(err, tt.class) {
				t.Fatalf("Deliver: %v, want class %v", err, tt.class)
			}
			if got := envelope.Retryable(err); got != tt.retryable {
				t.Errorf("Retryable = %v, want %v (%v)", got, tt.retryable, err)
			}
			if strings.Contains(err.Error(), tt.password) {
				t.Errorf("the error shows the password: %v", err)
			}
			if strings.Contains(err.Error(), smtpURL) {
				t.Errorf("the error shows the SMTP URL: %v", err)
			}
		})
	}
}

func TestForbiddenSaysWhatToCheck(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithSTARTTLS(), smtptest.WithAuth(user, password))
	s, err := email.New(integration(t, srv), env(t, strings.Replace(srv.URL(), password, "wrong", 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Deliver(t.Context(), deliver.Delivery{Key: "f1", Intent: "send", Butler: "health", Message: "hi"})
	if !errors.Is(err, envelope.ErrForbidden) || !strings.Contains(err.Error(), "rejected the credentials") || !strings.Contains(err.Error(), "$SMTP_URL") {
		t.Errorf("Deliver: %v, want forbidden: rejected the credentials, naming $SMTP_URL", err)
	}
}

// A server that never answers is given up when the delivery's deadline
// passes. It never saw the mail, so that is target_unavailable (retried as
// fresh), not a timeout (uncertain).
func TestDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Accept, then say nothing.
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	in := config.Integration{ID: "mail", Type: "email", Settings: &email.Config{SMTPURLEnv: "SMTP_URL", From: "herald@example.com", DefaultTo: "me@example.com"}}
	s, err := email.New(in, env(t, "smtp://"+ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = s.Deliver(ctx, deliver.Delivery{Key: "d1", Intent: "send", Butler: "health", Message: "hi"})
	if envelope.ClassOf(err) != "target_unavailable" || !envelope.Retryable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Deliver: %v, want a retryable target_unavailable: the server never had the mail", err)
	}
}

// TestRefusedBeforeTheEndIsNoTimeout: a mail refused before its end was
// sent cannot have been delivered: never a timeout, the class the messenger
// treats as uncertain (the conformance suite has a mail taken without the
// sender hearing so, and the server failing or down).
func TestRefusedBeforeTheEndIsNoTimeout(t *testing.T) {
	tests := []struct {
		name        string
		fault       func(t *testing.T, srv *smtptest.Server)
		credentials bool // the SMTP URL has the server's user and password
		class       string
	}{
		{
			name:  "refused at MAIL FROM",
			fault: func(*testing.T, *smtptest.Server) {}, // no AUTH: 530
			class: "forbidden",
		},
		{
			name:        "refused at RCPT TO",
			fault:       func(_ *testing.T, srv *smtptest.Server) { srv.FailNextRcpt(1, 550, "no such user") },
			credentials: true, class: "not_found",
		},
		{
			name:        "deferred at RCPT TO",
			fault:       func(_ *testing.T, srv *smtptest.Server) { srv.FailNextRcpt(1, 451, "try again later") },
			credentials: true, class: "target_unavailable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := smtptest.NewServer(t, smtptest.WithSTARTTLS(), smtptest.WithAuth(user, password))
			smtpURL := srv.URL()
			if !tt.credentials {
				smtpURL = "smtp://" + srv.Addr()
			}
			e := env(t, smtpURL)
			e.CallTimeout = 300 * time.Millisecond
			s, err := email.New(integration(t, srv), e)
			if err != nil {
				t.Fatal(err)
			}
			tt.fault(t, srv)
			_, err = s.Deliver(t.Context(), deliver.Delivery{Key: "n1", Intent: "send", Butler: "health", Message: "Dose taken"})
			t.Log(err)
			if got := envelope.ClassOf(err); got != tt.class {
				t.Fatalf("Deliver: %v (class %s), want %s", err, got, tt.class)
			}
			if n := len(srv.Messages()); n != 0 {
				t.Errorf("the server has %d mails, want none", n)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		smtpURL string
		edit    func(*config.Integration)
		want    string // in the error
	}{
		{"env unset", "", nil, "SMTP_URL"},
		{"bad scheme", "http://u:" + password + "@mail.example.com", nil, "smtp://"},
		{"unparsable", "smtp://u:" + password + "@mail.example.com:port", nil, "not a URL"},
		{"control character", "smtp://u:" + password + "\x7f@mail.example.com:587", nil, "not a URL"},
		{"no host", "smtp://u:" + password + "@", nil, "no host"},
		{"password without user", "smtp://:" + password + "@mail.example.com", nil, "no user"},
		{"no from", "smtp://mail.example.com", func(in *config.Integration) { in.Settings.(*email.Config).From = "" }, "needs from"},
		{"bad from", "smtp://mail.example.com", func(in *config.Integration) { in.Settings.(*email.Config).From = "herald" }, "from"},
		{"bad default_to", "smtp://mail.example.com", func(in *config.Integration) { in.Settings.(*email.Config).DefaultTo = "me at home" }, "default_to"},
		{"missing ca_file", "smtp://mail.example.com", func(in *config.Integration) { in.Settings.(*email.Config).CAFile = "/nonexistent/ca.pem" }, "ca_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := config.Integration{ID: "mail", Type: "email", Settings: &email.Config{SMTPURLEnv: "SMTP_URL", From: "herald@example.com"}}
			if tt.edit != nil {
				tt.edit(&in)
			}
			_, err := email.New(in, env(t, tt.smtpURL))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want invalid configuration mentioning %q", err, tt.want)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func TestNewFromFile(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithImplicitTLS(), smtptest.WithAuth(user, password))
	in := integration(t, srv)
	in.Settings.(*email.Config).SMTPURLEnv, in.Settings.(*email.Config).SMTPURLFile = "", t.TempDir()+"/smtp_url"
	if err := os.WriteFile(in.Settings.(*email.Config).SMTPURLFile, []byte(srv.URL()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := email.New(in, env(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	deliverOne(t, s, deliver.Delivery{Key: "f1", Intent: "send", Butler: "health", Message: "hi"})
	srv.WaitMessages(t, 1, wait)
}

func TestSubject(t *testing.T) {
	tests := []struct {
		name                             string
		butler, subject, message, urgent string
		want                             string
	}{
		{"own subject", "health", "Weekly report", "# Ignored", "normal", "[health] Weekly report"},
		{"first line", "health", "", "\n\n  Your **blood pressure** is fine.\nDetails follow.", "normal", "[health] Your blood pressure is fine."},
		{"heading", "health", "", "### Daily _summary_ ###\n\nbody", "", "[health] Daily summary"},
		{"list and quote", "health", "", "> - [x] done: `backup`", "", "[health] done: backup"},
		{"link", "health", "", "See [the dashboard](https://example.com/d) now", "", "[health] See the dashboard now"},
		{"snake_case kept", "health", "", "job nightly_backup failed", "", "[health] job nightly_backup failed"},
		{"urgent", "health", "Fall detected", "", "high", "[URGENT] [health] Fall detected"},
		{"line breaks", "health", "a\r\nb\tc", "", "", "[health] a b c"},
		{"long", "health", "", strings.Repeat("word ", 30), "", "[health] " + strings.TrimSpace(strings.Repeat("word ", 15)) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := email.Subject(tt.butler, tt.subject, tt.message, tt.urgent); got != tt.want {
				t.Errorf("Subject = %q, want %q", got, tt.want)
			}
		})
	}
}
