package email_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/email"
	"github.com/heraldhq/herald/services/messenger/email/smtptest"
)

const (
	inboundAuthEnv = "HERALD_TEST_INBOUND_AUTH"
	inboundUser    = "relay"
	inboundPass    = "in-PA55-never-logged"
)

// recorder is a deliver.Sink that keeps what it is given. failNext makes
// the next Ingress calls fail; block, if set, holds Ingress until closed.
type recorder struct {
	mu       sync.Mutex
	ingress  []*envelope.Ingress
	calls    int
	failNext int
	block    chan struct{}
	entered  chan struct{} // gets a value when a blocked Ingress starts
	dropped  []drop
	statuses []deliver.Status
	changed  testkit.Signal
}

type drop struct {
	in     *envelope.Ingress
	reason string
}

func newRecorder() *recorder { return &recorder{} }

func (r *recorder) Ingress(ctx context.Context, in *envelope.Ingress) error {
	r.mu.Lock()
	r.calls++
	block, entered := r.block, r.entered
	fail := r.failNext > 0
	if fail {
		r.failNext--
	}
	r.mu.Unlock()
	if fail {
		return fmt.Errorf("%w: the bus is down", envelope.ErrTargetUnavailable)
	}
	if block != nil {
		entered <- struct{}{}
		<-block
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ingress = append(r.ingress, in)
	r.changed.Notify()
	return nil
}

func (r *recorder) Dropped(_ context.Context, in *envelope.Ingress, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropped = append(r.dropped, drop{in, reason})
	r.changed.Notify()
}

func (r *recorder) Status(s deliver.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses = append(r.statuses, s)
	r.changed.Notify()
}

func (r *recorder) ingresses() []*envelope.Ingress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ingress)
}

func (r *recorder) drops() []drop {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.dropped)
}

func (r *recorder) lastStatus() deliver.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.statuses) == 0 {
		return deliver.Status{}
	}
	return r.statuses[len(r.statuses)-1]
}

// waitStatus waits for a status report that ok accepts and returns it.
func (r *recorder) waitStatus(t *testing.T, what string, ok func(deliver.Status) bool) deliver.Status {
	t.Helper()
	var (
		statuses []deliver.Status
		i        int
	)
	if !r.changed.Wait(wait, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		statuses = slices.Clone(r.statuses)
		i = slices.IndexFunc(statuses, ok)
		return i >= 0
	}) {
		t.Fatalf("no status %s within %s; got %+v", what, wait, statuses)
	}
	return statuses[i]
}

// inboundIntegration is an email integration taking mail for example.com
// on a free port.
func inboundIntegration() config.Integration {
	return config.Integration{ID: "mail", Type: "email", Inbound: config.Inbound{Enabled: true},
		Settings: &email.Config{SMTPURLEnv: "SMTP_URL", From: "Herald <herald@example.com>", Inbound: email.InboundConfig{
			Listen:   "127.0.0.1:0",
			Domains:  []string{"example.com"},
			MaxBytes: 1 << 20,
		}}}
}

// runReceiver starts the receiver of in and stops it when the test ends,
// checking that Receive then returns nil.
func runReceiver(t *testing.T, in config.Integration, getenv config.Getenv, logs *testkit.Buffer, opts ...email.ReceiverOption) (*recorder, context.CancelFunc) {
	t.Helper()
	var w interface{ Write([]byte) (int, error) } = t.Output()
	if logs != nil {
		w = logs
	}
	return runWith(t, in, deliver.Env{
		Getenv:   getenv,
		Logger:   slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Instance: "test-1",
	}, opts...)
}

// runWith is runReceiver with the receiver's whole env.
func runWith(t *testing.T, in config.Integration, env deliver.Env, opts ...email.ReceiverOption) (*recorder, context.CancelFunc) {
	t.Helper()
	rcv, err := email.NewReceiverFactory(opts...)(in, env)
	if err != nil {
		t.Fatalf("NewReceiver: %v", err)
	}
	if rcv == nil {
		t.Fatal("NewReceiver returned no receiver for an integration with inbound enabled")
	}
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rcv.Receive(ctx, rec) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Receive returned %v after its context ended, want nil", err)
				}
			case <-time.After(wait):
				t.Errorf("Receive did not return within %s of its context ending", wait)
			}
		})
	}
	t.Cleanup(stop)
	return rec, stop
}

