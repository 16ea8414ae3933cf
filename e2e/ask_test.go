package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/smtp"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/email/smtptest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

var questionIDRE = regexp.MustCompile(`question_id (q[a-km-z]{9})`)

// TestAsk: the ask tool puts a question with options to the human as
// buttons; a tap within wait comes back as the call's answer (and not again
// as a channel message); without options and with wait 0 the call returns
// the question_id at once, and a reply to the question arrives later as a
// channel notification with kind=answer. Every copy shows the answer; a
// second answer is refused and its sender told; bad arguments are
// validation errors naming the field.
func TestAsk(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "ask"
		req.Params.Arguments = map[string]any{"question": "Deploy **now**?", "options": []any{"Yes", "Not yet"}, "wait": 20, "channel": "telegram"}
		res, err := c.CallTool(context.Background(), req)
		if err != nil {
			res = mcp.NewToolResultError(err.Error())
		}
		done <- res
	}()
	var asked telegramtest.Message
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, m := range f.tg.Messages(alice.ID) {
			if strings.Contains(m.Text, "Deploy now?") && m.ReplyMarkup != nil {
				asked = m
				return true
			}
		}
		return false
	}, "the question with its buttons in alice's chat")
	data := fmt.Sprint(asked.ReplyMarkup)
	qid := regexp.MustCompile(`ask:(q[a-km-z]{9}):1`).FindStringSubmatch(data)
	if qid == nil || !strings.Contains(data, "Not yet") || !strings.Contains(asked.Text, "1. Yes") {
		t.Fatalf("question %q with buttons %s: want Yes and Not yet, numbered too", asked.Text, data)
	}
	f.tg.PressButton(f.tg.Token(), alice.ID, asked.MessageID, alice, "ask:"+qid[1]+":1")
	var res *mcp.CallToolResult
	select {
	case res = <-done:
	case <-time.After(25 * time.Second):
		t.Fatal("the ask call did not return")
	}
	if res.IsError || !strings.Contains(text(res), "Yes") || !strings.Contains(text(res), qid[1]) {
		t.Fatalf("ask answered %q (isError %v), want Yes for %s", text(res), res.IsError, qid[1])
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return f.copyShows(alice.ID, asked.MessageID, "✅ Yes") }, "the question to show its answer, buttons gone")
	// Its buttons are gone; a reply to it comes too late.
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: alice.ID, Type: "private"}, From: &alice, Text: "2", ReplyToMessage: &asked})
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, m := range f.tg.Messages(alice.ID) {
			if strings.Contains(m.Text, "Herald: question "+qid[1]+" was answered already") {
				return true
			}
		}
		return false
	}, "a second answer refused, its sender told")

	// Free text, answered later: a channel message.
	res = c.Call("ask", map[string]any{"question": "When shall I deploy?", "channel": "telegram"})
	later := questionIDRE.FindStringSubmatch(text(res))
	if res.IsError || later == nil {
		t.Fatalf("ask with wait 0: %q", text(res))
	}
	var q2 telegramtest.Message
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, m := range f.tg.Messages(alice.ID) {
			if strings.Contains(m.Text, "When shall I deploy?") {
				q2 = m
				return true
			}
		}
		return false
	}, "the free-text question in alice's chat")
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: alice.ID, Type: "private"}, From: &alice, Text: "Tomorrow at 9", ReplyToMessage: &q2})
	got := c.Wait(butler.MethodChannel, 1)
	m := meta(got[0])
	if got[0]["content"] != "Tomorrow at 9" || m["kind"] != "answer" || m["question_id"] != later[1] || m["answer"] != "Tomorrow at 9" || !strings.Contains(fmt.Sprint(m["answered_by"]), "12345") {
		t.Fatalf("the later answer arrived as %v", got[0])
	}
	for _, n := range c.Notifications(butler.MethodChannel) {
		if meta(n)["question_id"] == qid[1] {
			t.Fatalf("the answer the ask call returned came again as a channel message: %v", n)
		}
	}

	for _, tt := range []struct {
		args  map[string]any
		field string
	}{
		{map[string]any{"question": "?", "options": []any{"1", "2", "3", "4", "5", "6", "7", "8", "9"}}, "/options"},
		{map[string]any{"question": "?", "wait": 60}, "/wait"},
		{map[string]any{"question": " "}, "/question"},
	} {
		res := c.Call("ask", tt.args)
		if !res.IsError || !strings.Contains(text(res), "validation_error") || !strings.Contains(text(res), tt.field) {
			t.Errorf("ask %v: %q, want a validation_error naming %s", tt.args, text(res), tt.field)
		}
	}
}

