package slack_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/slack"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

func TestConformance(t *testing.T) {
	var (
		srv    *slacktest.Server
		thread string // the ts of the message Thread names, in C0GENERAL
	)
	posts := func() []slacktest.Call { return srv.Accepted("chat.postMessage") }
	delivertest.Run(t, delivertest.Harness{
		NewTimeout: func(t *testing.T, timeout time.Duration) deliver.Sender {
			srv = slacktest.NewServer(t)
			return newSenderTimeout(t, srv, srv.Token(), timeout)
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, c := range posts() {
				for _, a := range c.Attachments {
					out = append(out, a.Text)
				}
			}
			return out
		},
		Features: delivertest.Features{
			Chunks: true, Recipients: true, Threads: true, React: true, Files: true,
			Faults:   []delivertest.Fault{delivertest.FaultRefused, delivertest.FaultNoRecipient, delivertest.FaultUnavailable, delivertest.FaultRateLimit},
			NoAnswer: true, APIURL: true, RefusesEmpty: true,
		},
		NewAt: func(t *testing.T, url string) deliver.Sender {
			srv = slacktest.NewServer(t)
			return newSender(t, srv, srv.Token(), func(in *config.Integration) { in.Settings.(*slack.Config).APIURL = url })
		},
		NotJSON: "not Web API JSON",
		Calls:   func(t *testing.T) int { return len(srv.Calls("")) },
		// Paragraphs of 2400 characters: two never fit in one
		// 3000-character message, and one always does.
		LongMessage:      delivertest.Paragraphs(480),
		DefaultRecipient: "C0DEFAULT",
		Recipient:        func(*testing.T) string { return "C0GENERAL" },
		DeliveredTo:      delivertest.Each(posts, func(c slacktest.Call) string { return c.Channel }),
		Thread: func(t *testing.T) string {
			cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "how full is the disk?"})
			thread = cb.Event.TS
			return "C0GENERAL:" + thread
		},
		InThread:  delivertest.Each(posts, func(c slacktest.Call) bool { return c.Channel == "C0GENERAL" && c.Params["thread_ts"] == thread }),
		Reactions: func(t *testing.T) int { return len(srv.Accepted("reactions.add")) },
		Uploaded:  func(t *testing.T) []delivertest.Upload { return uploaded(srv) },
		Fail: func(t *testing.T, f delivertest.Fault) {
			switch f {
			case delivertest.FaultRefused:
				srv.FailNext("chat.postMessage", 1, "something_new")
			case delivertest.FaultNoRecipient:
				srv.FailChannel("C0DEFAULT", "channel_not_found")
			case delivertest.FaultUnavailable:
				srv.FailHTTPNext("chat.postMessage", 1, http.StatusServiceUnavailable)
			case delivertest.FaultRateLimit:
				srv.RateLimitNext("chat.postMessage", 1, int(delivertest.RetryAfter.Seconds()))
			}
		},
		Stall: func(t *testing.T, release <-chan struct{}) {
			srv.OnAccept("chat.postMessage", func(slacktest.Call) { <-release })
		},
		HangUp:  func(t *testing.T) { srv.HangUpNext("chat.postMessage", 1) },
		Down:    func(t *testing.T) { srv.Close() },
		Secrets: func(t *testing.T) []string { return []string{srv.Token()} },
	})
}

// uploaded is every file the fake shared, the share's initial_comment as
// its first file's caption.
func uploaded(srv *slacktest.Server) []delivertest.Upload {
	var out []delivertest.Upload
	for _, sh := range srv.Shares() {
		for i, f := range sh.Files {
			u := delivertest.Upload{Name: f.Name, MediaType: f.MediaType, Data: f.Data}
			if i == 0 {
				u.Caption = sh.InitialComment
			}
			out = append(out, u)
		}
	}
	return out
}

func TestReceiverConformance(t *testing.T) {
	var (
		srv *slacktest.Server
		url string
	)
	post := func(t *testing.T, cb slacktest.Callback, opts ...slacktest.EventOption) {
		t.Helper()
		if _, err := slacktest.SendEvent(t.Context(), url, secret, cb, opts...); err != nil {
			t.Fatal(err)
		}
	}
	delivertest.RunReceiver(t, delivertest.ReceiverHarness{
		Start: func(t *testing.T, sink *delivertest.Sink) {
			srv = slacktest.NewServer(t)
			h := deliver.NewHTTP()
			r, err := slack.NewReceiver(config.Integration{ID: "slack_main", Type: "slack", Inbound: config.Inbound{Enabled: true}, Settings: &slack.Config{SigningSecretEnv: secretEnv}}, deliver.Env{
				Getenv: func(k string) string { return map[string]string{secretEnv: secret}[k] },
				Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
				HTTP:   h,
			})
			if err != nil || r == nil {
				t.Fatalf("NewReceiver: %v, %v", r, err)
			}
			hs := httptest.NewServer(h)
			t.Cleanup(hs.Close)
			url = hs.URL + "/slack/slack_main/events"
			delivertest.Receive(t, r, sink)
		},
		// Slack retries an event it got no 200 for, saying so in
		// X-Slack-Retry-Num.
		Send: func(t *testing.T, text string) func(*testing.T) {
			cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: text})
			post(t, cb)
			return func(t *testing.T) { post(t, cb, slacktest.Retry(1, "http_error")) }
		},
		Sender:   func() string { return "U0HUMAN01" },
		Features: delivertest.ReceiverFeatures{Threads: true, Refuses: true, DropsInvalid: true},
		SendInThread: func(t *testing.T, text string) {
			root := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "the root"})
			post(t, srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: text, ThreadTS: root.Event.TS}))
		},
		Refuse: func(t *testing.T) {
			post(t, srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "forged"}), slacktest.WithSignature(""))
		},
	})
}
