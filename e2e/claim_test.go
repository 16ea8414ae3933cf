package e2e

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// claimOffer has finance send a claim_thread notify to alice's chat and
// returns the Telegram message it became.
func claimOffer(t *testing.T, f *fleet, msg string) telegramtest.Call {
	t.Helper()
	res := f.notify("finance", map[string]any{"channel": "telegram", "message": msg, "claim_thread": true, "claim_thread_label": "Finance"})
	if res.IsError {
		t.Fatalf("claim notify: %s", text(res))
	}
	for _, c := range f.tg.Calls("sendMessage") {
		if c.OK() && strings.Contains(c.Params["text"], msg) {
			return c
		}
	}
	t.Fatalf("no message %q sent", msg)
	return telegramtest.Call{}
}

// TestClaimThread: a notify with claim_thread shows [📎 Reply here] and
// [💬 Keep my chat]; the human's tap moves the chat's conversation to the
// claiming butler, across a switchboard restart; a plain reply to another
// offer moves it too, with the notice "[Switched to Finance thread]".
func TestClaimThread(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	health, finance := f.listen("health"), f.listen("finance")

	offer := claimOffer(t, f, "Your invoice is due.")
	if offer.ReplyMarkup == nil || len(offer.ReplyMarkup.InlineKeyboard) == 0 {
		t.Fatalf("no buttons under the claim offer: %+v", offer.ReplyMarkup)
	}
	var labels []string
	var claimData string
	for _, row := range offer.ReplyMarkup.InlineKeyboard {
		for _, b := range row {
			labels = append(labels, b.Text)
			if strings.HasPrefix(b.CallbackData, "claim:") {
				claimData = b.CallbackData
			}
		}
	}
	if strings.Join(labels, "|") != "📎 Reply here|💬 Keep my chat" || claimData == "" {
		t.Fatalf("buttons %v (%q)", labels, claimData)
	}

	// Before the tap, alice's chat goes to health (the default butler).
	f.tell(alice, "before the tap")
	health.Wait(butler.MethodChannel, 1)
	f.tg.PressButton(f.tg.Token(), alice.ID, offer.Message.MessageID, alice, claimData)
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, r := range f.audit("routed") {
			if r["reason"] == "thread_claimed" {
				return true
			}
		}
		return false
	}, "the claim")
	f.tell(alice, "after the tap")
	if got := finance.Wait(butler.MethodChannel, 1); got[0]["content"] != "after the tap" {
		t.Fatalf("finance got %v", got)
	}
	f.stop("switchboard")
	f.start("switchboard")
	f.tell(alice, "after a restart")
	if got := finance.Wait(butler.MethodChannel, 2); got[1]["content"] != "after a restart" {
		t.Fatalf("finance got %v", got)
	}
	if n := len(health.Notifications(butler.MethodChannel)); n != 1 {
		t.Fatalf("health got %d messages, want only the one before the tap", n)
	}
}

// TestClaimThreadByReply: replying to a claim offer, without a tap, moves the
// conversation and says so in the chat.
func TestClaimThreadByReply(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	finance := f.listen("finance")
	offer := claimOffer(t, f, "Shall I pay it?")
	_, _ = f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: alice.ID, Type: "private"}, From: &alice, Text: "yes please",
		ReplyToMessage: offer.Message})
	if got := finance.Wait(butler.MethodChannel, 1); got[0]["content"] != "yes please" {
		t.Fatalf("finance got %v", got)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return sentContaining(f, "[Switched to Finance thread]") == 1 }, "the switch notice")
	f.tell(alice, "and the next one")
	if got := finance.Wait(butler.MethodChannel, 2); got[1]["content"] != "and the next one" {
		t.Fatalf("finance got %v", got)
	}
}

// TestClaimByReplyBeforeTheSendIsConfirmed: alice replies to a claim offer
// at the moment Telegram took it, before Herald has Telegram's answer (the
// fake holds it for a second): her reply still moves the conversation.
func TestClaimByReplyBeforeTheSendIsConfirmed(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	health, finance := f.listen("health"), f.listen("finance")
	var once sync.Once
	f.tg.OnAccept("sendMessage", func(c telegramtest.Call) {
		if c.Message == nil || !strings.Contains(c.Params["text"], "Renew the lease?") {
			return
		}
		once.Do(func() {
			_, _ = f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: alice.ID, Type: "private"}, From: &alice, Text: "renew it",
				ReplyToMessage: c.Message})
			time.Sleep(time.Second)
		})
	})
	t.Cleanup(func() { f.tg.OnAccept("sendMessage", nil) })
	claimOffer(t, f, "Renew the lease?")
	if got := finance.Wait(butler.MethodChannel, 1); got[0]["content"] != "renew it" {
		t.Fatalf("finance got %v", got)
	}
	if n := health.Notifications(butler.MethodChannel); len(n) != 0 {
		t.Fatalf("the reply to finance's offer reached health: %v", n)
	}
}