// startReceiver runs the receiver and returns the address it listens on,
// as its status reports it.
func startReceiver(t *testing.T, in config.Integration) (*recorder, string) {
	t.Helper()
	rec, _ := runReceiver(t, in, nil, nil)
	return rec, listening(t, rec)
}

func listening(t *testing.T, rec *recorder) string {
	t.Helper()
	st := rec.waitStatus(t, "running", func(s deliver.Status) bool { return s.State == deliver.StateRunning })
	addr, ok := strings.CutPrefix(st.Detail, "listening on ")
	if !ok {
		t.Fatalf("running status detail %q, want \"listening on <addr>\"", st.Detail)
	}
	return addr
}

// crlf turns a message written with \n into the wire's CRLF lines.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// sendMail runs one SMTP session in clear and says at which stage it
// failed, if it did.
func sendMail(t *testing.T, addr, from string, to []string, msg string) (string, error) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	return transact(c, from, to, msg)
}

// transact sends one mail on c; MAIL says EHLO first if no one has.
func transact(c *smtp.Client, from string, to []string, msg string) (string, error) {
	if err := c.Mail(from, nil); err != nil {
		return "MAIL", err
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt, nil); err != nil {
			return "RCPT", err
		}
	}
	w, err := c.Data()
	if err != nil {
		return "DATA", err
	}
	if _, err := w.Write([]byte(msg)); err != nil {
		return "DATA", err
	}
	if err := w.Close(); err != nil {
		return "DATA", err
	}
	_ = c.Quit()
	return "", nil
}

func mustSend(t *testing.T, addr, from string, to []string, msg string) {
	t.Helper()
	if stage, err := sendMail(t, addr, from, to, msg); err != nil {
		t.Fatalf("sending failed at %s: %v", stage, err)
	}
}

func smtpCode(err error) int {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// oneIngress returns the only ingress, checked against ingress.v1.
func oneIngress(t *testing.T, rec *recorder) *envelope.Ingress {
	t.Helper()
	got := rec.ingresses()
	if len(got) != 1 {
		t.Fatalf("got %d ingress envelopes, want 1", len(got))
	}
	checkSchema(t, got[0])
	return got[0]
}

func checkSchema(t *testing.T, in *envelope.Ingress) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.Validate(schemas.Ingress, b); err != nil {
		t.Errorf("ingress is not a valid ingress.v1: %v\n%s", err, b)
	}
}

func diffMeta(t *testing.T, got, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("meta[%s] = %q, want %q", k, got[k], want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected meta[%s] = %q", k, got[k])
		}
	}
}

const plainMail = `From: "Ann Example" <Ann@Example.ORG>
To: Herald <herald@example.com>
Cc: bob@example.org
Subject: Lunch on Friday?
Message-ID: <lunch-1@example.org>
Date: Mon, 02 Jan 2006 15:04:05 +0000
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

Shall we meet at noon?
`

func TestReceiveMail(t *testing.T) {
	rec, addr := startReceiver(t, inboundIntegration())
	mustSend(t, addr, "ann@example.org", []string{"Herald@Example.COM", "butler@example.com"}, crlf(plainMail))

	in := oneIngress(t, rec)
	if in.NativeID != "<lunch-1@example.org>" {
		t.Errorf("native_id %q, want the Message-ID <lunch-1@example.org>", in.NativeID)
	}
	if in.IntegrationID != "mail" {
		t.Errorf("integration_id %q, want mail", in.IntegrationID)
	}
	rc := in.RequestContext
	want := envelope.RequestContext{
		RequestID:              rc.RequestID,
		SourceChannel:          "email",
		SourceEndpointIdentity: "herald@example.com",
		// Nothing vouches for the From header (see auth_test.go).
		SourceSenderIdentity: "unverified:ann@example.org",
		SourceThreadIdentity: "<lunch-1@example.org>",
		ReceivedAt:           rc.ReceivedAt,
	}
	if rc != want {
		t.Errorf("request_context %+v, want %+v", rc, want)
	}
	if rc.RequestID == "" || rc.ReceivedAt == "" {
		t.Errorf("request_context lacks request_id or received_at: %+v", rc)
	}
	if in.Content.Text != "Shall we meet at noon?" {
		t.Errorf("text %q, want the body", in.Content.Text)
	}
	diffMeta(t, in.Meta, map[string]string{
		"from":                 "Ann Example <ann@example.org>",
		"user":                 "Ann Example",
		"user_id":              "unverified:ann@example.org",
		"chat_id":              "ann@example.org",
		"chat_type":            "private",
		"sender_authenticated": "false",
		"sender_auth":          "no_signature",
		"envelope_from":        "ann@example.org",
		"to":                   "herald@example.com, butler@example.com",
		"header_to":            "herald@example.com",
		"cc":                   "bob@example.org",
		"subject":              "Lunch on Friday?",
		"message_id":           "<lunch-1@example.org>",
		"thread_id":            "<lunch-1@example.org>",
		"ts":                   "1136214245",
	})
	if len(in.Attachments) != 0 {
		t.Errorf("attachments %+v, want none", in.Attachments)
	}

	st := rec.lastStatus()
	if st.State != deliver.StateRunning || st.LastInbound.IsZero() || st.Integration != "mail" || st.Instance != "test-1" {
		t.Errorf("status after a mail %+v, want running with last_inbound set", st)
	}
}

