package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// TestContext: a message that answers another carries what that one said
// and who wrote it (the bot's own reply, a person's long message cut to
// 500 characters); history gives the conversation both ways, oldest
// first, by a request_id or by channel and chat, and refuses a chat the
// butler never talked in.
func TestContext(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")

	f.tell(alice, "Did I take my pills today?")
	first := meta(c.Wait(butler.MethodChannel, 1)[0])
	if res := c.Call("reply", map[string]any{"request_id": first["request_id"], "message": "Yes, at **8:00**."}); res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	bot := f.tg.WaitCalls(t, "sendMessage", 1, 10*time.Second)[0]
	botMsg := f.tg.Messages(alice.ID)
	var botID int64
	for _, m := range botMsg {
		if m.From != nil && m.From.IsBot {
			botID = m.MessageID
		}
	}
	if botID == 0 {
		t.Fatalf("the bot's reply is not in the chat: %+v (call %v)", botMsg, bot.Params)
	}

	// "What does this mean?", answering the bot's reply.
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: alice.ID, Type: "private"}, From: &alice,
		Text: "What does this mean?", ReplyToMessage: &telegramtest.Message{MessageID: botID}})
	second := meta(c.Wait(butler.MethodChannel, 2)[1])
	if second["reply_to_text"] != "Yes, at 8:00." || second["reply_to_from"] == nil || second["reply_to_from"] == "" {
		t.Errorf("a reply to the bot's message: meta %v, want reply_to_text %q and reply_to_from", second, "Yes, at 8:00.")
	}

	// A long message answered: its first 500 characters.
	long := strings.Repeat("pills ", 120)
	longMsg := f.tell(alice, long)
	c.Wait(butler.MethodChannel, 3)
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: alice.ID, Type: "private"}, From: &alice,
		Text: "and this?", ReplyToMessage: &telegramtest.Message{MessageID: longMsg.MessageID}})
	fourth := meta(c.Wait(butler.MethodChannel, 4)[3])
	q, _ := fourth["reply_to_text"].(string)
	if utf8.RuneCountInString(q) != 500 || !strings.HasSuffix(q, "…") || fourth["reply_to_from"] != "alice" {
		t.Errorf("a reply to a long message: reply_to_text of %d characters (%.40q…), from %v; want 500 ending in …, from alice", utf8.RuneCountInString(q), q, fourth["reply_to_from"])
	}

	h := c.Call("history", map[string]any{"request_id": second["request_id"]})
	got := text(h)
	i1, i2, i3 := strings.Index(got, "Did I take my pills today?"), strings.Index(got, "Yes, at **8:00**."), strings.Index(got, "What does this mean?")
	if h.IsError || i1 < 0 || i2 < i1 || i3 < i2 || !strings.Contains(got, "you (dlv_") {
		t.Fatalf("history by request_id, want both ways oldest first, the reply with its delivery_id:\n%s", got)
	}
	if byChat := text(c.Call("history", map[string]any{"channel": "telegram", "chat": chatID, "limit": 2})); !strings.Contains(byChat, "2 message(s)") || !strings.Contains(byChat, "and this?") || strings.Contains(byChat, "Did I take") {
		t.Errorf("history by channel and chat, limit 2, want the last two:\n%s", byChat)
	}
	if res := c.Call("history", map[string]any{"channel": "telegram", "chat": "999"}); !res.IsError || !strings.Contains(text(res), "no conversation") {
		t.Errorf("history of a chat the butler never talked in: %s", text(res))
	}
}

// TestContextFromHerald: where the provider does not say what an answered
// message said (the web chat, Slack), the butler fills reply_to_text and
// reply_to_from from the conversation it keeps: a visitor's button press
// under the butler's reply carries the reply's words.
func TestContextFromHerald(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	page := strings.TrimSuffix(f.statusDetail("web"), "/")
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if resp, err := browser.Get(page + "/"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	post := func(p map[string]string) {
		t.Helper()
		b, _ := json.Marshal(p)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, page+"/api/messages", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Herald", "1")
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("post %v: %s", p, resp.Status)
		}
	}

	post(map[string]string{"client_id": "9b2f6a0e-1c3d-4e5f-8a9b-0c1d2e3f4a5b", "text": "Shall I water the plants?"})
	first := meta(c.Wait(butler.MethodChannel, 1)[0])
	res := c.Call("reply", map[string]any{"request_id": first["request_id"], "message": "Only the **ferns**, today."})
	if res.IsError {
		t.Fatalf("reply: %s", text(res))
	}
	var answer struct {
		Delivery struct {
			MessageIDs []string `json:"message_ids"`
		} `json:"delivery"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &answer); err != nil || len(answer.Delivery.MessageIDs) != 1 {
		t.Fatalf("the reply's answer names no message: %s", b)
	}

	// The visitor answers the butler's message (as a button press under it does).
	post(map[string]string{"client_id": "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f", "text": "Which ones are those?", "reply_to": answer.Delivery.MessageIDs[0]})
	second := meta(c.Wait(butler.MethodChannel, 2)[1])
	if second["reply_to_message_id"] != answer.Delivery.MessageIDs[0] || second["reply_to_text"] != "Only the **ferns**, today." || second["reply_to_from"] != "you" {
		t.Errorf("an answer to the butler's web message: meta %v, want reply_to_text %q from you", second, "Only the **ferns**, today.")
	}
}