// TestRefusedClaimLeavesNothingWaiting: a claim offer the switchboard
// refuses after it took it as on its way (its ack_within, which a butler's
// own check would have caught, is out of bounds) leaves nothing for replies
// in its chat to wait for.
func TestRefusedClaimLeavesNothingWaiting(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	n := envelope.NewNotify("finance", envelope.Delivery{Channel: "telegram", Message: "Renew?", ClaimThread: true, AckWithin: "10s"}, nil)
	resp, err := f.routeClient().Send(t.Context(), envelope.NewRoute(n))
	if err != nil || resp.Error == nil || resp.Error.Class != "validation_error" {
		t.Fatalf("answer %+v %v, want a validation_error", resp, err)
	}
	kv, err := f.js.KeyValue(t.Context(), bus.BucketSessions)
	if err != nil {
		t.Fatal(err)
	}
	key := "ackwait.tg_main." + f.cfg.Integration("tg_main").DefaultRecipient()
	if _, err := kv.Get(t.Context(), key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the refused offer is still taken as on its way in its chat (%s: %v)", key, err)
	}
}

// TestClaimThreadPerSession: two MCP sessions of one butler each claim a
// conversation (alice's chat, bob's chat); each session gets only its own
// conversation's messages, and once a session ends its conversation goes to
// the butler's other sessions.
func TestClaimThreadPerSession(t *testing.T) {
	f := newFleet(t)
	for i := range f.cfg.Integrations {
		if in := &f.cfg.Integrations[i]; in.ID == "tg_main" {
			in.Inbound.AllowFrom = append(in.Inbound.AllowFrom, fmt.Sprint(bob.ID))
		}
	}
	f.start("switchboard", "messenger")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(f.logs.String())
		}
	})
	one, url := f.listenAt("finance")
	two := butlertest.Connect(t, url, "2025-06-18", f.bearer())

	claimFor := func(c *butlertest.Client, who telegramtest.User, msg string) {
		t.Helper()
		if res := c.Call("notify", map[string]any{"channel": "telegram", "recipient": fmt.Sprint(who.ID), "message": msg, "claim_thread": true, "claim_thread_label": "Finance"}); res.IsError {
			t.Fatalf("claim notify: %s", text(res))
		}
		var offer telegramtest.Call
		for _, c := range f.tg.Calls("sendMessage") {
			if c.OK() && strings.Contains(c.Params["text"], msg) {
				offer = c
			}
		}
		_, _ = f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: who.ID, Type: "private"}, From: &who, Text: "re: " + msg, ReplyToMessage: offer.Message})
	}
	claimFor(one, alice, "Invoice 1 is due.")
	claimFor(two, bob, "Invoice 2 is due.")
	if got := one.Wait(butler.MethodChannel, 1); got[0]["content"] != "re: Invoice 1 is due." {
		t.Fatalf("session one got %v", got)
	}
	if got := two.Wait(butler.MethodChannel, 1); got[0]["content"] != "re: Invoice 2 is due." {
		t.Fatalf("session two got %v", got)
	}
	f.tell(alice, "alice again")
	f.tell(bob, "bob again")
	one.Wait(butler.MethodChannel, 2)
	two.Wait(butler.MethodChannel, 2)
	for name, c := range map[string]*butlertest.Client{"one": one, "two": two} {
		want := map[string]string{"one": "alice", "two": "bob"}[name]
		for _, n := range c.Notifications(butler.MethodChannel) {
			if !strings.Contains(fmt.Sprint(n["content"]), want) && !strings.Contains(fmt.Sprint(n["content"]), map[string]string{"one": "Invoice 1", "two": "Invoice 2"}[name]) {
				t.Errorf("session %s got another session's message: %v", name, n)
			}
			if _, ok := meta(n)["claim_session"]; ok {
				t.Errorf("the session tag reached the model: %v", meta(n))
			}
		}
	}

	// Session one ends: alice's conversation goes to session two.
	f.endSession(url, one.GetSessionId())
	f.tell(alice, "alice after one left")
	if got := two.Wait(butler.MethodChannel, 3); got[2]["content"] != "alice after one left" {
		t.Log(f.logs.String())
		t.Fatalf("session two got %v", got)
	}
}
