package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/testkit"
)

// TestReplyOnlyToRealMessages: notify with intent reply or react is accepted
// only for an inbound message routed to this butler, with its lineage as
// given; an invented request_context, another butler's message, or a real one
// with its thread changed is forbidden, and nothing is sent.
func TestReplyOnlyToRealMessages(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.mcp("health", "")
	real := f.given("health", "tg_main", "telegram", "tg_main", chatID, chatID+":77")
	finances := f.given("finance", "tg_main", "telegram", "tg_main", chatID, chatID+":78")
	with := func(rc map[string]any, k, v string) map[string]any {
		out := map[string]any{}
		for kk, vv := range rc {
			out[kk] = vv
		}
		out[k] = v
		return out
	}
	tests := []struct {
		name string
		args map[string]any
	}{
		{"invented request_context", map[string]any{"intent": "reply", "message": "hi", "request_context": with(real, "request_id", envelope.NewRequestID())}},
		{"another butler's message", map[string]any{"intent": "reply", "message": "hi", "request_context": finances}},
		{"a real message, threaded elsewhere", map[string]any{"intent": "reply", "message": "hi", "request_context": with(real, "source_thread_identity", "999:1")}},
		{"a real message, another sender", map[string]any{"intent": "react", "emoji": "👍", "request_context": with(real, "source_sender_identity", "999")}},
		{"a real message, through another integration", map[string]any{"intent": "reply", "channel": "email:mail", "message": "hi", "request_context": real}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callNotify(t, c, tt.args)
			if !res.IsError || !strings.Contains(text(res), "forbidden") {
				t.Fatalf("answer %q, want forbidden", text(res))
			}
		})
	}
	if n := len(f.tg.Calls("sendMessage")) + len(f.tg.Calls("setMessageReaction")) + len(f.smtp.Messages()); n != 0 {
		t.Fatalf("%d messages sent for refused replies", n)
	}
	// The real one, as given, goes.
	if res := callNotify(t, c, map[string]any{"intent": "reply", "message": "On it.", "request_context": real}); res.IsError {
		t.Fatalf("reply to a real message: %s", text(res))
	}
}

// TestSendOnlyToAllowedRecipients: a send to a recipient outside the
// integration's allow_to (by default: its default recipient, inbound
// allow_from and approvers) is forbidden and audited; allow_to widens it.
func TestSendOnlyToAllowedRecipients(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("mail").AllowTo = []string{"@example.com", "bob@partner.org"}
	f.start("switchboard", "messenger")
	for _, tt := range []struct {
		butler, channel, recipient string
		allowed                    bool
	}{
		{"health", "telegram", "", true},       // the default chat
		{"health", "telegram", chatID, true},   // allow_from
		{"health", "telegram", "66666", false}, // a stranger
		{"finance", "email", "Carol@Example.com", true},
		{"finance", "email", "bob@partner.org", true},
		{"finance", "email", "exfil@attacker.net", false},
	} {
		args := map[string]any{"channel": tt.channel, "message": "the owner's data"}
		if tt.recipient != "" {
			args["recipient"] = tt.recipient
		}
		res := f.notify(tt.butler, args)
		if got := !res.IsError; got != tt.allowed {
			t.Errorf("%s to %q: answer %q, want allowed=%v", tt.channel, tt.recipient, text(res), tt.allowed)
		}
		if !tt.allowed && !strings.Contains(text(res), "forbidden") {
			t.Errorf("%s to %q: answer %q, want forbidden", tt.channel, tt.recipient, text(res))
		}
	}
	for _, m := range f.smtp.Messages() {
		for _, to := range m.To {
			if strings.Contains(to, "attacker") {
				t.Fatalf("mail went to %s", to)
			}
		}
	}
	for _, c := range f.tg.Calls("sendMessage") {
		if c.Params["chat_id"] == "66666" {
			t.Fatal("a message went to a stranger's chat")
		}
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len(f.audit("rejected")) >= 2 }, "the refusals audited")
}