// TestAskByEmail: a question mailed to its human is answered by a reply
// mail with the option's number; the answer arrives on the model's session
// after the call's wait ran out.
func TestAskByEmail(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("finance")
	res := c.Call("ask", map[string]any{"question": "Pay invoice 42?", "options": []any{"Pay", "Hold"}, "wait": 1, "channel": "email", "recipient": "alice@example.com"})
	qid := questionIDRE.FindStringSubmatch(text(res))
	if res.IsError || qid == nil || !strings.Contains(text(res), "Asked") {
		t.Fatalf("ask with nobody answering within its wait: %q", text(res))
	}
	out := f.smtp.WaitMessages(t, 1, 10*time.Second)[0]
	if body := string(out.Data); !strings.Contains(body, "1. Pay") || !strings.Contains(body, "2. Hold") {
		t.Fatalf("the question mail lists no numbered options:\n%s", body)
	}
	addr := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`).FindString(f.statusDetail("mail"))
	reply := "Authentication-Results: mx.example.com; dmarc=pass header.from=example.com\r\nFrom: Alice <alice@example.com>\r\nTo: herald@example.com\r\n" +
		"Subject: Re: " + out.Subject() + "\r\nMessage-ID: <a1@mail.example.com>\r\nIn-Reply-To: " + out.Header.Get("Message-ID") + "\r\nDate: Thu, 26 Nov 2026 10:00:00 +0000\r\n\r\n2\r\n\r\n> Pay invoice 42?\r\n"
	if err := smtp.SendMail(addr, nil, "alice@example.com", []string{"herald@example.com"}, []byte(reply)); err != nil {
		t.Fatal(err)
	}
	n := c.Wait(butler.MethodChannel, 1)[0]
	if m := meta(n); m["kind"] != "answer" || m["question_id"] != qid[1] || m["answer"] != "Hold" {
		t.Fatalf("the mailed answer arrived as %v", n)
	}
}

// TestAskAnsweredBeforeTheServerConfirms: a reply to a mailed question that
// comes before the mail server has confirmed the question (it holds its 250
// for a second, so Herald does not know yet which mail the question is)
// still answers it, and is not passed on as plain chat.
func TestAskAnsweredBeforeTheServerConfirms(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("finance")
	addr := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`).FindString(f.statusDetail("mail"))
	replied := make(chan error, 1)
	var once sync.Once
	f.smtp.OnAccept(func(m smtptest.Message) {
		once.Do(func() {
			reply := "Authentication-Results: mx.example.com; dmarc=pass header.from=example.com\r\nFrom: Alice <alice@example.com>\r\nTo: herald@example.com\r\n" +
				"Subject: Re: " + m.Subject() + "\r\nMessage-ID: <a2@mail.example.com>\r\nIn-Reply-To: " + m.Header.Get("Message-ID") + "\r\nDate: Thu, 26 Nov 2026 10:00:00 +0000\r\n\r\n1\r\n"
			replied <- smtp.SendMail(addr, nil, "alice@example.com", []string{"herald@example.com"}, []byte(reply))
			time.Sleep(time.Second)
		})
	})
	t.Cleanup(func() { f.smtp.OnAccept(nil) })
	res := c.Call("ask", map[string]any{"question": "Renew the domain?", "options": []any{"Renew", "Let it lapse"}, "channel": "email", "recipient": "alice@example.com"})
	qid := questionIDRE.FindStringSubmatch(text(res))
	if res.IsError || qid == nil {
		t.Fatalf("ask: %q", text(res))
	}
	if err := <-replied; err != nil {
		t.Fatal(err)
	}
	n := c.Wait(butler.MethodChannel, 1)[0]
	if m := meta(n); m["kind"] != "answer" || m["question_id"] != qid[1] || m["answer"] != "Renew" {
		t.Fatalf("the early answer arrived as %v", n)
	}
}

