package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

var bob = telegramtest.User{ID: 777, FirstName: "Bob"}

// promptCopies waits for the prompt id to be sent to each of chats, and
// returns its message id in each.
func (f *fleet) promptCopies(id string, chats ...int64) map[int64]int64 {
	f.t.Helper()
	out := map[int64]int64{}
	testkit.Eventually(f.t, 15*time.Second, func() bool {
		for _, chat := range chats {
			for _, m := range f.tg.Messages(chat) {
				if strings.Contains(m.Text, `"yes `+id+`"`) {
					out[chat] = m.MessageID
				}
			}
		}
		return len(out) == len(chats)
	}, "the prompt "+id+" in every approver's chat")
	return out
}

// copyShows reports whether the copy msg in chat says want and has no
// buttons left.
func (f *fleet) copyShows(chat, msg int64, want string) bool {
	for _, m := range f.tg.Messages(chat) {
		if m.MessageID == msg {
			return strings.Contains(m.Text, want) && m.ReplyMarkup == nil
		}
	}
	return false
}

// TestPromptClosesEverywhere: a prompt goes to two approvers on Telegram and
// one on Slack; when one answers, every copy is edited to say who answered and how, and lose
// their buttons. A prompt nobody answers expires: every copy says so, the
// audit log has it as its own outcome, and a late answer changes nothing.
func TestPromptClosesEverywhere(t *testing.T) {
	f, sl, _ := slackFleet(t, config.Inbound{Enabled: true, DMPolicy: "allowlist", AllowFrom: []string{"U0HUMAN01"}, Approvers: []string{"U0HUMAN01"}})
	f.cfg.Integration("tg_main").Inbound.Approvers = []string{chatID, "777"}
	expire := config.Duration(3 * time.Second)
	f.cfg.Approvals.ExpireAfter = &expire
	f.start("switchboard", "messenger")
	c := f.listen("health")

	// Slack takes the prompt but answers only after Bob has: its copy's id
	// is known after the prompt closed, and it is edited all the same.
	hold := make(chan struct{})
	sl.OnAccept("chat.postMessage", func(c slacktest.Call) {
		if strings.Contains(fmt.Sprint(c), "abcde") {
			<-hold
		}
	})
	askPermission(t, c, "abcde", "Bash", "Delete build outputs")
	copies := f.promptCopies("abcde", alice.ID, bob.ID)
	// Slack has the copy (its answer held) before Bob answers: a copy not
	// yet routed when the prompt closes is never sent at all.
	testkit.Eventually(t, 15*time.Second, func() bool { return len(sl.Calls("chat.postMessage")) > 0 }, "the Slack approver's copy to be posted")
	f.tg.PressButton(f.tg.Token(), bob.ID, copies[bob.ID], bob, "perm:allow:abcde")
	if got := c.Wait(butler.MethodPermission, 1); got[0]["request_id"] != "abcde" || got[0]["behavior"] != "allow" {
		t.Fatalf("verdict %v", got[0])
	}
	for _, chat := range []int64{alice.ID, bob.ID} {
		testkit.Eventually(t, 10*time.Second, func() bool { return f.copyShows(chat, copies[chat], "allowed by Bob (777) via telegram:tg_main") },
			"the copy in chat "+telegramChat(chat)+" to say Bob allowed it, without buttons")
	}
	close(hold)
	slackShows := func(want string) bool {
		for _, c := range sl.Calls("chat.update") {
			if strings.Contains(fmt.Sprint(c), want) {
				return true
			}
		}
		return false
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return slackShows("allowed by Bob (777) via telegram:tg_main") }, "the Slack approver's copy to say Bob allowed it")
	if m := f.tg.Messages(alice.ID); !strings.Contains(m[len(m)-1].Text, "health asks to run Bash") {
		t.Errorf("the closed copy lost its headline: %q", m[len(m)-1].Text)
	}

	// Nobody answers: it expires everywhere.
	askPermission(t, c, "qwert", "Write", "Write a file")
	copies = f.promptCopies("qwert", alice.ID, bob.ID)
	for _, chat := range []int64{alice.ID, bob.ID} {
		testkit.Eventually(t, 15*time.Second, func() bool { return f.copyShows(chat, copies[chat], "⌛ expired") },
			"the copy in chat "+telegramChat(chat)+" to say the prompt expired")
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return slackShows("expired") }, "the Slack approver's copy to say the prompt expired")
	var found bool
	for _, r := range f.audit(audit.Expired) {
		found = found || r["request_id"] == "qwert" && r["butler"] == "health"
	}
	if !found {
		t.Errorf("no audit record of kind expired for qwert: %v", f.audit(audit.Expired))
	}
	// Its buttons are gone; a typed answer comes too late.
	f.tell(alice, "yes qwert")
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, r := range f.audit(audit.Rejected) {
			if r["reason"] == "verdict_expired" {
				return true
			}
		}
		return false
	}, "the late answer refused as verdict_expired")
	if got := c.Notifications(butler.MethodPermission); len(got) != 1 {
		t.Fatalf("a late answer to an expired prompt reached the session: %v", got)
	}
}

