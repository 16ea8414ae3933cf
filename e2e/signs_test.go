package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
)

// TestSignsOfLife: a message that reaches a session gets the integration's
// ack reaction and "typing…" in its chat, renewed while the model works,
// and no more once it replied; a message that reached no session gets
// neither.
func TestSignsOfLife(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("tg_main").AckReaction = "👀"
	f.start("switchboard", "messenger")

	// No session yet: the message waits in the inbox, and nobody is shown
	// working on it.
	waiting := f.tell(alice, "Anyone there?")
	time.Sleep(3 * time.Second)
	if got := f.tg.Calls("sendChatAction"); len(got) != 0 {
		t.Fatalf("typing shown for a message no session has: %v", got)
	}
	if got := f.tg.Calls("setMessageReaction"); len(got) != 0 {
		t.Fatalf("ack reaction put on a message no session has: %v", got)
	}

	c := f.listen("health")
	n := c.Wait(butler.MethodChannel, 1)[0]
	id, _ := meta(n)["request_id"].(string)
	react := f.tg.WaitCalls(t, "setMessageReaction", 1, 10*time.Second)[0]
	if react.Params["chat_id"] != chatID || react.Params["message_id"] != strconv.FormatInt(waiting.MessageID, 10) || len(react.Reaction) != 1 || react.Reaction[0].Emoji != "👀" {
		t.Errorf("ack reaction %+v, want 👀 on message %d", react, waiting.MessageID)
	}
	// Renewed while the model works (every 4 s).
	typing := f.tg.WaitCalls(t, "sendChatAction", 2, 15*time.Second)
	for _, c := range typing {
		if c.Params["chat_id"] != chatID || c.Params["action"] != "typing" {
			t.Fatalf("sendChatAction %v, want typing in chat %s", c.Params, chatID)
		}
	}

	if res := c.Call("reply", map[string]any{"request_id": id, "message": "Here."}); res.IsError {
		t.Fatalf("reply: %v", text(res))
	}
	f.tg.WaitCalls(t, "sendMessage", 1, 10*time.Second)
	after := len(f.tg.Calls("sendChatAction"))
	time.Sleep(6 * time.Second)
	if got := len(f.tg.Calls("sendChatAction")); got != after {
		t.Errorf("typing shown %d more times after the reply", got-after)
	}
	testkit.Eventually(t, time.Second, func() bool { return len(f.tg.Calls("setMessageReaction")) == 1 }, "one ack reaction only")
}