func TestThreadID(t *testing.T) {
	tests := []struct {
		name       string
		headers    string
		thread     string
		inReplyTo  string
		references string
	}{
		{
			name:       "reply in a long thread maps to the root",
			headers:    "In-Reply-To: <b@example.org>\nReferences: <root@example.org>\n <a@example.com> <b@example.org>\n",
			thread:     "<root@example.org>",
			inReplyTo:  "<b@example.org>",
			references: "<root@example.org> <a@example.com> <b@example.org>",
		},
		{
			name:      "In-Reply-To only",
			headers:   "In-Reply-To: <parent@example.org> (Ann's mail)\n",
			thread:    "<parent@example.org>",
			inReplyTo: "<parent@example.org>",
		},
		{
			name:   "a new mail starts its own thread",
			thread: "<this@example.org>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, addr := startReceiver(t, inboundIntegration())
			msg := "From: ann@example.org\nSubject: Re: plans\nMessage-ID: <this@example.org>\n" + tt.headers + "\nSounds good.\n"
			mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(msg))
			in := oneIngress(t, rec)
			if got := in.Meta["thread_id"]; got != tt.thread {
				t.Errorf("thread_id %q, want %q", got, tt.thread)
			}
			if got := in.Meta["in_reply_to"]; got != tt.inReplyTo {
				t.Errorf("in_reply_to %q, want %q", got, tt.inReplyTo)
			}
			if got := in.Meta["references"]; got != tt.references {
				t.Errorf("references %q, want %q", got, tt.references)
			}
			if got := in.RequestContext.SourceThreadIdentity; got != "<this@example.org>" {
				t.Errorf("source_thread_identity %q, want this mail's Message-ID", got)
			}
		})
	}
}

// TestConversation runs an email conversation through both halves of the
// channel: a mail comes in, the butler's reply goes out threaded under it,
// and the person's answer to that reply lands in the same thread.
func TestConversation(t *testing.T) {
	rec, addr := startReceiver(t, inboundIntegration())
	mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(plainMail))
	first := oneIngress(t, rec)

	out := smtptest.NewServer(t)
	deliverOne(t, newSender(t, out), deliver.Delivery{
		Key:     "k-reply-1",
		Intent:  "reply",
		Butler:  "health",
		Message: "Noon works.",
		Thread:  first.RequestContext.SourceThreadIdentity,
		Sender:  first.RequestContext.SourceSenderIdentity,
	})
	reply := out.WaitMessages(t, 1, wait)[0]
	if !slices.Equal(reply.To, []string{"ann@example.org"}) {
		t.Errorf("the reply went to %v, want ann@example.org", reply.To)
	}
	if got := reply.Header.Get("In-Reply-To"); got != "<lunch-1@example.org>" {
		t.Errorf("the reply's In-Reply-To is %q, want Ann's Message-ID <lunch-1@example.org>", got)
	}
	replyID := reply.Header.Get("Message-ID")

	answer := "From: Ann Example <ann@example.org>\nTo: herald@example.com\nSubject: Re: [health] Noon works.\n" +
		"Message-ID: <lunch-3@example.org>\nIn-Reply-To: " + replyID + "\nReferences: <lunch-1@example.org> " + replyID + "\n\n" +
		"Great, see you.\n\nOn Mon, 2 Jan 2006 at 16:00, Herald <herald@example.com> wrote:\n> Noon works.\n"
	mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(answer))
	got := rec.ingresses()
	if len(got) != 2 {
		t.Fatalf("got %d ingress envelopes, want 2", len(got))
	}
	second := got[1]
	if second.Meta["thread_id"] != first.Meta["thread_id"] {
		t.Errorf("the answer has thread_id %q, the first mail %q; want one thread", second.Meta["thread_id"], first.Meta["thread_id"])
	}
	if second.Meta["in_reply_to"] != replyID {
		t.Errorf("the answer's in_reply_to is %q, want the reply's Message-ID %q", second.Meta["in_reply_to"], replyID)
	}
	if second.Content.Text != "Great, see you." {
		t.Errorf("text %q, want the answer without the quoted reply", second.Content.Text)
	}
}