// TestCloseFinishedAfterAKill: a switchboard killed after it closed an
// expired prompt, before it stored the audit record and edited the copies,
// leaves the prompt unfinished; the next switchboard finishes it (the
// record stored, the copies saying it expired), once.
func TestCloseFinishedAfterAKill(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("tg_main").Inbound.Approvers = []string{chatID, "777"}
	never := config.Duration(time.Hour)
	f.cfg.Approvals.ExpireAfter = &never
	f.start("switchboard", "messenger")
	c := f.listen("health")
	askPermission(t, c, "zxcvb", "Bash", "Run the tests")
	copies := f.promptCopies("zxcvb", alice.ID, bob.ID)
	f.stop("switchboard")

	// What the killed switchboard left: closed as expired a minute ago,
	// nothing else done.
	kv, err := f.js.KeyValue(t.Context(), bus.BucketApprovals)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), approval.Key("health", "zxcvb"))
	if err != nil {
		t.Fatal(err)
	}
	var req approval.Request
	if err := json.Unmarshal(e.Value(), &req); err != nil {
		t.Fatal(err)
	}
	req.Verdict, req.AnsweredAt, req.Unfinished = approval.Expired, time.Now().Add(-time.Minute).UTC(), true
	b, _ := json.Marshal(req)
	if _, err := kv.Put(t.Context(), e.Key(), b); err != nil {
		t.Fatal(err)
	}

	f.start("switchboard")
	for _, chat := range []int64{alice.ID, bob.ID} {
		testkit.Eventually(t, 15*time.Second, func() bool { return f.copyShows(chat, copies[chat], "⌛ expired") },
			"the copy in chat "+telegramChat(chat)+" to say the prompt expired")
	}
	expired := func() (n int) {
		for _, r := range f.audit(audit.Expired) {
			if r["request_id"] == "zxcvb" {
				n++
			}
		}
		return n
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return expired() > 0 }, "the audit record of the prompt's expiry")
	// Finished, it is not finished again by the sweeps after.
	time.Sleep(3 * time.Second)
	if n := expired(); n != 1 {
		t.Errorf("%d expired records for the prompt, want 1", n)
	}
}

func telegramChat(id int64) string { return strconv.FormatInt(id, 10) }

