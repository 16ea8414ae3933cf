package smtptest_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/heraldhq/herald/services/messenger/email/smtptest"
)

const multipartMail = "From: a@example.com\r\n" +
	"To: b@example.com\r\n" +
	"Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/alternative; boundary=\"XX\"\r\n" +
	"\r\n" +
	"--XX\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Gr=C3=BC=C3=9Fe, a long line that is =\r\n" +
	"soft broken\r\n" +
	"--XX\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"PHA+aGk8L3A+\r\n" +
	"--XX--\r\n"

func TestRecordsAndParses(t *testing.T) {
	srv := smtptest.NewServer(t)
	if err := smtp.SendMail(srv.Addr(), nil, "a@example.com", []string{"b@example.com", "c@example.com"}, strings.NewReader(multipartMail)); err == nil {
		t.Fatal("smtp.SendMail insists on STARTTLS, yet it worked against a server without TLS")
	}
	c, err := smtp.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendMail("a@example.com", []string{"b@example.com", "c@example.com"}, strings.NewReader(multipartMail)); err != nil {
		t.Fatal(err)
	}

	m := srv.WaitMessages(t, 1, 5*time.Second)[0]
	if m.Err != nil {
		t.Fatalf("parse error: %v", m.Err)
	}
	if m.From != "a@example.com" || strings.Join(m.To, ",") != "b@example.com,c@example.com" {
		t.Errorf("envelope = %q -> %q, want a@example.com -> b@example.com,c@example.com", m.From, m.To)
	}
	if m.TLS || m.User != "" {
		t.Errorf("TLS = %v, User = %q; want a clear, anonymous session", m.TLS, m.User)
	}
	if got := m.Subject(); got != "Grüße" {
		t.Errorf("Subject() = %q, want Grüße", got)
	}
	plain, ok := m.Part("text/plain")
	if !ok {
		t.Fatalf("no text/plain part in %+v", m.Parts)
	}
	if want := "Grüße, a long line that is soft broken"; plain.Body != want {
		t.Errorf("plain body = %q, want %q", plain.Body, want)
	}
	if plain.Params["charset"] != "utf-8" || plain.Header.Get("Content-Transfer-Encoding") != "quoted-printable" {
		t.Errorf("plain part params %v, header %v", plain.Params, plain.Header)
	}
	html, ok := m.Part("text/html")
	if !ok || html.Body != "<p>hi</p>" {
		t.Errorf("html part = %+v, %v; want body <p>hi</p>", html, ok)
	}
}

func TestAuthRequired(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithAuth("herald", "s3cret"))
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if pass, _ := u.User.Password(); u.Scheme != "smtp" || u.User.Username() != "herald" || pass != "s3cret" {
		t.Errorf("URL() = %s, want smtp://herald:s3cret@...", srv.URL())
	}

	c, err := smtp.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var se *smtp.SMTPError
	if err := c.Mail("a@example.com", nil); !errors.As(err, &se) || se.Code != 530 {
		t.Errorf("MAIL before AUTH: %v, want 530", err)
	}
	if err := c.Auth(sasl.NewPlainClient("", "herald", "wrong")); !errors.As(err, &se) || se.Code != 535 {
		t.Errorf("AUTH with a wrong password: %v, want 535", err)
	}
	if err := c.Auth(sasl.NewPlainClient("", "herald", "s3cret")); err != nil {
		t.Fatalf("AUTH: %v", err)
	}
	if err := c.SendMail("a@example.com", []string{"b@example.com"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n")); err != nil {
		t.Fatal(err)
	}
	if m := srv.WaitMessages(t, 1, 5*time.Second)[0]; m.User != "herald" {
		t.Errorf("User = %q, want herald", m.User)
	}
	auths := srv.Auths()
	if len(auths) != 2 || auths[0].OK || !auths[1].OK || auths[1].TLS {
		t.Errorf("Auths() = %+v, want a failed then a successful attempt, both in clear", auths)
	}
}

