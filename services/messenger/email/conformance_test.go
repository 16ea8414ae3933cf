package email_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/email"
	"github.com/heraldhq/herald/services/messenger/email/smtptest"
)

// thread is the Message-ID of the mail the suite replies to.
const thread = "<CAB1234@mail.example.com>"

func TestConformance(t *testing.T) {
	var srv *smtptest.Server
	delivertest.Run(t, delivertest.Harness{
		NewTimeout: func(t *testing.T, timeout time.Duration) deliver.Sender {
			srv = smtptest.NewServer(t, smtptest.WithAuth(user, password), smtptest.WithSTARTTLS())
			e := env(t, srv.URL())
			e.CallTimeout = timeout
			return delivertest.NewSender(t, email.New, integration(t, srv), e)
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, m := range srv.Messages() {
				if p, ok := m.Part("text/plain"); ok && p.Disposition == "" {
					out = append(out, p.Body)
				}
			}
			return out
		},
		// The files are the attachment parts of the mails, the text in
		// the mail's own body (Delivered).
		Uploaded: func(t *testing.T) []delivertest.Upload {
			var out []delivertest.Upload
			for _, m := range srv.Messages() {
				for _, p := range m.Attachments() {
					out = append(out, delivertest.Upload{Name: p.Filename, MediaType: p.MediaType, Data: []byte(p.Body)})
				}
			}
			return out
		},
		// A mail is never split, and SMTP has no reactions and no
		// retry-after. A mail taken without the sender hearing so is one
		// without a reply to its end, or whose connection was reset
		// before it.
		Features: delivertest.Features{
			Recipients: true, Threads: true,
			Faults:   []delivertest.Fault{delivertest.FaultRefused, delivertest.FaultNoRecipient, delivertest.FaultUnavailable},
			NoAnswer: true, Files: true,
		},
		DefaultRecipient: "me@example.com",
		Recipient:        func(*testing.T) string { return "bob@example.com" },
		DeliveredTo: func(t *testing.T) []string {
			var out []string
			for _, m := range srv.Messages() {
				out = append(out, m.To...)
			}
			return out
		},
		Thread: func(t *testing.T) string { return thread },
		InThread: func(t *testing.T) []bool {
			var out []bool
			for _, m := range srv.Messages() {
				out = append(out, m.Header.Get("In-Reply-To") == thread && m.Header.Get("References") == thread)
			}
			return out
		},
		Fail: func(t *testing.T, f delivertest.Fault) {
			switch f {
			case delivertest.FaultRefused:
				srv.FailNext(1, 554, "message looks like spam")
			case delivertest.FaultNoRecipient:
				srv.FailNextRcpt(1, 550, "no such user")
			case delivertest.FaultUnavailable:
				srv.FailNext(1, 451, "greylisted, try again later")
			}
		},
		Stall: func(t *testing.T, release <-chan struct{}) {
			srv.OnAccept(func(smtptest.Message) { <-release })
		},
		HangUp:  func(t *testing.T) { srv.HangUpNext(1) },
		Down:    func(t *testing.T) { srv.Close() },
		Secrets: func(t *testing.T) []string { return []string{password} },
	})
}

func TestReceiverConformance(t *testing.T) {
	var addr string
	n := 0
	mail := func(t *testing.T, headers, text string) string {
		t.Helper()
		n++
		id := fmt.Sprintf("<suite-%d@example.org>", n)
		msg := crlf("From: Ann <ann@example.org>\nTo: herald@example.com\nSubject: Pills\nMessage-ID: " + id + "\n" + headers +
			"Content-Type: text/plain; charset=utf-8\n\n" + text + "\n")
		// A 451 is the receiver asking for the retry the redelivery is.
		_, _ = sendMail(t, addr, "ann@example.org", []string{"herald@example.com"}, msg)
		return msg
	}
	delivertest.RunReceiver(t, delivertest.ReceiverHarness{
		Start: func(t *testing.T, sink *delivertest.Sink) {
			r, err := email.NewReceiverFactory()(inboundIntegration(), deliver.Env{
				Logger:   slog.New(slog.NewTextHandler(t.Output(), nil)),
				Instance: "test-1",
			})
			if err != nil || r == nil {
				t.Fatalf("NewReceiver: %v, %v", r, err)
			}
			delivertest.Receive(t, r, sink)
			for _, st := range sink.Statuses() {
				if a, ok := strings.CutPrefix(st.Detail, "listening on "); ok {
					addr = a
				}
			}
		},
		// The sending server retries the very same mail.
		Send: func(t *testing.T, text string) func(*testing.T) {
			msg := mail(t, "", text)
			return func(t *testing.T) {
				_, _ = sendMail(t, addr, "ann@example.org", []string{"herald@example.com"}, msg)
			}
		},
		// Without DKIM or SPF the sender is not authenticated.
		Sender:   func() string { return "unverified:ann@example.org" },
		Features: delivertest.ReceiverFeatures{Threads: true, Refuses: true, DropsInvalid: true},
		SendInThread: func(t *testing.T, text string) {
			mail(t, "In-Reply-To: <root@example.com>\nReferences: <root@example.com>\n", text)
		},
		// A vacation reply answered would start a mail loop.
		Refuse: func(t *testing.T) { mail(t, "Auto-Submitted: auto-replied\n", "I am away until Monday.") },
	})
}
