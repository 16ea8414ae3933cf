package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/smtp"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/herald"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

var alice = telegramtest.User{ID: 12345, FirstName: "Alice", Username: "alice"}

// tell sends a Telegram message from a person to the bot, as Telegram would
// deliver it, and returns the message.
func (f *fleet) tell(from telegramtest.User, text string) telegramtest.Message {
	f.t.Helper()
	_, m := f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: from.ID, Type: "private"}, From: &from, Text: text})
	return m
}

// TestTelegramRoundTrip: a message from an allowlisted person reaches the
// bound butler's model as a channel notification; the model's reply lands in
// the same chat as a reply to it, and its reaction on it.
func TestTelegramRoundTrip(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	list := text(c.Call("channel_list", nil))
	for _, want := range []string{"telegram:tg_main (default), receives messages for you", "web:web, receives messages for you", "email:mail"} {
		if !strings.Contains(list, want) {
			t.Fatalf("channel_list does not say %q:\n%s", want, list)
		}
	}
	if strings.Contains(list, "email:mail, receives") {
		t.Fatalf("mail is bound to finance, not health:\n%s", list)
	}

	sent := f.tell(alice, "Did I take my pills today?")
	n := c.Wait(butler.MethodChannel, 1)[0]
	m := meta(n)
	if n["content"] != "Did I take my pills today?" || m["source_channel"] != "telegram" || m["chat_id"] != chatID || m["user"] != "alice" ||
		m["message_id"] != strconv.FormatInt(sent.MessageID, 10) || m["user_id"] != chatID || m["thread"] == "" {
		t.Fatalf("notification %v", n)
	}
	id, _ := m["request_id"].(string)

	res := c.Call("reply", map[string]any{"request_id": id, "message": "Yes, at **8:00**."})
	if res.IsError {
		t.Fatalf("reply: %v", text(res))
	}
	replies := f.tg.WaitCalls(t, "sendMessage", 1, 10*time.Second)
	r := replies[len(replies)-1]
	if r.Params["chat_id"] != chatID || r.ReplyParameters == nil || r.ReplyParameters.MessageID != sent.MessageID || r.Params["text"] != "Yes, at <b>8:00</b>." {
		t.Fatalf("reply went to chat %s replying to %+v with %q", r.Params["chat_id"], r.ReplyParameters, r.Params["text"])
	}

	if res := c.Call("react", map[string]any{"request_id": id, "emoji": "👍"}); res.IsError {
		t.Fatalf("react: %v", text(res))
	}
	react := f.tg.WaitCalls(t, "setMessageReaction", 1, 10*time.Second)[0]
	if react.Params["chat_id"] != chatID || react.Params["message_id"] != strconv.FormatInt(sent.MessageID, 10) || react.Reaction[0].Emoji != "👍" {
		t.Fatalf("reaction %+v", react)
	}

	// The model cannot aim reply at a chat it was not written from.
	if res := c.Call("reply", map[string]any{"request_id": envelope.NewRequestID(), "message": "spam"}); !res.IsError {
		t.Fatal("reply to a request_id the butler never received was sent")
	}
}

// TestWaitingMessagesArriveInOrder: what people send while no model is
// connected waits, and arrives in order when one connects.
func TestWaitingMessagesArriveInOrder(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	for i := range 5 {
		f.tell(alice, fmt.Sprintf("note %d", i))
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return len(f.audit("routed")) >= 5 }, "the notes to be routed")
	c := f.listen("health")
	got := c.Wait(butler.MethodChannel, 5)
	for i, n := range got {
		if n["content"] != fmt.Sprintf("note %d", i) {
			t.Fatalf("notification %d is %q", i, n["content"])
		}
	}
}