func TestDecoding(t *testing.T) {
	latin1Subject := "=?ISO-8859-1?B?" + base64.StdEncoding.EncodeToString([]byte("Caf\xe9 cr\xe8me")) + "?="
	tests := []struct {
		name        string
		msg         string
		wantSubject string
		wantText    string
	}{
		{
			name: "quoted-printable body and RFC 2047 subject",
			msg: "Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe_aus_K=C3=B6ln?=\nContent-Type: text/plain; charset=UTF-8\n" +
				"Content-Transfer-Encoding: quoted-printable\n\nSch=C3=B6ne Gr=C3=BC=C3=9Fe, bis =\nbald =3D morgen.\n",
			wantSubject: "Grüße aus Köln",
			wantText:    "Schöne Grüße, bis bald = morgen.",
		},
		{
			name: "base64 body and Latin-1 encoded word",
			msg: "Subject: " + latin1Subject + "\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\n" +
				base64.StdEncoding.EncodeToString([]byte("Zwei Stück, bitte.")) + "\n",
			wantSubject: "Café crème",
			wantText:    "Zwei Stück, bitte.",
		},
		{
			name:        "Latin-1 body",
			msg:         "Subject: plain\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: 8bit\n\nUn caf\xe9.\n",
			wantSubject: "plain",
			wantText:    "Un café.",
		},
		{
			name:        "Windows-1252 quotes",
			msg:         "Subject: q\nContent-Type: text/plain; charset=windows-1252\nContent-Transfer-Encoding: quoted-printable\n\n=93Quoted=94 =96 done\n",
			wantSubject: "q",
			wantText:    "“Quoted” – done",
		},
		{
			name: "HTML only becomes text",
			msg: "Subject: html\nContent-Type: text/html; charset=utf-8\n\n<html><head><title>T</title><style>p{color:red}</style></head>\n" +
				"<body><p>Hello&nbsp;<b>Ann</b>,</p>\n<p>line one<br>line\ntwo</p><script>alert('x')</script><!-- hidden -->" +
				"<ul><li>eggs</li><li>ham &amp; cheese</li></ul><a href=\"https://example.org\">link</a></body></html>\n",
			wantSubject: "html",
			wantText:    "Hello Ann,\n\nline one\nline two\n\n- eggs\n- ham & cheese\nlink",
		},
		{
			name: "text/plain preferred over text/html",
			msg: "Subject: alt\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=\"xyz\"\n\n" +
				"--xyz\nContent-Type: text/html\n\n<p>HTML version</p>\n--xyz\nContent-Type: text/plain\n\nPlain version\n--xyz--\n",
			wantSubject: "alt",
			wantText:    "Plain version",
		},
		{
			name: "an empty text/plain falls back to the HTML",
			msg: "Subject: alt\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=\"xyz\"\n\n" +
				"--xyz\nContent-Type: text/plain\n\n\n--xyz\nContent-Type: text/html\n\n<div>Only here</div>\n--xyz--\n",
			wantSubject: "alt",
			wantText:    "Only here",
		},
		{
			name:        "no MIME headers at all",
			msg:         "Subject: old school\n\nJust text.\n",
			wantSubject: "old school",
			wantText:    "Just text.",
		},
		{
			name:        "a quote written between answers stays",
			msg:         "Subject: inline\n\n> Noon?\nYes.\n> Where?\nThe usual place.\n",
			wantSubject: "inline",
			wantText:    "> Noon?\nYes.\n> Where?\nThe usual place.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, addr := startReceiver(t, inboundIntegration())
			msg := "From: ann@example.org\nMessage-ID: <d@example.org>\n" + tt.msg
			mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(msg))
			in := oneIngress(t, rec)
			if got := in.Meta["subject"]; got != tt.wantSubject {
				t.Errorf("subject %q, want %q", got, tt.wantSubject)
			}
			if in.Content.Text != tt.wantText {
				t.Errorf("text:\n%q\nwant:\n%q", in.Content.Text, tt.wantText)
			}
		})
	}
}

