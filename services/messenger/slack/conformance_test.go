package slack_test

import (
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

func TestConformance(t *testing.T) {
	var srv *slacktest.Server
	delivertest.Run(t, delivertest.Harness{
		New: func(t *testing.T) deliver.Sender {
			srv = slacktest.NewServer(t)
			return newSender(t, srv, srv.Token())
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, c := range srv.Calls("chat.postMessage") {
				if c.OK() {
					for _, a := range c.Attachments {
						out = append(out, a.Text)
					}
				}
			}
			return out
		},
		CanReact: true,
	})
}