func TestSTARTTLS(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithSTARTTLS(), smtptest.WithAuth("herald", "s3cret"))
	if len(srv.CertPEM()) == 0 {
		t.Fatal("CertPEM() is empty on a TLS server")
	}
	c, err := smtp.DialStartTLS(srv.Addr(), srv.ClientTLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Auth(sasl.NewPlainClient("", "herald", "s3cret")); err != nil {
		t.Fatalf("AUTH: %v", err)
	}
	if err := c.SendMail("a@example.com", []string{"b@example.com"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n")); err != nil {
		t.Fatal(err)
	}
	m := srv.WaitMessages(t, 1, 5*time.Second)[0]
	if !m.TLS || m.User != "herald" {
		t.Errorf("TLS = %v, User = %q; want an encrypted session of herald", m.TLS, m.User)
	}
	if a := srv.Auths(); len(a) != 1 || !a[0].TLS {
		t.Errorf("Auths() = %+v, want one attempt over TLS", a)
	}
}

func TestImplicitTLS(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithImplicitTLS())
	if !strings.HasPrefix(srv.URL(), "smtps://") {
		t.Errorf("URL() = %s, want smtps://", srv.URL())
	}
	if err := smtp.SendMailTLS(srv.Addr(), nil, "a@example.com", []string{"b@example.com"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n")); err == nil {
		t.Error("a client that does not trust the self-signed certificate got through")
	}
	c, err := smtp.DialTLS(srv.Addr(), srv.ClientTLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendMail("a@example.com", []string{"b@example.com"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n")); err != nil {
		t.Fatal(err)
	}
	if m := srv.WaitMessages(t, 1, 5*time.Second)[0]; !m.TLS {
		t.Error("message over implicit TLS recorded as clear text")
	}
}

func TestFailNext(t *testing.T) {
	srv := smtptest.NewServer(t)
	send := func() error {
		c, err := smtp.Dial(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.SendMail("a@example.com", []string{"b@example.com"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n"))
	}

	srv.FailNext(2, 451, "try again later")
	for i := range 2 {
		var se *smtp.SMTPError
		if err := send(); !errors.As(err, &se) || se.Code != 451 || se.Message != "try again later" {
			t.Errorf("send %d: %v, want 451 try again later", i, err)
		}
	}
	srv.FailNextRcpt(1, 550, "no such user")
	var se *smtp.SMTPError
	if err := send(); !errors.As(err, &se) || se.Code != 550 {
		t.Errorf("send after FailNextRcpt: %v, want 550", err)
	}
	if err := send(); err != nil {
		t.Errorf("send after the injected failures: %v", err)
	}
	if n := len(srv.Messages()); n != 1 {
		t.Errorf("recorded %d messages, want only the accepted one", n)
	}
}

// TestOnAcceptAndHangUp: the hook runs once a mail is taken, before the
// reply to its end; a mail hung up on is recorded and its client gets a
// reset connection instead of the 250.
func TestOnAcceptAndHangUp(t *testing.T) {
	srv := smtptest.NewServer(t)
	send := func() error {
		c, err := smtp.Dial(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.SendMail("a@example.com", []string{"b@example.com"}, strings.NewReader("Subject: x\r\n\r\nbody\r\n"))
	}
	const delay = 100 * time.Millisecond
	hooked := make(chan smtptest.Message, 2)
	srv.OnAccept(func(m smtptest.Message) {
		hooked <- m
		time.Sleep(delay)
	})
	start := time.Now()
	if err := send(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay || len(hooked) != 1 {
		t.Fatalf("answered after %s with the hook run %d times, want after the hook's %s, once", took, len(hooked), delay)
	}
	if m := <-hooked; m.Subject() != "x" {
		t.Errorf("the hook got %+v, want the mail", m)
	}
	srv.OnAccept(nil)

	srv.HangUpNext(1)
	var se *smtp.SMTPError
	if err := send(); err == nil || errors.As(err, &se) {
		t.Fatalf("send: %v, want the connection reset, no reply", err)
	}
	if err := send(); err != nil {
		t.Fatalf("the next send: %v", err)
	}
	if n := len(srv.Messages()); n != 3 {
		t.Errorf("recorded %d mails, want 3: the one hung up on was taken", n)
	}
}

func TestAttachments(t *testing.T) {
	srv := smtptest.NewServer(t)
	mail := "From: a@example.com\r\nTo: b@example.com\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"M\"\r\n\r\n" +
		"--M\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nsee attached\r\n" +
		"--M\r\nContent-Type: application/pdf; name*=utf-8''%D0%BE.pdf\r\n" +
		"Content-Disposition: attachment;\r\n filename*0*=utf-8''%D0%BE%D1%82;\r\n filename*1*=%D1%87%D1%91%D1%82.pdf\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0x\r\nLjQK\r\n" +
		"--M\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\n\r\npng\r\n--M--\r\n"
	c, err := smtp.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendMail("a@example.com", []string{"b@example.com"}, strings.NewReader(mail)); err != nil {
		t.Fatal(err)
	}
	m := srv.WaitMessages(t, 1, 5*time.Second)[0]
	if m.Err != nil {
		t.Fatalf("parse error: %v", m.Err)
	}
	got := m.Attachments()
	if len(got) != 1 {
		t.Fatalf("%d attachments, want the one with disposition attachment: %+v", len(got), m.Parts)
	}
	a := got[0]
	if a.Filename != "отчёт.pdf" || a.Params["name"] != "о.pdf" || a.MediaType != "application/pdf" || a.Body != "%PDF-1.4\n" {
		t.Errorf("attachment %q (name %q), %s, %q; want отчёт.pdf (о.pdf), application/pdf, %%PDF-1.4", a.Filename, a.Params["name"], a.MediaType, a.Body)
	}
	if p := m.Parts[2]; p.Disposition != "inline" || p.Filename != "" {
		t.Errorf("inline part: disposition %q, filename %q", p.Disposition, p.Filename)
	}
}

func TestMaxBytes(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithMaxBytes(1000))
	c, err := smtp.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		t.Fatal(err)
	}
	if ok, size := c.Extension("SIZE"); !ok || size != "1000" {
		t.Errorf("SIZE %v %q, want 1000", ok, size)
	}
	big := "From: a@example.com\r\n\r\n" + strings.Repeat(strings.Repeat("x", 76)+"\r\n", 30)
	err = c.SendMail("a@example.com", []string{"b@example.com"}, strings.NewReader(big))
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code != 552 {
		t.Fatalf("SendMail of a mail over SIZE: %v, want 552", err)
	}
	if n := len(srv.Messages()); n != 0 {
		t.Errorf("%d messages recorded, want none", n)
	}
}
