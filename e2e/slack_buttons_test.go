package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

// TestSlackApproverClicksAllow: a permission prompt goes to a Slack
// approver by user id (U…) with Allow, Deny and Allow for this session
// buttons in their direct message with the app; they click Allow, as
// Slack's interactivity posts it, the session that asked gets the verdict,
// and the prompt is edited to say who allowed it, without its buttons.
func TestSlackApproverClicksAllow(t *testing.T) {
	f, sl, addr := slackFleet(t, config.Inbound{Enabled: true, DMPolicy: "allowlist", AllowFrom: []string{"U0HUMAN01"}, Approvers: []string{"U0HUMAN01"}})
	f.start("switchboard", "messenger")
	c := f.listen("health")
	sl.AddUser("U0HUMAN01", "ann")
	askPermission(t, c, "sqabc", "Bash", "Run shell command")

	var channel, ts string
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, call := range sl.Calls("chat.postMessage") {
			if call.OK() && call.Params["channel"] == "U0HUMAN01" && strings.Contains(call.Params["blocks"], "perm:allow:sqabc") {
				channel, ts = call.Channel, call.TS
				return true
			}
		}
		return false
	}, "the prompt with its buttons to the Slack approver U0HUMAN01")
	prompt, _ := sl.Message(channel, ts)
	var got []string
	for _, b := range prompt.Buttons() {
		got = append(got, b.Text.Text+"="+b.Value+"/"+b.Style)
	}
	want := "Allow=perm:allow:sqabc/primary Deny=perm:deny:sqabc/danger Allow for this session=perm:session:sqabc/primary"
	if channel != "D0HUMAN01" || strings.Join(got, " ") != want {
		t.Fatalf("the prompt in %s has buttons %q, want in D0HUMAN01: %s", channel, got, want)
	}

	click := sl.Click(channel, ts, "perm:allow:sqabc", "U0HUMAN01")
	url := "http://" + addr + "/slack/sl/interactive"
	testkit.Eventually(t, 10*time.Second, func() bool {
		a, err := slacktest.SendInteraction(t.Context(), url, f.env["SLACK_SIGNING_SECRET"], click)
		return err == nil && a.Status == http.StatusOK && a.Body == ""
	}, "the interactivity endpoint to take the click")
	verdict := c.Wait(butler.MethodPermission, 1)
	if verdict[0]["request_id"] != "sqabc" || verdict[0]["behavior"] != "allow" {
		t.Fatalf("verdict %v, want allow for sqabc", verdict[0])
	}

	testkit.Eventually(t, 10*time.Second, func() bool {
		m, _ := sl.Message(channel, ts)
		return m.Edited != nil && len(m.Buttons()) == 0 && len(m.Attachments) == 1 &&
			strings.Contains(m.Attachments[0].Text, "allowed by ann (U0HUMAN01) via slack:sl")
	}, "the prompt edited to say ann allowed it, without buttons")
	if m, _ := sl.Message(channel, ts); !strings.Contains(m.Attachments[0].Text, "asks to run") {
		t.Errorf("the closed prompt lost its headline: %q", m.Attachments[0].Text)
	}
	if n := len(c.Notifications(butler.MethodPermission)); n != 1 {
		t.Errorf("%d verdicts reached the session, want 1", n)
	}
}

// TestSlackAskAnsweredInThread: a question without options asked of a
// Slack person is answered by a reply in its thread, in their direct
// message with the app; the answer reaches the session as kind=answer.
func TestSlackAskAnsweredInThread(t *testing.T) {
	f, sl, addr := slackFleet(t, config.Inbound{Enabled: true, DMPolicy: "allowlist", AllowFrom: []string{"U0HUMAN01"}})
	f.start("switchboard", "messenger")
	c := f.listen("health")
	res := c.Call("ask", map[string]any{"question": "Which branch?", "channel": "slack", "recipient": "U0HUMAN01"})
	qid := questionIDRE.FindStringSubmatch(text(res))
	if res.IsError || qid == nil {
		t.Fatalf("ask: %q", text(res))
	}
	var channel, ts string
	testkit.Eventually(t, 15*time.Second, func() bool {
		for _, call := range sl.Calls("chat.postMessage") {
			if call.OK() && call.Params["channel"] == "U0HUMAN01" {
				channel, ts = call.Channel, call.TS
				return true
			}
		}
		return false
	}, "the question in the person's direct message")
	reply := sl.UserMessage(slacktest.MessageEvent{Channel: channel, ChannelType: "im", User: "U0HUMAN01", Text: "main", ThreadTS: ts})
	if a, err := slacktest.SendEvent(t.Context(), "http://"+addr+"/slack/sl/events", f.env["SLACK_SIGNING_SECRET"], reply); err != nil || a.Status != http.StatusOK {
		t.Fatalf("the reply in the question's thread: %v %+v", err, a)
	}
	n := c.Wait(butler.MethodChannel, 1)[0]
	if m := meta(n); m["kind"] != "answer" || m["question_id"] != qid[1] || m["answer"] != "main" {
		t.Fatalf("the thread reply arrived as %v", n)
	}
}