// TestAskAnswerOnceAcrossARestart: an answer the ask call returned is not
// given to the model again by the butler started anew. The butler runs as a
// process; its client reads no channel notifications, so the answer's inbox
// message waits in the stream. The ask call returns the answer, the butler
// is killed (SIGKILL) and started again, and the inbox tool of a new session
// returns the answer of a question asked without waiting (it came only as a
// message), never the one the call returned.
func TestAskAnswerOnceAcrossARestart(t *testing.T) {
	if _, err := serviceBins(); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	mcpAddr := testkit.FreeAddr(t)
	env, _ := f.startProcesses(mcpAddr, fmt.Sprintf("    inbound: { allow_from: [%q] }\n", fmt.Sprint(alice.ID)))
	url := "http://" + mcpAddr + "/mcp"
	bp := f.butlerProc
	c := f.connect(url, "")

	question := func(text string) (telegramtest.Message, string) {
		t.Helper()
		m := f.withButtons(text)
		id := regexp.MustCompile(`ask:(q[a-km-z]{9}):1`).FindStringSubmatch(fmt.Sprint(m.ReplyMarkup))
		if id == nil {
			t.Fatalf("question %q carries no answer buttons: %v", m.Text, m.ReplyMarkup)
		}
		return m, id[1]
	}

	// Asked without waiting, answered: its answer comes only as a message.
	if res := call(t, c, "ask", map[string]any{"question": "Rotate the keys?", "options": []any{"Rotate now", "Leave them"}, "channel": "telegram"}); res.IsError {
		t.Fatalf("ask: %s", text(res))
	}
	later, laterID := question("Rotate the keys?")
	f.tg.PressButton(f.tg.Token(), alice.ID, later.MessageID, alice, "ask:"+laterID+":1")

	// Asked with a wait: the call returns the answer.
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "ask"
		req.Params.Arguments = map[string]any{"question": "Restart the database?", "options": []any{"Restart now", "Wait"}, "wait": 20, "channel": "telegram"}
		res, err := c.CallTool(context.Background(), req)
		if err != nil {
			res = mcp.NewToolResultError(err.Error())
		}
		done <- res
	}()
	asked, askedID := question("Restart the database?")
	f.tg.PressButton(f.tg.Token(), alice.ID, asked.MessageID, alice, "ask:"+askedID+":1")
	select {
	case res := <-done:
		if res.IsError || !strings.Contains(text(res), "Answered by") || !strings.Contains(text(res), askedID) {
			t.Fatalf("ask with wait: %q, want its answer", text(res))
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the ask call did not return")
	}
	// Both answers' messages are on the butler's inbox before it dies.
	inbox, err := f.js.Consumer(t.Context(), bus.StreamInbox, bus.ConsumerInbox("health"))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		info, err := inbox.Info(t.Context())
		return err == nil && info.NumPending >= 2
	}, "both answers on the butler's inbox")

	if err := bp.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = bp.cmd.Wait()
	startService(t, "butler", "butler health again", env, "--name", "health")
	c2 := f.connect(url, "")
	var got strings.Builder
	testkit.Eventually(t, 15*time.Second, func() bool {
		res := call(t, c2, "inbox", map[string]any{"max": 50})
		got.WriteString(text(res))
		return strings.Contains(got.String(), "Rotate now")
	}, "the answer that came only as a message, through inbox after the restart")
	time.Sleep(time.Second)
	got.WriteString(text(call(t, c2, "inbox", map[string]any{"max": 50})))
	if strings.Contains(got.String(), "Restart now") {
		t.Fatalf("the answer the ask call returned came again after the butler's restart:\n%s", got.String())
	}
}

// TestAskAboutAMessage: ask naming a message (request_id) puts the question
// in that message's chat and counts as answering it: the message is no
// longer unread, and inbox does not offer it again.
func TestAskAboutAMessage(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	f.tell(alice, "Can you book the dentist?")
	in := meta(c.Wait(butler.MethodChannel, 1)[0])

	if res := c.Call("ask", map[string]any{"question": "Which day?", "request_id": in["request_id"], "channel": "email"}); !res.IsError || !strings.Contains(text(res), "leave out channel") {
		t.Errorf("ask with request_id and a channel: %q, want it refused", text(res))
	}
	res := c.Call("ask", map[string]any{"question": "Which day suits you?", "options": []any{"Monday", "Friday"}, "request_id": in["request_id"]})
	if res.IsError {
		t.Fatalf("ask about the message: %s", text(res))
	}
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, m := range f.tg.Messages(alice.ID) {
			if strings.Contains(m.Text, "Which day suits you?") {
				return true
			}
		}
		return false
	}, "the question in the chat the message came from")
	status := c.Call("channel_status", nil)
	if st, _ := json.Marshal(status.StructuredContent); !strings.Contains(string(st), `"unread":0`) {
		t.Errorf("after ask about it, the message is still unread: %s", st)
	}
	if got := text(c.Call("inbox", map[string]any{"max": 50})); strings.Contains(got, "Can you book the dentist?") {
		t.Errorf("inbox offers the message ask answered again:\n%s", got)
	}
}
