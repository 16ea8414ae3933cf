package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/webhook"
	"github.com/heraldhq/herald/services/messenger/webhook/webhooktest"
)

// thread is the thread the suite replies and reacts to: a webhook's thread
// is whatever the poster named it.
const thread = "pr-1234"

func TestConformance(t *testing.T) {
	var (
		srv    *webhooktest.Server
		secret string
	)
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
		NewTimeout: func(t *testing.T, timeout time.Duration) deliver.Sender {
			secret = webhooktest.NewSecret()
			srv = webhooktest.NewServer(t, secret)
			return newSenderTimeout(t, secret, map[string]string{"ops": srv.URL("/ops/s3cr3t-path-token"), "pager": srv.URL("/pager")}, timeout)
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, r := range accepted(false) {
				m, _ := r.Payload["message"].(string)
				out = append(out, m)
			}
			return out
		},
		// A message is one POST, never split, its files in it; a reaction
		// is an event with intent react.
		Features: delivertest.Features{
			Recipients: true, Threads: true, React: true, Files: true,
			Faults:   []delivertest.Fault{delivertest.FaultRefused, delivertest.FaultNoRecipient, delivertest.FaultUnavailable, delivertest.FaultRateLimit},
			NoAnswer: true,
		},
		Uploaded: func(t *testing.T) []delivertest.Upload {
			var out []delivertest.Upload
			for _, r := range accepted(false) {
				for _, f := range r.Files {
					out = append(out, delivertest.Upload{Name: f.Name, MediaType: f.MediaType, Data: f.Data})
				}
			}
			return out
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
		Stall: func(t *testing.T, release <-chan struct{}) {
			srv.OnAccept(func(webhooktest.Request) { <-release })
		},
		HangUp: func(t *testing.T) { srv.HangUpNext(1) },
		Down:   func(t *testing.T) { srv.Close() },
		// The secret, and the token in the default recipient's path.
		Secrets: func(t *testing.T) []string { return []string{secret, "s3cr3t-path-token"} },
	})
}

func TestReceiverConformance(t *testing.T) {
	var url, secret string
	send := func(t *testing.T, text string, opts webhooktest.PostOptions) *webhooktest.Response {
		t.Helper()
		resp, err := webhooktest.Post(url, secret, blob("text", text, "sender", "github-actions", "chat", "alerts"), opts)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	delivertest.RunReceiver(t, delivertest.ReceiverHarness{
		Start: func(t *testing.T, sink *delivertest.Sink) {
			secret = webhooktest.NewSecret()
			e := env(t, secret, nil)
			e.HTTP = deliver.NewHTTP()
			r, err := webhook.NewReceiver(config.Integration{ID: "ci", Type: "webhook", Inbound: config.Inbound{Enabled: true}, Settings: &webhook.Config{SecretEnv: secretEnv}}, e)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.MaxBytesHandler(e.HTTP, 1<<20))
			t.Cleanup(srv.Close)
			url = srv.URL + webhook.Path("ci")
			delivertest.Receive(t, r, sink)
		},
		// The poster's retry is the same webhook-id and body.
		Send: func(t *testing.T, text string) func(*testing.T) {
			id := send(t, text, webhooktest.PostOptions{}).ID
			return func(t *testing.T) { send(t, text, webhooktest.PostOptions{ID: id}) }
		},
		Sender:   func() string { return "github-actions" },
		Features: delivertest.ReceiverFeatures{Threads: true, Refuses: true, DropsInvalid: true},
		SendInThread: func(t *testing.T, text string) {
			resp, err := webhooktest.Post(url, secret, blob("text", text, "sender", "github-actions", "thread", "pr-1234"), webhooktest.PostOptions{})
			if err != nil || resp.Status != http.StatusOK {
				t.Fatalf("post: %v %+v", err, resp)
			}
		},
		Refuse: func(t *testing.T) { send(t, "forged", webhooktest.PostOptions{BadSignature: true}) },
	})
}