// TestEmailRoundTrip: a mail reaches the bound butler; its reply threads.
func TestEmailRoundTrip(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("finance")
	addr := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`).FindString(f.statusDetail("mail"))
	mail := "Authentication-Results: mx.example.com; dmarc=pass header.from=example.com\r\nFrom: Alice <alice@example.com>\r\nTo: herald@example.com\r\nSubject: Invoice 42\r\nMessage-ID: <q1@mail.example.com>\r\nDate: Sun, 22 Nov 2026 10:00:00 +0000\r\n\r\nPlease pay invoice 42 today.\r\n"
	if err := smtp.SendMail(addr, nil, "alice@example.com", []string{"herald@example.com"}, []byte(mail)); err != nil {
		t.Fatal(err)
	}
	n := c.Wait(butler.MethodChannel, 1)[0]
	if !strings.Contains(n["content"].(string), "Please pay invoice 42") || meta(n)["source_channel"] != "email" || meta(n)["subject"] != "Invoice 42" {
		t.Fatalf("notification %v", n)
	}
	res := c.Call("reply", map[string]any{"request_id": meta(n)["request_id"], "message": "Paid."})
	if res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	out := f.smtp.WaitMessages(t, 1, 10*time.Second)[0]
	if out.To[0] != "alice@example.com" || out.Header.Get("In-Reply-To") != "<q1@mail.example.com>" || !strings.Contains(out.Header.Get("References"), "<q1@mail.example.com>") {
		t.Fatalf("reply to %v In-Reply-To %q References %q", out.To, out.Header.Get("In-Reply-To"), out.Header.Get("References"))
	}
	if got := out.Subject(); got != "[finance] Re: Invoice 42" {
		t.Fatalf("reply subject %q", got)
	}
}

// TestAutoReplyIsDropped: an auto-reply never reaches a butler, and the drop
// is audited, so two robots cannot talk forever.
func TestAutoReplyIsDropped(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("finance")
	addr := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`).FindString(f.statusDetail("mail"))
	auto := "From: alice@example.com\r\nTo: herald@example.com\r\nSubject: Out of office\r\nMessage-ID: <ooo@mail.example.com>\r\nAuto-Submitted: auto-replied\r\n\r\nI am away.\r\n"
	human := "Authentication-Results: mx.example.com; dmarc=pass header.from=example.com\r\nFrom: alice@example.com\r\nTo: herald@example.com\r\nSubject: Back\r\nMessage-ID: <back@mail.example.com>\r\n\r\nI am back.\r\n"
	for _, m := range []string{auto, human} {
		if err := smtp.SendMail(addr, nil, "alice@example.com", []string{"herald@example.com"}, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	got := c.Wait(butler.MethodChannel, 1)
	if strings.Contains(got[0]["content"].(string), "away") {
		t.Fatal("the auto-reply reached the butler")
	}
	testkit.Eventually(t, 5*time.Second, func() bool {
		for _, r := range f.audit("dropped") {
			if r["reason"] == "auto_submitted" {
				return true
			}
		}
		return false
	}, "the audit record of the dropped auto-reply")
}

// TestStrangerPairs: an unknown person gets a pairing code and nothing
// reaches a butler; once the operator approves the code, they get through.
func TestStrangerPairs(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	bob := telegramtest.User{ID: 777, FirstName: "Bob"}
	f.tell(bob, "hello, who is this?")
	var code string
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, call := range f.tg.Calls("sendMessage") {
			if call.Params["chat_id"] == "777" {
				code = regexp.MustCompile(`pair approve ([A-Za-z0-9]+)`).FindStringSubmatch(call.Params["text"])[1]
				return true
			}
		}
		return false
	}, "a pairing code sent to the stranger")

	// The operator's command, against this fleet's NATS.
	cfgFile := filepath.Join(t.TempDir(), "herald.yaml")
	if err := os.WriteFile(cfgFile, []byte("nats: { url: "+f.bus.URL()+" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := herald.Main(context.Background(), []string{"pair", "approve", "--config", cfgFile, code}, herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &out}); code != 0 {
		t.Fatalf("herald pair approve: %s", out.String())
	}
	f.tell(bob, "it's Bob")
	n := c.Wait(butler.MethodChannel, 1)
	if len(n) != 1 || n[0]["content"] != "it's Bob" {
		t.Fatalf("after pairing the butler got %v; before it, nothing may arrive", n)
	}
}

