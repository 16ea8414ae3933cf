package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/smtp"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
	"github.com/heraldhq/herald/services/messenger/email"
	"github.com/heraldhq/herald/services/messenger/email/smtptest"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

var (
	ackDataRE = regexp.MustCompile(`ack:(dlv_[0-9a-f]+)`)
	ackLinkRE = regexp.MustCompile(`http://[0-9.:]+/ack/mail/[a-z2-7]{26}`)
)

// noticeOf is the channel notification of kind about the note with id (its
// first request_id, or its delivery id), if ns has it.
func noticeOf(ns []map[string]any, kind, id string) map[string]any {
	for _, n := range ns {
		if m := meta(n); m["kind"] == kind && (m["note_request_id"] == id || m["note_delivery_id"] == id) {
			return n
		}
	}
	return nil
}

// mailWith waits up to within for a mail the SMTP fake took whose text has
// text, and returns the first; it fails the test, saying what, without one.
func (f *fleet) mailWith(t *testing.T, text string, within time.Duration, what string) smtptest.Message {
	t.Helper()
	var found smtptest.Message
	testkit.Eventually(t, within, func() bool {
		for _, m := range f.smtp.Messages() {
			if strings.Contains(string(m.Data), text) {
				found = m
				return true
			}
		}
		return false
	}, what)
	return found
}

