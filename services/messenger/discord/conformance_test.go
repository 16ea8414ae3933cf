package discord_test

import (
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/discord"
	"github.com/heraldhq/herald/services/messenger/discord/discordtest"
)

func TestConformance(t *testing.T) {
	var (
		srv    *discordtest.Server
		thread discordtest.Message // the message Thread names, in ChannelGeneral
	)
	posts := func() []discordtest.Call { return posted(srv) }
	delivertest.Run(t, delivertest.Harness{
		NewTimeout: func(t *testing.T, timeout time.Duration) deliver.Sender {
			srv = discordtest.NewServer(t)
			return newSenderTimeout(t, srv, srv.Token(), timeout)
		},
		Delivered: delivertest.Each(posts, func(c discordtest.Call) string { return c.Create.Content }),
		Features: delivertest.Features{
			Chunks: true, Recipients: true, Threads: true, React: true,
			Faults:   []delivertest.Fault{delivertest.FaultRefused, delivertest.FaultNoRecipient, delivertest.FaultUnavailable, delivertest.FaultRateLimit},
			NoAnswer: true, APIURL: true, RefusesEmpty: true, Files: true,
		},
		// The message and its files are one Discord message: its text is
		// in Delivered.
		Uploaded: func(t *testing.T) []delivertest.Upload {
			var out []delivertest.Upload
			for _, u := range srv.Uploads() {
				out = append(out, delivertest.Upload{Name: u.Name, MediaType: u.ContentType, Data: u.Data})
			}
			return out
		},
		NewAt: func(t *testing.T, url string) deliver.Sender {
			srv = discordtest.NewServer(t)
			return newSender(t, srv, srv.Token(), func(in *config.Integration) { in.Settings.(*discord.Config).APIURL = url })
		},
		NotJSON: "not Discord API JSON",
		Calls:   func(t *testing.T) int { return len(srv.Calls("")) },
		// Paragraphs of 1200 characters: two never fit in one
		// 2000-character message, and one always does.
		LongMessage:      delivertest.Paragraphs(240),
		DefaultRecipient: discordtest.ChannelDefault,
		Recipient:        func(*testing.T) string { return discordtest.ChannelGeneral },
		DeliveredTo:      delivertest.Each(posts, func(c discordtest.Call) string { return c.Channel }),
		Thread: func(t *testing.T) string {
			thread = srv.UserMessage(discordtest.MessageOptions{Content: "how full is the disk?"})
			return thread.ChannelID + ":" + thread.ID
		},
		InThread: func(t *testing.T) []bool {
			var out []bool
			for _, c := range posts() {
				ref := c.Create.MessageReference
				out = append(out, c.Channel == thread.ChannelID && ref != nil && ref.MessageID == thread.ID)
			}
			return out
		},
		Reactions: func(t *testing.T) int { return len(srv.Accepted(discordtest.RouteAddReaction)) },
		Fail: func(t *testing.T, f delivertest.Fault) {
			switch f {
			case delivertest.FaultRefused:
				srv.FailNext(discordtest.RouteCreateMessage, 1, 400, 50035, "Invalid Form Body")
			case delivertest.FaultNoRecipient:
				srv.FailChannel(discordtest.ChannelDefault, 403, 50001, "Missing Access")
			case delivertest.FaultUnavailable:
				srv.FailHTTPNext(discordtest.RouteCreateMessage, 1, 502)
			case delivertest.FaultRateLimit:
				srv.RateLimitNext(discordtest.RouteCreateMessage, 1, delivertest.RetryAfter, false)
			}
		},
		Stall: func(t *testing.T, release <-chan struct{}) {
			srv.OnAccept(discordtest.RouteCreateMessage, func(discordtest.Call) { <-release })
		},
		HangUp:  func(t *testing.T) { srv.HangUpNext(discordtest.RouteCreateMessage, 1) },
		Down:    func(t *testing.T) { srv.Close() },
		Secrets: func(t *testing.T) []string { return []string{srv.Token()} },
	})
}

func TestReceiverConformance(t *testing.T) {
	var srv *discordtest.Server
	delivertest.RunReceiver(t, delivertest.ReceiverHarness{
		Start: func(t *testing.T, sink *delivertest.Sink) {
			srv = discordtest.NewServer(t)
			r := newReceiver(t, srv, recv{})
			delivertest.Receive(t, r, sink)
			srv.WaitLive(t, 10*time.Second)
		},
		// The gateway pushes each event once per session; a message the
		// sink did not store is held and offered again by the receiver
		// itself. redeliver dispatches the same message again, as Discord
		// does when it replays events after a resume.
		Send: func(t *testing.T, text string) func(*testing.T) {
			m := srv.UserMessage(discordtest.MessageOptions{Content: text})
			return func(*testing.T) { srv.Again(m) }
		},
		Sender: func() string { return discordtest.HumanID },
		// Discord sends only what the bot may see; nothing is refused on
		// arrival.
		Features: delivertest.ReceiverFeatures{Threads: true, DropsInvalid: true},
		SendInThread: func(t *testing.T, text string) {
			th := srv.NewThread(discordtest.ChannelGeneral, "disk space")
			srv.UserMessage(discordtest.MessageOptions{Channel: th, Content: text})
		},
	})
}
