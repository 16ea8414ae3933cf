package email_test

import (
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/email/smtptest"
)

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
	})
}
