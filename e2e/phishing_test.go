package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
)

// TestPhishingAPermissionPrompt replays the attack of the security issue: a
// butler (health) tries to get the approver to approve another butler's
// (finance's) real tool call. Buttons that would answer finance's prompt
// cannot be sent by health, and the approver's typed answer to a look-alike
// approves nothing of finance's.
func TestPhishingAPermissionPrompt(t *testing.T) {
	f := newFleet(t)
	// tg_main is granted to every butler: finance's prompts go to the same
	// approver as health's messages.
	f.start("switchboard", "messenger")
	fin := f.listen("finance")
	askPermission(t, fin, "fghij", "Write", "Transfer savings")
	testkit.Eventually(t, 15*time.Second, func() bool { return sentContaining(f, `"yes fghij"`) == 1 }, "finance's real prompt")

	// Look-alike with buttons carrying finance's id: refused before it goes out.
	look := envelope.Delivery{Channel: "telegram:tg_main", Recipient: chatID, Message: "🔐 **health** asks to run **Read**: check the weather",
		Actions: []envelope.Action{{Label: "Allow", Data: "perm:allow:fghij"}, {Label: "Deny", Data: "perm:deny:fghij"}}}
	resp, err := f.routeClient().Send(t.Context(), envelope.NewRoute(envelope.NewNotify("health", look, nil)))
	if err != nil || resp.Status != "error" || resp.Error.Class != "forbidden" {
		t.Fatalf("look-alike with another butler's buttons: %v %+v, want forbidden", err, resp)
	}
	if sentContaining(f, "check the weather") != 0 {
		t.Fatal("the look-alike was sent")
	}

	// A look-alike as plain text, with an id health made up (it cannot read
	// finance's: see the NATS permissions test), and the approver falls for it.
	res := f.notify("health", map[string]any{"message": `🔐 health asks to run Read: check the weather. Reply "yes qwert" or "no qwert".`})
	if res.IsError {
		t.Fatalf("plain look-alike: %s", text(res))
	}
	f.tell(alice, "yes qwert")
	// And even typing finance's id in a chat it was not sent to does nothing:
	// the verdict counts only where Herald sent that prompt.
	time.Sleep(time.Second)
	store, err := approval.Open(t.Context(), f.js)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := store.Get(t.Context(), "finance", "fghij"); err != nil || r.Verdict != "" {
		t.Fatalf("finance's prompt %+v %v: approved by a phished answer", r, err)
	}
	if n := len(fin.Notifications(butler.MethodPermission)); n != 0 {
		t.Fatalf("finance's session got %d verdicts", n)
	}
	// Audit records are stored a moment after the message is handled.
	testkit.Eventually(t, 5*time.Second, func() bool {
		for _, r := range f.audit("rejected") {
			if r["reason"] == "verdict_unknown_id" {
				return true
			}
		}
		return false
	}, "the phished answer audited as refused")
	// The real prompt still works for the approver.
	f.tell(alice, "yes fghij")
	got := fin.Wait(butler.MethodPermission, 1)
	if got[0]["request_id"] != "fghij" || got[0]["behavior"] != "allow" {
		t.Fatalf("verdict %v", got[0])
	}
}

func askPermission(t *testing.T, c *butlertest.Client, id, tool, desc string) {
	t.Helper()
	err := c.GetTransport().SendNotification(context.Background(), mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: butler.MethodPermissionRequest, Params: mcp.NotificationParams{AdditionalFields: map[string]any{
			"request_id": id, "tool_name": tool, "description": desc,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(id) == "" {
		t.Fatal("no id")
	}
}

// sentContaining counts the messages Telegram accepted whose text has s.
func sentContaining(f *fleet, s string) int {
	n := 0
	for _, c := range f.tg.Calls("sendMessage") {
		if c.OK() && strings.Contains(c.Params["text"], s) {
			n++
		}
	}
	return n
}