// TestAttention: a notify with ack_within carries "Got it"; a tap
// acknowledges it at once (the model is told, the copy edited), and so does
// a reaction on it, while a reaction on another message goes nowhere. One nobody
// acknowledges goes on, after its time, through the next integration of
// its chain (Telegram to email), marked as an escalation with the first
// time; a reply to the escalation mail acknowledges it, edits the Telegram
// copy and tells the model. A note at the end of its chain tells the model
// nobody saw it. (TestEscalationAcrossASwitchboardKill kills the
// switchboard while a note waits.)
func TestAttention(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("tg_main").EscalateTo = []string{"mail"}
	f.cfg.Integration("mail").Settings.(*email.Config).DefaultTo = "alice@example.com"
	f.cfg.HTTPListen = testkit.FreeAddr(t)
	f.cfg.PublicURL = "http://" + f.cfg.HTTPListen
	if err := f.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f.start("switchboard", "messenger")
	c := f.listen("health")

	gotIt := func(msg string) (telegramtest.Message, string) {
		t.Helper()
		if res := c.Call("notify", map[string]any{"channel": "telegram", "message": msg, "ack_within": "30s", "idempotency_key": fmt.Sprintf("note-%x", len(msg))}); res.IsError {
			t.Fatalf("notify with ack_within: %s", text(res))
		}
		var m telegramtest.Message
		testkit.Eventually(t, 10*time.Second, func() bool {
			for _, x := range f.tg.Messages(alice.ID) {
				if strings.Contains(x.Text, msg) {
					m = x
					return true
				}
			}
			return false
		}, "the note in alice's chat")
		id := ackDataRE.FindStringSubmatch(fmt.Sprint(m.ReplyMarkup))
		if id == nil || !strings.Contains(fmt.Sprint(m.ReplyMarkup), "Got it") {
			t.Fatalf("note %q has buttons %v, want Got it", m.Text, m.ReplyMarkup)
		}
		return m, id[1]
	}

	// Acknowledged at once by a tap. Called again with its
	// idempotency_key, it is the same note: nothing escalates later.
	seen, seenID := gotIt("Disk at 80%.")
	if res := c.Call("notify", map[string]any{"channel": "telegram", "message": "Disk at 80%.", "ack_within": "30s", "idempotency_key": fmt.Sprintf("note-%x", len("Disk at 80%."))}); res.IsError {
		t.Fatalf("the same note again: %s", text(res))
	}
	f.tg.PressButton(f.tg.Token(), alice.ID, seen.MessageID, alice, "ack:"+seenID)
	testkit.Eventually(t, 10*time.Second, func() bool { return noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", seenID) != nil }, "the model told the note was seen")
	testkit.Eventually(t, 10*time.Second, func() bool { return f.copyShows(alice.ID, seen.MessageID, "✅ seen by") }, "the note edited to say it was seen, its button gone")

	// A reaction acknowledges one too; a reaction on anything else goes
	// nowhere.
	hello := f.tell(alice, "hello")
	c.Wait(butler.MethodChannel, 2)
	f.tg.React(f.tg.Token(), alice.ID, hello.MessageID, alice, "👍")
	reacted, reactedID := gotIt("Certificate renewed.")
	f.tg.React(f.tg.Token(), alice.ID, reacted.MessageID, alice, "👀")
	testkit.Eventually(t, 10*time.Second, func() bool { return noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", reactedID) != nil }, "the model told a reaction saw the note")
	testkit.Eventually(t, 10*time.Second, func() bool { return f.copyShows(alice.ID, reacted.MessageID, "✅ seen by") }, "the note a reaction saw edited")
	for _, n := range c.Notifications(butler.MethodChannel) {
		if strings.Contains(fmt.Sprint(n["content"]), "👍") {
			t.Fatalf("a reaction on another message reached the model: %v", n)
		}
	}

	// Nobody taps this one.
	down, downID := gotIt("The server is down.")
	// Nor answers this mail, whose chain ends with it.
	res := c.Call("notify", map[string]any{"channel": "email", "recipient": "alice@example.com", "message": "Backup failed.", "ack_within": "30s"})
	if res.IsError {
		t.Fatalf("mail with ack_within: %s", text(res))
	}
	backupID := fmt.Sprint(res.StructuredContent.(map[string]any)["request_context"].(map[string]any)["request_id"])
	first := f.mailWith(t, "Backup failed.", 10*time.Second, "the mail")
	plain, _ := first.Part("text/plain")
	if link := ackLinkRE.FindString(string(plain.Body)); link == "" || !strings.Contains(string(plain.Body), "or reply to this message") {
		t.Fatalf("the mail does not say how to acknowledge it:\n%s", plain.Body)
	}

	// Alice answers the escalation before the mail server has confirmed
	// it (the server holds its 250 for a second): the messenger does not
	// know yet that it was sent, and her reply still acknowledges it.
	addr := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`).FindString(f.statusDetail("mail"))
	escalated, replied := make(chan smtptest.Message, 1), make(chan error, 1)
	var (
		once  sync.Once
		early map[string]any // what the model was told of the note by then
	)
	f.smtp.OnAccept(func(m smtptest.Message) {
		if !strings.Contains(m.Subject(), "Escalation") || !strings.Contains(string(m.Data), "The server is down.") {
			return
		}
		once.Do(func() {
			early = noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", downID)
			escalated <- m
			reply := "Authentication-Results: mx.example.com; dmarc=pass header.from=example.com\r\nFrom: Alice <alice@example.com>\r\nTo: herald@example.com\r\n" +
				"Subject: Re: " + m.Subject() + "\r\nMessage-ID: <ack1@mail.example.com>\r\nIn-Reply-To: " + m.Header.Get("Message-ID") + "\r\nDate: Thu, 26 Nov 2026 10:00:00 +0000\r\n\r\nOn it.\r\n"
			replied <- smtp.SendMail(addr, nil, "alice@example.com", []string{"herald@example.com"}, []byte(reply))
			time.Sleep(time.Second)
		})
	})
	t.Cleanup(func() { f.smtp.OnAccept(nil) })
	var esc smtptest.Message
	select {
	case esc = <-escalated:
	case <-time.After(60 * time.Second):
		t.Fatal("the unacknowledged note did not escalate to email within 60s")
	}
	plain, _ = esc.Part("text/plain")
	if body := string(plain.Body); !strings.Contains(body, "first sent "+time.Now().UTC().Format("2006-01-02")) || !strings.Contains(body, "via telegram:tg_main") {
		t.Fatalf("the escalation does not say when and where it was first sent:\n%s", body)
	}
	if early != nil {
		t.Fatalf("the model was told of an acknowledgement nobody gave: %v", early)
	}
	testkit.Eventually(t, 30*time.Second, func() bool { return noticeOf(c.Notifications(butler.MethodChannel), "unacknowledged", backupID) != nil },
		"the model told nobody saw the mail")
	if err := <-replied; err != nil {
		t.Fatal(err)
	}
	var ack map[string]any
	testkit.Eventually(t, 15*time.Second, func() bool {
		ack = noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", downID)
		return ack != nil
	}, "the model told the escalated note was seen")
	if m := meta(ack); !strings.Contains(fmt.Sprint(m["acknowledged_by"]), "alice@example.com") || m["channel"] != "email:mail" {
		t.Fatalf("acknowledged %v, want by alice@example.com via email:mail", m)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return f.copyShows(alice.ID, down.MessageID, "✅ seen by") },
		"the Telegram copy edited to say it was seen by mail, its button gone")
	for _, m := range f.smtp.Messages() {
		if strings.Contains(string(m.Data), "Disk at 80%") {
			t.Fatalf("a note acknowledged at once, called twice, escalated:\n%s", m.Data)
		}
	}

	// A mailed note's link: its page asks, its button acknowledges.
	res = c.Call("notify", map[string]any{"channel": "email", "recipient": "alice@example.com", "message": "Payroll exported.", "ack_within": "1h"})
	if res.IsError {
		t.Fatalf("mail with ack_within: %s", text(res))
	}
	payrollID := fmt.Sprint(res.StructuredContent.(map[string]any)["request_context"].(map[string]any)["request_id"])
	var link string
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, m := range f.smtp.Messages() {
			if p, _ := m.Part("text/plain"); strings.Contains(string(p.Body), "Payroll exported.") {
				link = ackLinkRE.FindString(string(p.Body))
				return true
			}
		}
		return false
	}, "the payroll mail")
	page := httpDo(t, http.MethodGet, link)
	if !strings.Contains(page, `<form method="post">`) || noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", payrollID) != nil {
		t.Fatalf("the link's page acknowledged the note or offers no button:\n%s", page)
	}
	if done := httpDo(t, http.MethodPost, link); !strings.Contains(done, "Thank you") {
		t.Fatalf("the button answered:\n%s", done)
	}
	var byLink map[string]any
	testkit.Eventually(t, 15*time.Second, func() bool {
		byLink = noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", payrollID)
		return byLink != nil
	}, "the model told the link acknowledged the mail")
	if m := meta(byLink); m["acknowledged_by"] != "alice@example.com" || m["channel"] != "email:mail" {
		t.Fatalf("acknowledged %v, want by alice@example.com via email:mail", m)
	}
	forged := link[:len(link)-26] + strings.Repeat("a", 26)
	httpDo(t, http.MethodPost, forged)
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, r := range f.audit("rejected") {
			if r["reason"] == "ack_link_unknown" {
				return true
			}
		}
		return false
	}, "a made-up link refused and audited")

	for _, tt := range []struct{ within, want string }{{"10s", "ack_within"}, {"8d", "ack_within"}, {"soon", "ack_within"}} {
		res := c.Call("notify", map[string]any{"channel": "telegram", "message": "x", "ack_within": tt.within})
		if !res.IsError || !strings.Contains(text(res), "validation_error") || !strings.Contains(text(res), tt.want) {
			t.Errorf("ack_within %q: %q, want a validation_error naming %s", tt.within, text(res), tt.want)
		}
	}
}

// TestNoteWhoseFirstCopyFails: a note that must be seen whose first copy
// reaches nobody (Telegram refuses the send outright) does not wait out its
// ack_within for an acknowledgement nobody can give: it goes on through its
// chain at once, the escalation saying the first copy could not be
// delivered (not when it was "first sent"), and the model, told the notify
// failed, is told too that it went on, so it does not send it twice.
func TestNoteWhoseFirstCopyFails(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("tg_main").EscalateTo = []string{"mail"}
	f.cfg.Integration("mail").Settings.(*email.Config).DefaultTo = "alice@example.com"
	if err := f.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f.start("switchboard", "messenger")
	c := f.listen("health")

	f.tg.FailNext("sendMessage", 1, http.StatusBadRequest, "Bad Request: chat not found", 0)
	res := c.Call("notify", map[string]any{"channel": "telegram", "message": "The database is full.", "ack_within": "1h"})
	if !res.IsError || !strings.Contains(text(res), "not_found") || !strings.Contains(text(res), "at once through email:mail, as an escalation: do not send it again.") {
		t.Fatalf("the failed note answered %q, want its failure and that it goes on through email:mail", text(res))
	}
	esc := f.mailWith(t, "The database is full.", 15*time.Second, "the note escalated to email at once, not after its hour")
	plain, _ := esc.Part("text/plain")
	if body := string(plain.Body); !strings.Contains(body, "could not be delivered via telegram:tg_main") || strings.Contains(body, "first sent") {
		t.Fatalf("the escalation does not say the first copy could not be delivered:\n%s", body)
	}
	if !strings.Contains(esc.Subject(), "Escalation") {
		t.Fatalf("the mail is not marked as an escalation: %q", esc.Subject())
	}
}

// TestAttentionBySlackReaction: a note that must be seen on Slack has a
// Got it button; a person's reaction on it acknowledges it (the model is
// told, the message edited, its button gone), and a reaction on any other
// message goes nowhere.
func TestAttentionBySlackReaction(t *testing.T) {
	f, sl, addr := slackFleet(t, config.Inbound{Enabled: true, DMPolicy: "allowlist", AllowFrom: []string{"U0HUMAN01"}})
	f.start("switchboard", "messenger")
	c := f.listen("health")
	sl.AddUser("U0HUMAN01", "ann")
	res := c.Call("notify", map[string]any{"channel": "slack", "message": "Deploy finished with warnings.", "ack_within": "1h"})
	if res.IsError {
		t.Fatalf("notify with ack_within: %s", text(res))
	}
	id := fmt.Sprint(res.StructuredContent.(map[string]any)["request_context"].(map[string]any)["request_id"])
	var channel, ts string
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, call := range sl.Calls("chat.postMessage") {
			if call.OK() && strings.Contains(call.Params["blocks"], "ack:dlv_") && strings.Contains(call.Params["text"]+call.Params["attachments"]+call.Params["blocks"], "Deploy finished") {
				channel, ts = call.Channel, call.TS
				return true
			}
		}
		return false
	}, "the note with its Got it button in #ops")
	events := "http://" + addr + "/slack/sl/events"
	other := sl.UserMessage(slacktest.MessageEvent{Channel: channel, Text: "unrelated"})
	for _, cb := range []any{sl.Reaction(channel, other.Event.TS, "U0HUMAN01", "+1"), sl.Reaction(channel, ts, "U0HUMAN01", "eyes")} {
		if a, err := slacktest.SendEvent(t.Context(), events, f.env["SLACK_SIGNING_SECRET"], cb); err != nil || a.Status != http.StatusOK {
			t.Fatalf("the reaction event: %v %v", a, err)
		}
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", id) != nil }, "the model told the note was seen")
	testkit.Eventually(t, 10*time.Second, func() bool {
		m, _ := sl.Message(channel, ts)
		return m.Edited != nil && len(m.Buttons()) == 0 && strings.Contains(m.Text+fmt.Sprint(m.Attachments), "seen by U0HUMAN01 via slack:sl")
	}, "the note edited to say U0HUMAN01 saw it, its button gone")
	for _, n := range c.Notifications(butler.MethodChannel) {
		if strings.Contains(fmt.Sprint(n["content"]), "+1") {
			t.Fatalf("a reaction on another message reached the model: %v", n)
		}
	}
}

// TestEscalationAcrossASwitchboardKill: the switchboard, the messenger and a
// butler run as processes of their own. A note that must be seen goes to
// Telegram; the switchboard is killed with SIGKILL while it waits and
// started again; the note escalates to email once, on time, and a reply to
// that mail acknowledges it: the Telegram copy is edited and the model told.
func TestEscalationAcrossASwitchboardKill(t *testing.T) {
	if _, err := serviceBins(); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	mcpAddr := testkit.FreeAddr(t)
	env, sb := f.escalatingToMail(mcpAddr, "", "    inbound: { listen: 127.0.0.1:0, domains: [example.com], allow_from: [alice@example.com], trusted_relays: [mx.example.com] }\n")
	c := butlertest.Connect(t, "http://"+mcpAddr+"/mcp", "2025-06-18", f.bearer())
	note, id := f.noteToSee(c, "The server is down.")

	if err := sb.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = sb.cmd.Wait()
	startService(t, "switchboard", "switchboard again", env)

	escalations := func() []smtptest.Message {
		var out []smtptest.Message
		for _, m := range f.smtp.Messages() {
			if strings.Contains(m.Subject(), "Escalation") && strings.Contains(string(m.Data), "The server is down.") {
				out = append(out, m)
			}
		}
		return out
	}
	testkit.Eventually(t, 60*time.Second, func() bool { return len(escalations()) > 0 }, "the note escalated to email after the switchboard's kill")
	esc := escalations()[0]
	addr := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`).FindString(f.statusDetail("mail"))
	reply := "Authentication-Results: mx.example.com; dmarc=pass header.from=example.com\r\nFrom: Alice <alice@example.com>\r\nTo: herald@example.com\r\n" +
		"Subject: Re: " + esc.Subject() + "\r\nMessage-ID: <ack2@mail.example.com>\r\nIn-Reply-To: " + esc.Header.Get("Message-ID") + "\r\nDate: Thu, 26 Nov 2026 10:00:00 +0000\r\n\r\nOn it.\r\n"
	if err := smtp.SendMail(addr, nil, "alice@example.com", []string{"herald@example.com"}, []byte(reply)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", id) != nil },
		"the model told the escalated note was seen")
	testkit.Eventually(t, 10*time.Second, func() bool { return f.copyShows(alice.ID, note.MessageID, "✅ seen by") }, "the Telegram copy edited, its button gone")
	if n := len(escalations()); n != 1 {
		t.Fatalf("%d escalation mails, want one", n)
	}
}

// escalatingToMail starts the services as processes (startProcesses) with
// tg_main escalating to a mail integration; tgKeys and mailKeys are more
// lines of each.
func (f *fleet) escalatingToMail(mcpAddr, tgKeys, mailKeys string) ([]string, *serviceProc) {
	f.t.Helper()
	return f.startProcesses(mcpAddr, fmt.Sprintf(`    escalate_to: [mail]
%s  - id: mail
    type: email
    smtp_url_env: SMTP_URL
    from: herald@example.com
    default_to: alice@example.com
    ca_file: %q
    grants: all
%s`, tgKeys, f.smtp.WriteCertFile(f.t), mailKeys), "SMTP_URL="+f.smtp.URL())
}

// noteToSee notifies message with ack_within 30s and returns its copy in
// alice's chat, with Got it, and the note's delivery id.
func (f *fleet) noteToSee(c *butlertest.Client, message string) (telegramtest.Message, string) {
	t := f.t
	t.Helper()
	if res := c.Call("notify", map[string]any{"message": message, "ack_within": "30s"}); res.IsError {
		t.Fatalf("notify with ack_within: %s", text(res))
	}
	note := f.withButtons(message)
	id := ackDataRE.FindStringSubmatch(fmt.Sprint(note.ReplyMarkup))
	if id == nil {
		t.Fatalf("the note's buttons %v carry no ack", note.ReplyMarkup)
	}
	return note, id[1]
}

// withButtons waits for the message in alice's chat whose text has text and
// that carries buttons, and returns it.
func (f *fleet) withButtons(text string) telegramtest.Message {
	f.t.Helper()
	var found telegramtest.Message
	testkit.Eventually(f.t, 15*time.Second, func() bool {
		for _, m := range f.tg.Messages(alice.ID) {
			if strings.Contains(m.Text, text) && m.ReplyMarkup != nil {
				found = m
				return true
			}
		}
		return false
	}, "the message "+text+" with its buttons in alice's chat")
	return found
}

// httpDo is the body of a request to url, which must answer 200.
func httpDo(t *testing.T, method, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return string(b)
}

// TestTapHeldByAKilledSwitchboard: a tap on "Got it" made before the
// deadline, taken by a switchboard that then died, acknowledges the note: it
// is not overtaken by the escalation it acknowledged. The switchboard is
// killed (SIGKILL); the tap is taken from its inbound consumer by this test,
// which keeps it in progress past the deadline, as a switchboard handling it
// does, and then lets it go, as a killed one does; a switchboard started
// meanwhile sees the note's deadline pass with the tap not yet handled.
func TestTapHeldByAKilledSwitchboard(t *testing.T) {
	if _, err := serviceBins(); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	mcpAddr := testkit.FreeAddr(t)
	env, sb := f.escalatingToMail(mcpAddr, fmt.Sprintf("    inbound: { allow_from: [%q] }\n", fmt.Sprint(alice.ID)), "")
	c := butlertest.Connect(t, "http://"+mcpAddr+"/mcp", "2025-06-18", f.bearer())
	note, id := f.noteToSee(c, "The disk is full.")
	deadline := time.Now().Add(30 * time.Second) // at or after the note's own

	if err := sb.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = sb.cmd.Wait()
	f.tg.PressButton(f.tg.Token(), alice.ID, note.MessageID, alice, "ack:"+id)
	cons, err := f.js.Consumer(t.Context(), bus.StreamIngress, bus.ConsumerIngress)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var tap jetstream.Msg
	for m := range batch.Messages() {
		tap = m
	}
	if tap == nil || !strings.Contains(string(tap.Data()), "ack:"+id) {
		t.Fatalf("the tap did not reach the switchboard's inbound stream (%v)", batch.Error())
	}
	held := bus.KeepInProgress(tap, bus.AckWait)
	startService(t, "switchboard", "switchboard again", env)
	time.Sleep(time.Until(deadline.Add(3 * time.Second)))
	held() // the holder dies: the tap comes back within bus.AckWait

	testkit.Eventually(t, 30*time.Second, func() bool { return noticeOf(c.Notifications(butler.MethodChannel), "acknowledged", id) != nil },
		"the model told the note was seen, by the tap made before its deadline")
	time.Sleep(3 * time.Second) // an escalation decided before the tap would have been sent by now
	for _, m := range f.smtp.Messages() {
		if strings.Contains(m.Subject(), "Escalation") {
			t.Fatalf("the note escalated to email although it was tapped before its deadline: %q", m.Subject())
		}
	}
	if n := noticeOf(c.Notifications(butler.MethodChannel), "unacknowledged", id); n != nil {
		t.Fatalf("the model was told nobody saw the note: %v", n)
	}
}
