package webhook_test

import (
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// thread is the thread the suite replies and reacts to: a webhook's thread
// is whatever the poster named it.
const thread = "pr-1234"

func TestConformance(t *testing.T) {
	var srv *webhooktest.Server
	// accepted is every accepted webhook of intent react, or of any other.
	accepted := func(react bool) []webhooktest.Request {
		var out []webhooktest.Request
		for _, r := range srv.Accepted() {
			if (r.Payload["intent"] == "react") == react {
				out = append(out, r)
			}
		}
		return out
	}
	delivertest.Run(t, delivertest.Harness{
		New: func(t *testing.T) deliver.Sender {
			secret := webhooktest.NewSecret()
			srv = webhooktest.NewServer(t, secret)
			return newSender(t, secret, map[string]string{"ops": srv.URL("/ops"), "pager": srv.URL("/pager")})
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, r := range accepted(false) {
				m, _ := r.Payload["message"].(string)
				out = append(out, m)
			}
			return out
		},
		// A message is one POST, never split; a reaction is an event with
		// intent react.
		Features: delivertest.Features{
			Recipients: true, Threads: true, React: true,
			Faults: []delivertest.Fault{delivertest.FaultRefused, delivertest.FaultNoRecipient, delivertest.FaultUnavailable, delivertest.FaultRateLimit},
		},
		DefaultRecipient: "ops",
		Recipient:        func(*testing.T) string { return "pager" },
		DeliveredTo: func(t *testing.T) []string {
			var out []string
			for _, r := range accepted(false) {
				to, _ := r.Payload["recipient"].(string)
				out = append(out, to)
			}
			return out
		},
		Thread: func(t *testing.T) string { return thread },
		InThread: func(t *testing.T) []bool {
			var out []bool
			for _, r := range accepted(false) {
				out = append(out, r.Payload["thread"] == thread)
			}
			return out
		},
		Reactions: func(t *testing.T) int { return len(accepted(true)) },
		Fail: func(t *testing.T, f delivertest.Fault) {
			switch f {
			case delivertest.FaultRefused:
				srv.FailNext(422, 0)
			case delivertest.FaultNoRecipient:
				srv.FailNext(404, 0)
			case delivertest.FaultUnavailable:
				srv.FailNext(502, 0)
			case delivertest.FaultRateLimit:
				srv.FailNext(429, delivertest.RetryAfter)
			}
		},
	})
}
