package slack_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

func TestConformance(t *testing.T) {
	var (
		srv    *slacktest.Server
		thread string // the ts of the message Thread names, in C0GENERAL
	)
	posts := func() []slacktest.Call {
		var out []slacktest.Call
		for _, c := range srv.Calls("chat.postMessage") {
			if c.OK() {
				out = append(out, c)
			}
		}
		return out
	}
	delivertest.Run(t, delivertest.Harness{
		New: func(t *testing.T) deliver.Sender {
			srv = slacktest.NewServer(t)
			return newSender(t, srv, srv.Token())
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
			Chunks: true, Recipients: true, Threads: true, React: true,
			Faults: []delivertest.Fault{delivertest.FaultRefused, delivertest.FaultNoRecipient, delivertest.FaultUnavailable, delivertest.FaultRateLimit},
		},
		// Paragraphs of 2400 characters: two never fit in one
		// 3000-character message, and one always does.
		LongMessage: func(n int) string {
			var paras []string
			for i := range n {
				paras = append(paras, strconv.Itoa(i)+strings.Repeat(" word", 480))
			}
			return strings.Join(paras, "\n\n")
		},
		DefaultRecipient: "C0DEFAULT",
		Recipient:        func(*testing.T) string { return "C0GENERAL" },
		DeliveredTo: func(t *testing.T) []string {
			var out []string
			for _, c := range posts() {
				out = append(out, c.Channel)
			}
			return out
		},
		Thread: func(t *testing.T) string {
			cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "how full is the disk?"})
			thread = cb.Event.TS
			return "C0GENERAL:" + thread
		},
		InThread: func(t *testing.T) []bool {
			var out []bool
			for _, c := range posts() {
				out = append(out, c.Channel == "C0GENERAL" && c.Params["thread_ts"] == thread)
			}
			return out
		},
		Reactions: func(t *testing.T) int {
			n := 0
			for _, c := range srv.Calls("reactions.add") {
				if c.OK() {
					n++
				}
			}
			return n
		},
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
	})
}
