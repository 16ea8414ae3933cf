package webhook_test

import (
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

func TestConformance(t *testing.T) {
	var srv *webhooktest.Server
	delivertest.Run(t, delivertest.Harness{
		New: func(t *testing.T) deliver.Sender {
			secret := webhooktest.NewSecret()
			srv = webhooktest.NewServer(t, secret)
			return newSender(t, secret, map[string]string{"ops": srv.URL("/ops")})
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, r := range srv.Accepted() {
				m, _ := r.Payload["message"].(string)
				out = append(out, m)
			}
			return out
		},
		// A reaction is sent as an event with intent react.
		CanReact: true,
	})
}