func TestLoopProtection(t *testing.T) {
	tests := []struct {
		name     string
		mailFrom string
		headers  string
		reason   string // "" means it is a person's mail and goes through
	}{
		{"vacation reply", "ann@example.org", "Auto-Submitted: auto-replied\n", "auto_submitted"},
		{"auto-generated with parameters", "ann@example.org", "Auto-Submitted: auto-generated; owner-email=\"x@example.org\"\n", "auto_submitted"},
		{"Auto-Submitted: no is a person", "ann@example.org", "Auto-Submitted: no\n", ""},
		{"Precedence: bulk", "ann@example.org", "Precedence: bulk\n", "precedence_bulk"},
		{"Precedence: junk", "ann@example.org", "Precedence: Junk\n", "precedence_bulk"},
		{"Precedence: list", "ann@example.org", "Precedence: list\n", "precedence_bulk"},
		{"mailing list", "ann@example.org", "List-Id: Friends <friends.lists.example.org>\n", "mailing_list"},
		{"bounce with a null return path", "", "", "bounce"},
		{"delivery report", "ann@example.org", "Content-Type: multipart/report; report-type=delivery-status; boundary=\"r\"\n", "bounce"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, addr := startReceiver(t, inboundIntegration())
			msg := "From: Ann <ann@example.org>\nSubject: Out of office\nMessage-ID: <auto@example.org>\n" + tt.headers +
				"\n--r\nContent-Type: text/plain\n\nI am away until Monday.\n--r--\n"
			if stage, err := sendMail(t, addr, tt.mailFrom, []string{"herald@example.com"}, crlf(msg)); err != nil {
				t.Fatalf("answered %v at %s, want 250 (accept and discard, so nothing retries or bounces)", err, stage)
			}
			drops := rec.drops()
			if tt.reason == "" {
				if len(drops) != 0 || len(rec.ingresses()) != 1 {
					t.Fatalf("got %d drops and %d ingress, want the mail through", len(drops), len(rec.ingresses()))
				}
				return
			}
			if n := len(rec.ingresses()); n != 0 {
				t.Errorf("%d ingress envelopes reached the sink, want none", n)
			}
			if len(drops) != 1 {
				t.Fatalf("got %d drops, want 1", len(drops))
			}
			d := drops[0]
			if d.reason != tt.reason {
				t.Errorf("dropped with reason %q, want %q", d.reason, tt.reason)
			}
			// Dropped mail is not authenticated (why look up keys for it?).
			if d.in.NativeID != "<auto@example.org>" || d.in.RequestContext.SourceSenderIdentity != "unverified:ann@example.org" || d.in.Meta["chat_id"] != "ann@example.org" {
				t.Errorf("the dropped record does not say which mail from whom: %+v", d.in)
			}
			if d.in.Content.Text != "" || d.in.Meta["subject"] != "" {
				t.Errorf("the dropped record carries the mail's content (text %q, subject %q); the audit log keeps none", d.in.Content.Text, d.in.Meta["subject"])
			}
		})
	}
}

func TestRecipientDomains(t *testing.T) {
	tests := []struct {
		name    string
		domains []string
		rcpt    string
		ok      bool
	}{
		{"a listed domain", []string{"example.com", "example.net"}, "anyone@EXAMPLE.NET", true},
		{"another domain", []string{"example.com"}, "victim@example.org", false},
		{"a subdomain is another domain", []string{"example.com"}, "x@mail.example.com", false},
		{"no domains: the from address's domain", nil, "herald@example.com", true},
		{"no domains: nothing else", nil, "victim@example.org", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inboundIntegration()
			in.Settings.(*email.Config).Inbound.Domains = tt.domains
			rec, addr := startReceiver(t, in)
			stage, err := sendMail(t, addr, "ann@example.org", []string{tt.rcpt}, crlf(plainMail))
			if tt.ok {
				if err != nil {
					t.Fatalf("refused at %s: %v", stage, err)
				}
				if n := len(rec.ingresses()); n != 1 {
					t.Errorf("%d ingress envelopes, want 1", n)
				}
				return
			}
			if stage != "RCPT" || smtpCode(err) != 550 {
				t.Fatalf("answered %v at %s, want 550 at RCPT: this is no open relay", err, stage)
			}
			if n := len(rec.ingresses()); n != 0 {
				t.Errorf("%d ingress envelopes, want none", n)
			}
			drops := rec.drops()
			if len(drops) != 1 || drops[0].reason != "foreign_domain" {
				t.Errorf("drops %+v, want one foreign_domain", drops)
			}
		})
	}
}