// TestSwitchboardRestartKeepsTheThread: a chat stays on its session across a
// switchboard restart.
func TestSwitchboardRestartKeepsTheThread(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	f.tell(alice, "before")
	before := meta(c.Wait(butler.MethodChannel, 1)[0])["thread"]
	f.stop("switchboard")
	f.start("switchboard")
	f.tell(alice, "after")
	after := meta(c.Wait(butler.MethodChannel, 2)[1])["thread"]
	if before == nil || before != after {
		t.Fatalf("thread before %v, after the restart %v", before, after)
	}
}

// TestConflictShowsInChannelStatus: someone else polling the bot (409) is
// visible to the model, not a silently deaf bot.
func TestConflictShowsInChannelStatus(t *testing.T) {
	f := newFleet(t)
	f.tg.FailNext("getUpdates", 1000, 409, telegramtest.ConflictDescription, 0)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	testkit.Eventually(t, 20*time.Second, func() bool {
		return strings.Contains(text(c.Call("channel_status", nil)), "telegram:tg_main: conflict")
	}, "channel_status to show the conflict")
}

// TestPermissionRelay: the model's request to run a tool goes to the approver
// with buttons; the approver's "yes" comes back to the session that asked as
// an allow verdict, and nothing else changes anything.
func TestPermissionRelay(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	ask := func(id string) {
		t.Helper()
		err := c.GetTransport().SendNotification(context.Background(), mcp.JSONRPCNotification{
			JSONRPC: mcp.JSONRPC_VERSION,
			Notification: mcp.Notification{Method: butler.MethodPermissionRequest, Params: mcp.NotificationParams{AdditionalFields: map[string]any{
				"request_id": id, "tool_name": "Bash", "description": "Delete build outputs", "input_preview": "rm -rf ./bin",
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	verdicts := func() []map[string]any { return c.Notifications(butler.MethodPermission) }

	ask("abcde")
	var prompt telegramtest.Call
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, call := range f.tg.Calls("sendMessage") {
			if strings.Contains(call.Params["text"], `Reply "yes abcde" or "no abcde"`) {
				prompt = call
				return true
			}
		}
		return false
	}, "the permission prompt")
	if prompt.Params["chat_id"] != chatID || prompt.ReplyMarkup == nil || len(prompt.ReplyMarkup.InlineKeyboard) == 0 {
		t.Fatalf("prompt to %s with markup %+v, want the approver's chat with Allow / Deny buttons", prompt.Params["chat_id"], prompt.ReplyMarkup)
	}

	// A stranger's "yes" changes nothing.
	f.tell(telegramtest.User{ID: 555, FirstName: "Mallory"}, "yes abcde")
	f.tell(alice, "yes abcde")
	got := c.Wait(butler.MethodPermission, 1)
	if got[0]["request_id"] != "abcde" || got[0]["behavior"] != "allow" {
		t.Fatalf("verdict %v", got[0])
	}
	// Used once: the same answer again, and an unknown id, change nothing.
	f.tell(alice, "no abcde")
	f.tell(alice, "yes zzzzz")
	// A button works like a typed answer.
	ask("qwert")
	var promptID int64
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, call := range f.tg.Calls("sendMessage") {
			if strings.Contains(call.Params["text"], `"yes qwert"`) && call.Message != nil {
				promptID = call.Message.MessageID
				return true
			}
		}
		return false
	}, "the second prompt")
	f.tg.PressButton(f.tg.Token(), alice.ID, promptID, alice, "perm:deny:qwert")
	got = c.Wait(butler.MethodPermission, 2)
	if len(verdicts()) != 2 || got[1]["request_id"] != "qwert" || got[1]["behavior"] != "deny" {
		t.Fatalf("verdicts %v", verdicts())
	}
	// Verdicts are not chat.
	for _, n := range c.Notifications(butler.MethodChannel) {
		if strings.Contains(n["content"].(string), "abcde") || strings.Contains(n["content"].(string), "qwert") {
			t.Fatalf("a verdict was forwarded as chat: %v", n)
		}
	}
	// Expired prompts change nothing: checked in pkg/approval and the switchboard.
}