// TestSessionGrant: "Allow for this session" allows the request and lets
// the butler answer the same session's next request for the same tool
// itself, audited as auto_allowed with the grant; another tool, or another
// session, still asks the humans. herald grants lists it, and once it is
// revoked the next request goes to the humans again.
func TestSessionGrant(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	asked := func(id string) bool { return len(f.promptsFor(id)) > 0 }

	askPermission(t, c, "abcde", "Bash", "Delete build outputs")
	copies := f.promptCopies("abcde", alice.ID)
	f.tg.PressButton(f.tg.Token(), alice.ID, copies[alice.ID], alice, "perm:session:abcde")
	if got := c.Wait(butler.MethodPermission, 1); got[0]["request_id"] != "abcde" || got[0]["behavior"] != "allow" {
		t.Fatalf("verdict %v, want allow", got[0])
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return f.copyShows(alice.ID, copies[alice.ID], "allowed for this session by") },
		"the prompt to say it was allowed for this session")
	var grantID string
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, m := range f.tg.Messages(alice.ID) {
			if i := strings.Index(m.Text, "herald grants revoke g_"); i >= 0 && strings.Contains(m.Text, "health may now run Bash without asking") {
				grantID = strings.TrimRight(m.Text[i+len("herald grants revoke "):], ").")
				return true
			}
		}
		return false
	}, "the approver to be told what the grant covers and how to end it")

	// The same session, the same tool: answered by the butler, audited.
	askPermission(t, c, "fghij", "Bash", "List files")
	if got := c.Wait(butler.MethodPermission, 2); got[1]["request_id"] != "fghij" || got[1]["behavior"] != "allow" {
		t.Fatalf("second verdict %v, want allow", got[1])
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, r := range f.audit(audit.AutoAllowed) {
			if r["request_id"] == "fghij" && r["grant"] == grantID && r["butler"] == "health" {
				return true
			}
		}
		return false
	}, "an auto_allowed audit record naming grant "+grantID)
	if asked("fghij") {
		t.Fatal("a request the session was granted was put to the approvers")
	}

	// Another tool, another session: the humans are asked.
	askPermission(t, c, "kmnop", "Write", "Write a file")
	f.promptCopies("kmnop", alice.ID)
	other := f.listen("health")
	askPermission(t, other, "qrstu", "Bash", "Delete build outputs")
	f.promptCopies("qrstu", alice.ID)

	out, err := f.herald("grants", "ls")
	if err != nil || !strings.Contains(out, grantID) || !strings.Contains(out, "Bash") {
		t.Fatalf("herald grants ls: %v\n%s", err, out)
	}
	if out, err := f.herald("grants", "revoke", grantID); err != nil || !strings.Contains(out, "Revoked "+grantID) {
		t.Fatalf("herald grants revoke: %v\n%s", err, out)
	}
	askPermission(t, c, "vwxyz", "Bash", "Delete build outputs")
	f.promptCopies("vwxyz", alice.ID)
	if out, _ := f.herald("grants", "ls"); strings.Contains(out, grantID) {
		t.Fatalf("the revoked grant is still listed:\n%s", out)
	}
}

// promptsFor are the messages of any chat that carry the prompt id.
func (f *fleet) promptsFor(id string) []telegramtest.Call {
	var out []telegramtest.Call
	for _, c := range f.tg.Calls("sendMessage") {
		if strings.Contains(c.Params["text"], `"yes `+id+`"`) {
			out = append(out, c)
		}
	}
	return out
}

