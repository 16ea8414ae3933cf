package email_test

import (
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/email/smtptest"
)

// thread is the Message-ID of the mail the suite replies to.
const thread = "<CAB1234@mail.example.com>"

func TestConformance(t *testing.T) {
	var srv *smtptest.Server
	delivertest.Run(t, delivertest.Harness{
		New: func(t *testing.T) deliver.Sender {
			srv = smtptest.NewServer(t, smtptest.WithAuth("herald", "pw"), smtptest.WithSTARTTLS())
			return newSender(t, srv)
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, m := range srv.Messages() {
				if p, ok := m.Part("text/plain"); ok {
					out = append(out, p.Body)
				}
			}
			return out
		},
		// A mail is never split, and SMTP has no reactions and no
		// retry-after.
		Features: delivertest.Features{
			Recipients: true, Threads: true,
			Faults: []delivertest.Fault{delivertest.FaultRefused, delivertest.FaultNoRecipient, delivertest.FaultUnavailable},
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
	})
}
