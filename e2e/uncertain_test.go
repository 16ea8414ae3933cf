package e2e

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/telegram"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// callTimeout is the Telegram client's timeout in these tests, in place of
// 30 seconds.
const callTimeout = 300 * time.Millisecond

// TestUnansweredCallIsUncertain: Telegram takes a message and answers only
// after the client gave up (the 40 s answer to a 30 s timeout). The
// messenger cannot know whether the human has it, so the delivery is
// audited uncertain and the butler told so, never confirmed after a silent
// second send: with on_uncertain: resend it goes out again and the answer
// says it may be there twice; with skip it is not sent again and the
// answer says it may be missing.
func TestUnansweredCallIsUncertain(t *testing.T) {
	for _, tc := range []struct {
		policy string
		sends  int    // sendMessage calls Telegram gets
		note   string // what the answer says
		ids    int    // message ids of the parts that surely went out
	}{
		{policy: config.OnUncertainResend, sends: 2, note: "twice", ids: 1},
		{policy: config.OnUncertainSkip, sends: 1, note: "may not have it", ids: 0},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			f := newFleet(t)
			f.cfg.Integration("tg_main").OnUncertain = tc.policy
			f.start("switchboard")
			f.startMessenger(messenger.Options{Channels: map[string]deliver.Factory{"telegram": func(in config.Integration, env deliver.Env) (deliver.Sender, error) {
				env.CallTimeout = callTimeout
				return telegram.New(in, env)
			}}})
			// The first sendMessage is carried out, and its answer held
			// until the test ends; later ones are answered at once.
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			var held atomic.Bool
			f.tg.OnAccept("sendMessage", func(telegramtest.Call) {
				if held.CompareAndSwap(false, true) {
					<-release
				}
			})

			r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram:tg_main", Message: "Dose taken at 08:00"}, nil))
			resp, err := f.routeClient().Send(t.Context(), r)
			if err != nil || resp.Status != envelope.StatusOK {
				t.Fatalf("send: %v %+v", err, resp)
			}
			calls := f.tg.Calls("sendMessage")
			if len(calls) != tc.sends {
				t.Fatalf("Telegram got %d sendMessage calls, want %d", len(calls), tc.sends)
			}
			chat, _ := strconv.ParseInt(chatID, 10, 64)
			if n := len(f.tg.Messages(chat)); n != tc.sends {
				t.Fatalf("the chat has %d messages, want %d", n, tc.sends)
			}
			d := resp.Result.NotifyResponse.Delivery
			if d.Outcome != ledger.OutcomeUncertain || !strings.Contains(d.Note, tc.note) {
				t.Fatalf("delivery %+v: want outcome uncertain, with a note saying %q", d, tc.note)
			}
			sent := 0
			for _, id := range d.MessageIDs {
				if id != "" {
					sent++
				}
			}
			if len(d.MessageIDs) != 1 || sent != tc.ids {
				t.Fatalf("message ids %q: want one part, with an id only if it was sent again", d.MessageIDs)
			}
			if rec := f.record("health", r.IdempotencyKey()); rec.Outcome != ledger.OutcomeUncertain {
				t.Fatalf("the ledger says %+v, want uncertain", rec)
			}
			audits := f.auditN("uncertain", 1)
			if len(audits) != 1 || audits[0]["request_id"] != r.RequestContext.RequestID || audits[0]["delivery_id"] != d.DeliveryID {
				t.Fatalf("uncertain audit records %v, want one for request %s", audits, r.RequestContext.RequestID)
			}
		})
	}
}
