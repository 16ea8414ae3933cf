package telegram_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/telegram"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

func TestConformance(t *testing.T) {
	var (
		srv    *telegramtest.Server
		thread int64 // the message Thread names, in chat 42
	)
	sent := func() []telegramtest.Call { return srv.Accepted("sendMessage") }
	delivertest.Run(t, delivertest.Harness{
		NewTimeout: func(t *testing.T, timeout time.Duration) deliver.Sender {
			srv = telegramtest.NewServer(t)
			return newSenderTimeout(t, srv, srv.Token(), timeout)
		},
		Delivered: delivertest.Each(sent, func(c telegramtest.Call) string { return c.Params["text"] }),
		Features: delivertest.Features{
			Chunks: true, Recipients: true, Threads: true, React: true,
			Faults:   []delivertest.Fault{delivertest.FaultRefused, delivertest.FaultNoRecipient, delivertest.FaultUnavailable, delivertest.FaultRateLimit},
			NoAnswer: true, APIURL: true, RefusesEmpty: true, Files: true,
		},
		Uploaded: func(t *testing.T) []delivertest.Upload {
			var out []delivertest.Upload
			// The Bot API's multipart carries no media type (every part is
			// application/octet-stream): Telegram tells it from the bytes.
			for _, f := range srv.SentFiles() {
				out = append(out, delivertest.Upload{Name: f.Upload.Name, Data: f.Upload.Data, Caption: f.Caption})
			}
			return out
		},
		NewAt: func(t *testing.T, url string) deliver.Sender {
			srv = telegramtest.NewServer(t)
			return newSender(t, srv, srv.Token(), func(in *config.Integration) { in.Settings.(*telegram.Config).APIURL = url })
		},
		Calls: func(t *testing.T) int { return len(srv.Calls("")) },
		// Paragraphs of 3000 characters: two never fit in one 4096-character
		// message, and one always does.
		LongMessage:      delivertest.Paragraphs(600),
		DefaultRecipient: "42",
		Recipient:        func(*testing.T) string { return "77" },
		DeliveredTo:      delivertest.Each(sent, func(c telegramtest.Call) string { return c.Params["chat_id"] }),
		Thread: func(t *testing.T) string {
			_, m := srv.SendUserMessage(srv.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: 42}, Text: "how full is the disk?"})
			thread = m.MessageID
			return "42:" + strconv.FormatInt(m.MessageID, 10)
		},
		InThread: delivertest.Each(sent, func(c telegramtest.Call) bool {
			return c.ReplyParameters != nil && c.ReplyParameters.MessageID == thread && c.Params["chat_id"] == "42"
		}),
		Reactions: func(t *testing.T) int { return len(srv.Accepted("setMessageReaction")) },
		Fail: func(t *testing.T, f delivertest.Fault) {
			switch f {
			case delivertest.FaultRefused:
				srv.FailNext("sendMessage", 1, 400, "Bad Request: TOPIC_CLOSED", 0)
			case delivertest.FaultNoRecipient:
				srv.FailChat(42, 400, "Bad Request: chat not found")
			case delivertest.FaultUnavailable:
				srv.FailNext("sendMessage", 1, 502, "Bad Gateway", 0)
			case delivertest.FaultRateLimit:
				srv.FailNext("sendMessage", 1, 429, "Too Many Requests: retry after 120", int(delivertest.RetryAfter.Seconds()))
			}
		},
		Stall: func(t *testing.T, release <-chan struct{}) {
			srv.OnAccept("sendMessage", func(telegramtest.Call) { <-release })
		},
		HangUp: func(t *testing.T) { srv.HangUpNext("sendMessage", 1) },
		Down:   func(t *testing.T) { srv.Close() },
		// The token's secret half, after the bot id.
		Secrets: func(t *testing.T) []string {
			_, secret, _ := strings.Cut(srv.Token(), ":")
			return []string{secret}
		},
	})
}

func TestReceiverConformance(t *testing.T) {
	var srv *telegramtest.Server
	delivertest.RunReceiver(t, delivertest.ReceiverHarness{
		Start: func(t *testing.T, sink *delivertest.Sink) {
			srv = telegramtest.NewServer(t)
			_, js := bustest.RunServer(t).Connect()
			delivertest.Receive(t, newReceiver(t, receiverEnv{srv: srv, js: js}), sink)
		},
		// The poller fetches again whatever it did not confirm: the
		// provider need not do anything.
		Send: func(t *testing.T, text string) func(*testing.T) {
			srv.SendUserMessage(srv.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: 42}, Text: text})
			return func(*testing.T) {}
		},
		Sender: func() string { return "42" },
		// Telegram delivers only what the bot may see; nothing is refused on
		// arrival.
		Features: delivertest.ReceiverFeatures{Threads: true, DropsInvalid: true},
		SendInThread: func(t *testing.T, text string) {
			srv.SendUserMessage(srv.Token(), telegramtest.Message{
				Chat: telegramtest.Chat{ID: -1001234567890, Type: "supergroup"}, MessageThreadID: 3,
				From: &telegramtest.User{ID: 42, FirstName: "Ada"}, Text: text,
			})
		},
	})
}