// TestQuorumAndButlerApprovers: health's prompts for Bash need two
// approvers; the first allow is counted and shown on every copy, which keep
// their buttons; the same approver again counts once; the second closes it.
// A deny ends such a prompt at once. Finance's approvers are narrowed to
// alice: bob, an approver of the integration, is not asked and may not
// answer.
func TestQuorumAndButlerApprovers(t *testing.T) {
	f := newFleet(t)
	tg := f.cfg.Integration("tg_main")
	tg.Inbound.Approvers = []string{chatID, "777", "888"}
	health, finance := f.cfg.Butler("health"), f.cfg.Butler("finance")
	health.Quorum = []config.Quorum{{Tools: "^Bash$", Count: 2}}
	finance.Approvers = []string{"tg_main:" + chatID}
	if err := f.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	carol := telegramtest.User{ID: 888, FirstName: "Carol"}
	f.start("switchboard", "messenger")
	c := f.listen("health")

	askPermission(t, c, "abcde", "Bash", "Delete build outputs")
	copies := f.promptCopies("abcde", alice.ID, bob.ID, carol.ID)
	for _, m := range f.promptsFor("abcde") {
		if !strings.Contains(m.Params["text"], "Needs 2 approvers") || strings.Contains(fmt.Sprint(m.ReplyMarkup), "perm:session") {
			t.Fatalf("a quorum prompt %q with buttons %+v: want it to say it needs 2, without Allow for this session", m.Params["text"], m.ReplyMarkup)
		}
	}
	f.tg.PressButton(f.tg.Token(), alice.ID, copies[alice.ID], alice, "perm:allow:abcde")
	for _, chat := range []int64{alice.ID, bob.ID, carol.ID} {
		testkit.Eventually(t, 10*time.Second, func() bool {
			for _, m := range f.tg.Messages(chat) {
				if m.MessageID == copies[chat] {
					return strings.Contains(m.Text, "1 of 2 allowed") && m.ReplyMarkup != nil
				}
			}
			return false
		}, "the copy in chat "+telegramChat(chat)+" to show 1 of 2, its buttons kept")
	}
	f.tell(alice, "yes abcde") // the same approver again
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, m := range f.tg.Messages(alice.ID) {
			if strings.Contains(m.Text, "you have allowed permission request abcde already") {
				return true
			}
		}
		return false
	}, "alice to be told another approver must allow it")
	if n := len(c.Notifications(butler.MethodPermission)); n != 0 {
		t.Fatalf("the session got %d verdicts after one of two allows", n)
	}
	f.tg.PressButton(f.tg.Token(), bob.ID, copies[bob.ID], bob, "perm:allow:abcde")
	if got := c.Wait(butler.MethodPermission, 1); got[0]["request_id"] != "abcde" || got[0]["behavior"] != "allow" {
		t.Fatalf("verdict %v, want allow once two allowed", got[0])
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return f.copyShows(carol.ID, copies[carol.ID], "allowed by 12345, 777") },
		"carol's copy to say alice and bob allowed it, its buttons gone")

	askPermission(t, c, "fghij", "Bash", "Delete build outputs")
	copies = f.promptCopies("fghij", alice.ID, bob.ID, carol.ID)
	f.tg.PressButton(f.tg.Token(), alice.ID, copies[alice.ID], alice, "perm:allow:fghij")
	f.tg.PressButton(f.tg.Token(), carol.ID, copies[carol.ID], carol, "perm:deny:fghij")
	if got := c.Wait(butler.MethodPermission, 2); got[1]["request_id"] != "fghij" || got[1]["behavior"] != "deny" {
		t.Fatalf("verdict %v, want deny", got[1])
	}

	// Finance asks alice only; bob may not answer it.
	fin := f.listen("finance")
	askPermission(t, fin, "kmnop", "Write", "Write a file")
	f.promptCopies("kmnop", alice.ID)
	time.Sleep(500 * time.Millisecond)
	if len(f.promptsFor("kmnop")) != 1 {
		t.Fatalf("finance's prompt went to %d chats, want alice's only", len(f.promptsFor("kmnop")))
	}
	f.tell(bob, "yes kmnop")
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, r := range f.audit(audit.Rejected) {
			if r["reason"] == "verdict_unknown_id" || r["reason"] == "verdict_not_approver" {
				return true
			}
		}
		return false
	}, "bob's answer to finance's prompt refused")
	if n := len(fin.Notifications(butler.MethodPermission)); n != 0 {
		t.Fatalf("bob's answer reached finance's session")
	}
}

// TestPromptClosesWhenItsSessionEnds: the session that asked ends before
// anyone answers; every copy says so, and a late answer is refused, telling
// its sender why.
func TestPromptClosesWhenItsSessionEnds(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c, url := f.listenAt("health")
	askPermission(t, c, "abcde", "Bash", "Delete build outputs")
	copies := f.promptCopies("abcde", alice.ID)
	// The client ends its session, as Claude Code does when it quits.
	f.endSession(url, c.GetSessionId())
	testkit.Eventually(t, 15*time.Second, func() bool { return f.copyShows(alice.ID, copies[alice.ID], "the session that asked has ended") },
		"the copy to say the session that asked has ended, its buttons gone")
	f.tell(alice, "yes abcde")
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, m := range f.tg.Messages(alice.ID) {
			if strings.Contains(m.Text, "Herald: the session that asked permission request abcde has ended") {
				return true
			}
		}
		return false
	}, "alice to be told her answer came after the session ended")
}
