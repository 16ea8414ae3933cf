package e2e

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
)

var deliveryIDRE = regexp.MustCompile(`dlv_[0-9a-f]+`)

// TestEdit: the model turns its "working on it…" reply into the answer:
// the same Telegram message is edited, audited edited. Another butler's
// message, a message on a channel that cannot edit, and an unknown
// delivery_id are refused with a sentence, and nothing is edited.
func TestEdit(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	f.tell(alice, "What is on my calendar?")
	id := meta(c.Wait(butler.MethodChannel, 1)[0])["request_id"]
	res := c.Call("reply", map[string]any{"request_id": id, "message": "Working on it…"})
	dlv := deliveryIDRE.FindString(text(res))
	if res.IsError || dlv == "" {
		t.Fatalf("reply: %s", text(res))
	}
	sent := f.tg.WaitCalls(t, "sendMessage", 1, 10*time.Second)[0]

	res = c.Call("edit", map[string]any{"delivery_id": dlv, "message": "Dentist at **15:00**."})
	if res.IsError || !strings.Contains(text(res), "Edited your message "+dlv) {
		t.Fatalf("edit: %s", text(res))
	}
	e := f.tg.WaitCalls(t, "editMessageText", 1, 10*time.Second)[0]
	if e.Params["chat_id"] != chatID || e.Params["message_id"] != strconv.FormatInt(sent.Message.MessageID, 10) || e.Params["text"] != "Dentist at <b>15:00</b>." {
		t.Errorf("editMessageText %v, want chat %s message %s with the new text", e.Params, chatID, strconv.FormatInt(sent.Message.MessageID, 10))
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(f.audit(audit.Edited)) == 1 }, "the edit audited as edited")

	// Another butler cannot name it; a mail cannot be edited; nor can what
	// was never sent.
	other := f.listen("finance")
	if res := other.Call("edit", map[string]any{"delivery_id": dlv, "message": "mine now"}); !res.IsError || !strings.Contains(text(res), "not one of your messages") {
		t.Errorf("another butler's edit: %s", text(res))
	}
	mail := c.Call("notify", map[string]any{"channel": "email", "message": "Your invoice"})
	if m := deliveryIDRE.FindString(text(mail)); m != "" {
		if res := c.Call("edit", map[string]any{"delivery_id": m, "message": "changed"}); !res.IsError || !strings.Contains(text(res), "channel that can edit") {
			t.Errorf("edit of a mail: %s", text(res))
		}
	} else {
		t.Fatalf("notify by mail: %s", text(mail))
	}
	// Nor by a route of its own naming health's delivery: the switchboard
	// reads the delivery under the sender's name.
	var key string
	for _, r := range f.audit(audit.Routed) {
		if r["butler"] == "health" && r["intent"] == "reply" {
			key, _ = r["idempotency_key"].(string)
		}
	}
	if key == "" {
		t.Fatal("no routed record of the reply")
	}
	forged := envelope.NewRoute(envelope.NewNotify("finance", envelope.Delivery{Intent: envelope.IntentEdit, Channel: "telegram:tg_main", Message: "mine now", EditOf: key}, nil))
	b, _ := json.Marshal(forged)
	if resp := f.publishRaw("finance", forged.RequestContext.RequestID, b); resp.Status != envelope.StatusError || resp.Error == nil || resp.Error.Class != envelope.ErrNotFound.Error() {
		t.Errorf("finance's route editing health's delivery answered %+v", resp)
	}
	if res := c.Call("edit", map[string]any{"delivery_id": "dlv_0000", "message": "x"}); !res.IsError || !strings.Contains(text(res), "(not_found)") {
		t.Errorf("edit of an unknown delivery: %s", text(res))
	}
	time.Sleep(time.Second)
	if n := len(f.tg.Calls("editMessageText")); n != 1 {
		t.Errorf("%d edits, want the one", n)
	}
}
