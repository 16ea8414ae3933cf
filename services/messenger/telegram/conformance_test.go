package telegram_test

import (
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

func TestConformance(t *testing.T) {
	var srv *telegramtest.Server
	delivertest.Run(t, delivertest.Harness{
		New: func(t *testing.T) deliver.Sender {
			srv = telegramtest.NewServer(t)
			return newSender(t, srv, srv.Token())
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, c := range srv.Calls("sendMessage") {
				if c.OK() {
					out = append(out, c.Params["text"])
				}
			}
			return out
		},
		CanReact: true,
	})
}