func TestTooLarge(t *testing.T) {
	in := inboundIntegration()
	in.Settings.(*email.Config).Inbound.MaxBytes = 2048
	rec, addr := startReceiver(t, in)

	big := "From: ann@example.org\nSubject: big\n\n" + strings.Repeat(strings.Repeat("x", 99)+"\n", 50)
	stage, err := sendMail(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(big))
	if stage != "DATA" || smtpCode(err) != 552 {
		t.Errorf("answered %v at %s, want 552 at DATA", err, stage)
	}
	if n := len(rec.ingresses()); n != 0 {
		t.Errorf("%d ingress envelopes, want none", n)
	}
	if drops := rec.drops(); len(drops) != 1 || drops[0].reason != "too_large" {
		t.Errorf("drops %+v, want one too_large", drops)
	}

	// A client that declares the size is refused before it sends anything.
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("ann@example.org", &smtp.MailOptions{Size: 5000}); smtpCode(err) != 552 {
		t.Errorf("MAIL with SIZE=5000 answered %v, want 552", err)
	}

	// A mail within the limit still goes through.
	mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(plainMail))
	if n := len(rec.ingresses()); n != 1 {
		t.Errorf("%d ingress envelopes after a small mail, want 1", n)
	}
}

func TestSinkFailureIsRetried(t *testing.T) {
	noID := "From: ann@example.org\nSubject: no id\n\nA mail without a Message-ID.\n"
	sum := sha256.Sum256([]byte(crlf(noID)))
	tests := []struct {
		name   string
		msg    string
		native string
	}{
		{"with a Message-ID", plainMail, "<lunch-1@example.org>"},
		{"without one, the hash of the mail", noID, "<" + hex.EncodeToString(sum[:]) + "@herald.invalid>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, addr := startReceiver(t, inboundIntegration())
			rec.mu.Lock()
			rec.failNext = 1
			rec.mu.Unlock()

			stage, err := sendMail(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(tt.msg))
			if stage != "DATA" || smtpCode(err) != 451 {
				t.Fatalf("with the sink failing, answered %v at %s; want 451 at DATA so the sender retries", err, stage)
			}
			if n := len(rec.ingresses()); n != 0 {
				t.Fatalf("%d ingress envelopes stored, want none", n)
			}

			// The sending server retries the same mail later.
			mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(tt.msg))
			in := oneIngress(t, rec)
			if in.NativeID != tt.native {
				t.Errorf("native_id %q, want %q", in.NativeID, tt.native)
			}
			if in.RequestContext.SourceThreadIdentity != tt.native || in.Meta["message_id"] != tt.native {
				t.Errorf("thread identity %q, message_id %q; want both %q", in.RequestContext.SourceThreadIdentity, in.Meta["message_id"], tt.native)
			}
			rec.mu.Lock()
			calls := rec.calls
			rec.mu.Unlock()
			if calls != 2 {
				t.Errorf("sink.Ingress called %d times, want 2 (the failure and the retry)", calls)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	certFile, keyFile, roots := writeTestCert(t)
	in := inboundIntegration()
	in.Settings.(*email.Config).Inbound.TLSCertFile, in.Settings.(*email.Config).Inbound.TLSKeyFile = certFile, keyFile
	in.Settings.(*email.Config).Inbound.AuthEnv = inboundAuthEnv
	getenv := func(k string) string {
		if k == inboundAuthEnv {
			return inboundUser + ":" + inboundPass
		}
		return ""
	}
	var logs testkit.Buffer
	rec, stop := runReceiver(t, in, getenv, &logs)
	addr := listening(t, rec)
	tlsConfig := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}

	t.Run("MAIL without AUTH is refused", func(t *testing.T) {
		c, err := smtp.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Hello("client.test"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := c.Extension("STARTTLS"); !ok {
			t.Error("STARTTLS is not offered")
		}
		if ok, _ := c.Extension("AUTH"); ok {
			t.Error("AUTH is offered before TLS")
		}
		if err := c.Mail("ann@example.org", nil); smtpCode(err) != 530 {
			t.Errorf("MAIL answered %v, want 530", err)
		}
	})
	t.Run("AUTH in clear is refused", func(t *testing.T) {
		c, err := smtp.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Auth(sasl.NewPlainClient("", inboundUser, "not-the-password")); smtpCode(err) != 523 {
			t.Errorf("AUTH without TLS answered %v, want 523 (TLS required)", err)
		}
	})
	t.Run("MAIL over TLS without AUTH is refused", func(t *testing.T) {
		c, err := smtp.DialStartTLS(addr, tlsConfig)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Mail("ann@example.org", nil); smtpCode(err) != 530 {
			t.Errorf("MAIL answered %v, want 530", err)
		}
	})
	t.Run("a wrong password is refused", func(t *testing.T) {
		c, err := smtp.DialStartTLS(addr, tlsConfig)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Auth(sasl.NewPlainClient("", inboundUser, "wrong")); smtpCode(err) != 535 {
			t.Errorf("AUTH with a wrong password answered %v, want 535", err)
		}
		if err := c.Mail("ann@example.org", nil); smtpCode(err) != 530 {
			t.Errorf("MAIL after a failed AUTH answered %v, want 530", err)
		}
	})
	t.Run("AUTH PLAIN over STARTTLS", func(t *testing.T) {
		c, err := smtp.DialStartTLS(addr, tlsConfig)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if ok, mechs := c.Extension("AUTH"); !ok || !strings.Contains(mechs, "PLAIN") {
			t.Errorf("over TLS AUTH is %v %q, want PLAIN offered", ok, mechs)
		}
		if err := c.Auth(sasl.NewPlainClient("", inboundUser, inboundPass)); err != nil {
			t.Fatalf("AUTH: %v", err)
		}
		if stage, err := transact(c, "ann@example.org", []string{"herald@example.com"}, crlf(plainMail)); err != nil {
			t.Fatalf("refused at %s: %v", stage, err)
		}
		if n := len(rec.ingresses()); n != 1 {
			t.Errorf("%d ingress envelopes, want 1", n)
		}
	})

	stop()
	if strings.Contains(logs.String(), inboundPass) {
		t.Errorf("the logs contain the AUTH password:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "authentication failed") {
		t.Errorf("the failed AUTH is not logged:\n%s", logs.String())
	}
}

func TestNewReceiver(t *testing.T) {
	certFile, keyFile, _ := writeTestCert(t)
	getenv := func(k string) string {
		switch k {
		case "GOOD_AUTH":
			return "relay:pw"
		case "BAD_AUTH":
			return "no-colon-secret-value"
		}
		return ""
	}
	tests := []struct {
		name    string
		change  func(*config.Integration)
		none    bool   // nil, nil: no inbound
		wantErr string // "" for success
	}{
		{name: "inbound off", change: func(in *config.Integration) { in.Inbound.Enabled = false }, none: true},
		{name: "integration disabled", change: func(in *config.Integration) { in.Disabled = true }, none: true},
		{name: "plain", change: func(*config.Integration) {}},
		{name: "STARTTLS and AUTH", change: func(in *config.Integration) {
			in.Settings.(*email.Config).Inbound.TLSCertFile, in.Settings.(*email.Config).Inbound.TLSKeyFile, in.Settings.(*email.Config).Inbound.AuthEnv = certFile, keyFile, "GOOD_AUTH"
		}},
		{name: "no listen address", change: func(in *config.Integration) { in.Settings.(*email.Config).Inbound.Listen = "" }, wantErr: "inbound.listen"},
		{name: "a certificate without its key", change: func(in *config.Integration) { in.Settings.(*email.Config).Inbound.TLSCertFile = certFile }, wantErr: "tls_key_file"},
		{name: "a missing certificate file", change: func(in *config.Integration) {
			in.Settings.(*email.Config).Inbound.TLSCertFile, in.Settings.(*email.Config).Inbound.TLSKeyFile = filepath.Join(t.TempDir(), "none.pem"), keyFile
		}, wantErr: "tls_cert_file"},
		{name: "AUTH without TLS", change: func(in *config.Integration) { in.Settings.(*email.Config).Inbound.AuthEnv = "GOOD_AUTH" }, wantErr: "tls_cert_file"},
		{name: "AUTH variable unset", change: func(in *config.Integration) {
			in.Settings.(*email.Config).Inbound.TLSCertFile, in.Settings.(*email.Config).Inbound.TLSKeyFile, in.Settings.(*email.Config).Inbound.AuthEnv = certFile, keyFile, "UNSET_AUTH"
		}, wantErr: "UNSET_AUTH"},
		{name: "AUTH variable not user:password", change: func(in *config.Integration) {
			in.Settings.(*email.Config).Inbound.TLSCertFile, in.Settings.(*email.Config).Inbound.TLSKeyFile, in.Settings.(*email.Config).Inbound.AuthEnv = certFile, keyFile, "BAD_AUTH"
		}, wantErr: "user:password"},
		{name: "no domains and no from", change: func(in *config.Integration) {
			in.Settings.(*email.Config).Inbound.Domains, in.Settings.(*email.Config).From = nil, ""
		}, wantErr: "needs from"},
		{name: "a domain that is not one", change: func(in *config.Integration) { in.Settings.(*email.Config).Inbound.Domains = []string{"me@example.com"} }, wantErr: "inbound.domains"},
		{name: "trusted relays", change: func(in *config.Integration) {
			in.Settings.(*email.Config).Inbound.TrustedRelays = []string{"mx.example.net", " MX2.example.net "}
		}},
		{name: "a trusted relay that is no authserv-id", change: func(in *config.Integration) {
			in.Settings.(*email.Config).Inbound.TrustedRelays = []string{"mx.example.net; dmarc=pass"}
		}, wantErr: "inbound.trusted_relays"},
		{name: "an empty trusted relay", change: func(in *config.Integration) { in.Settings.(*email.Config).Inbound.TrustedRelays = []string{" "} }, wantErr: "inbound.trusted_relays"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inboundIntegration()
			tt.change(&in)
			rcv, err := email.NewReceiver(in, deliver.Env{Getenv: getenv})
			switch {
			case tt.wantErr != "":
				if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want a config.ErrInvalid naming %s", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "no-colon-secret-value") {
					t.Errorf("the error quotes the secret: %v", err)
				}
			case err != nil:
				t.Fatalf("NewReceiver: %v", err)
			case tt.none && rcv != nil:
				t.Errorf("got a receiver, want nil for an integration without inbound mail")
			case !tt.none && rcv == nil:
				t.Errorf("got no receiver")
			}
		})
	}
}

func TestListenerFailureIsReported(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in := inboundIntegration()
	in.Settings.(*email.Config).Inbound.Listen = taken.Addr().String()
	rec, _ := runReceiver(t, in, nil, nil)

	st := rec.waitStatus(t, "error", func(s deliver.Status) bool { return s.State == deliver.StateError })
	if !strings.Contains(st.Detail, in.Settings.(*email.Config).Inbound.Listen) {
		t.Errorf("error detail %q does not name the address %s", st.Detail, in.Settings.(*email.Config).Inbound.Listen)
	}
	// Once the address is free, the receiver listens on it.
	taken.Close()
	addr := listening(t, rec)
	if addr != in.Settings.(*email.Config).Inbound.Listen {
		t.Errorf("listening on %s, want %s", addr, in.Settings.(*email.Config).Inbound.Listen)
	}
	mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(plainMail))
}