// TestReplyGoesOnlyToItsChat: a reply or reaction with a request_context
// rebuilt from what the model sees, and a recipient of its choosing, is
// forbidden and audited naming that recipient; nothing reaches it. The same
// reply naming the chat it answers, or no recipient, goes there.
func TestReplyGoesOnlyToItsChat(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.mcp("health", "")
	tg := f.given("health", "tg_main", "telegram", "tg_main", chatID, chatID+":77")
	mail := f.given("health", "mail", "email", "herald@example.com", "alice@example.com", "<m77@example.com>")
	tests := []struct {
		name, recipient string
		args            map[string]any
	}{
		{"telegram reply to a stranger's chat", "999999", map[string]any{"intent": "reply", "message": "psst", "request_context": tg}},
		{"telegram reaction in a stranger's chat", "999999", map[string]any{"intent": "react", "emoji": "👍", "request_context": tg}},
		{"email reply to another address", "evil@attacker.example", map[string]any{"intent": "reply", "message": "psst", "request_context": mail}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.args["recipient"] = tt.recipient
			res := callNotify(t, c, tt.args)
			if !res.IsError || !strings.Contains(text(res), "(forbidden)") || !strings.Contains(text(res), tt.recipient) {
				t.Fatalf("answer %q, want forbidden naming %s", text(res), tt.recipient)
			}
			testkit.Eventually(t, 5*time.Second, func() bool {
				for _, r := range f.audit("rejected") {
					if r["recipient"] == tt.recipient && r["intent"] == tt.args["intent"] {
						return true
					}
				}
				return false
			}, "the refusal audited with the recipient "+tt.recipient)
		})
	}
	for _, call := range append(f.tg.Calls("sendMessage"), f.tg.Calls("setMessageReaction")...) {
		if call.Params["chat_id"] == "999999" {
			t.Fatal("a reply went to a stranger's chat")
		}
	}
	for _, m := range f.smtp.Messages() {
		for _, to := range m.To {
			if strings.Contains(to, "attacker") {
				t.Fatalf("a reply went to %s", to)
			}
		}
	}
	// Its own chat, named or not, is where a reply goes.
	for _, recipient := range []string{chatID, ""} {
		args := map[string]any{"intent": "reply", "message": "answered in " + recipient, "request_context": tg}
		if recipient != "" {
			args["recipient"] = recipient
		}
		res := callNotify(t, c, args)
		if res.IsError {
			t.Fatalf("reply naming recipient %q: %s", recipient, text(res))
		}
	}
	if res := callNotify(t, c, map[string]any{"intent": "reply", "message": "to alice", "recipient": "Alice@Example.com", "request_context": mail}); res.IsError {
		t.Fatalf("mail reply to its sender: %s", text(res))
	}
}

// TestForbiddenRepeatIsForbidden: the same forbidden reply sent again, which
// JetStream drops as a duplicate of the first before the switchboard sees it,
// is answered forbidden again, never "queued" with a delivery_failed that
// would never come; and the refusal it leaves in the ledger does not keep a
// later copy the switchboard does route from going out.
func TestForbiddenRepeatIsForbidden(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.mcp("health", "")
	tg := f.given("health", "tg_main", "telegram", "tg_main", chatID, chatID+":77")
	args := map[string]any{"intent": "reply", "message": "psst", "recipient": "999999", "request_context": tg}
	for i := range 2 {
		res := callNotify(t, c, args)
		if !res.IsError || !strings.Contains(text(res), "(forbidden)") || !strings.Contains(text(res), "retrying will not help") {
			t.Fatalf("try %d: answer %q, want forbidden, saying a retry will not help", i+1, text(res))
		}
	}

	// A refusal on record, then a copy of that notify the switchboard routes.
	led, err := ledger.Open(t.Context(), f.js)
	if err != nil {
		t.Fatal(err)
	}
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram", Message: "allowed now"}, nil))
	if err := led.Refuse(t.Context(), "health", r.IdempotencyKey(), "", &envelope.ErrorBody{Class: "forbidden", Message: "not then"}); err != nil {
		t.Fatal(err)
	}
	resp, err := f.routeClient().Send(t.Context(), r)
	if err != nil || resp.Status != envelope.StatusOK {
		t.Fatalf("a routed copy of a notify refused before: %v %+v", err, resp)
	}
	sent := false
	for _, call := range f.tg.Calls("sendMessage") {
		sent = sent || strings.Contains(call.Params["text"], "allowed now")
	}
	if !sent {
		t.Fatal("the routed copy was answered from the refusal, not sent")
	}
}