// TestStopFinishesMailInFlight stops the receiver while a mail is being
// stored: the mail is still stored and answered 250, then the port closes.
func TestStopFinishesMailInFlight(t *testing.T) {
	rec, stop := runReceiver(t, inboundIntegration(), nil, nil)
	addr := listening(t, rec)
	release := make(chan struct{})
	rec.mu.Lock()
	rec.block, rec.entered = release, make(chan struct{}, 1)
	entered := rec.entered
	rec.mu.Unlock()

	sent := make(chan error, 1)
	go func() {
		c, err := smtp.Dial(addr)
		if err != nil {
			sent <- err
			return
		}
		defer c.Close()
		_, err = transact(c, "ann@example.org", []string{"herald@example.com"}, crlf(plainMail))
		sent <- err
	}()
	select {
	case <-entered:
	case <-time.After(wait):
		t.Fatal("the mail never reached the sink")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	close(release)
	select {
	case err := <-sent:
		if err != nil {
			t.Errorf("the mail in flight while stopping was answered %v, want 250", err)
		}
	case <-time.After(wait):
		t.Fatal("no answer to the mail in flight")
	}
	<-stopped
	if n := len(rec.ingresses()); n != 1 {
		t.Errorf("%d ingress envelopes, want the mail in flight stored", n)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still takes connections after the receiver stopped", addr)
	}
}

// writeTestCert writes a self-signed certificate for 127.0.0.1 and its key
// to PEM files and returns them with a pool that trusts the certificate.
func writeTestCert(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "herald inbound test"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}
