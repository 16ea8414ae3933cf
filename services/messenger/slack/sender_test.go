package slack_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	slackspec "github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/slack"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
)

const tokenEnv = "HERALD_TEST_SLACK_TOKEN"

// newSender builds the channel against srv with token, as a messenger would
// from herald.yaml; edit adjusts the integration.
func newSender(t *testing.T, srv *slacktest.Server, token string, edit ...func(*config.Integration)) deliver.Sender {
	t.Helper()
	return newSenderTimeout(t, srv, token, 0, edit...)
}

// newSenderTimeout is newSender whose Web API calls time out after timeout
// (0: the channel's own limit).
func newSenderTimeout(t *testing.T, srv *slacktest.Server, token string, timeout time.Duration, edit ...func(*config.Integration)) deliver.Sender {
	t.Helper()
	env := delivertest.Env(t, map[string]string{tokenEnv: token})
	env.CallTimeout = timeout
	in := config.Integration{ID: "slack_main", Type: "slack", Settings: &slack.Config{TokenEnv: tokenEnv, APIURL: srv.URL(), DefaultChannelID: "C0DEFAULT"}}
	return delivertest.NewSender(t, slack.New, in, env, edit...)
}

// posted is the attachment of each accepted chat.postMessage call.
func posted(t *testing.T, srv *slacktest.Server) []slacktest.Attachment {
	t.Helper()
	var out []slacktest.Attachment
	for _, c := range srv.Accepted("chat.postMessage") {
		if len(c.Attachments) != 1 {
			t.Fatalf("a message with %d attachments, want 1: %+v", len(c.Attachments), c)
		}
		out = append(out, c.Attachments[0])
	}
	return out
}

func TestSend(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	var sent []string
	r, err := s.Deliver(t.Context(), deliver.Delivery{
		Intent: "send", Butler: "health", Topic: "analysis", Subject: "Morning <report>",
		Message: "Hello **world** & <you>",
		Sent:    func(id string) error { sent = append(sent, id); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls("chat.postMessage")
	if len(calls) != 1 {
		t.Fatalf("got %d chat.postMessage calls, want 1", len(calls))
	}
	c := calls[0]
	if !c.OK() || c.Channel != "C0DEFAULT" || c.ContentType != "application/json" || c.TokenIn != "header" || len(c.Warnings) != 0 {
		t.Errorf("call = %+v, want an accepted JSON call with a bearer token to the default channel C0DEFAULT", c)
	}
	if c.Params["unfurl_links"] != "false" || c.Params["unfurl_media"] != "false" || c.Params["thread_ts"] != "" || c.Params["text"] != "" {
		t.Errorf("params = %v, want no unfurling, no thread and no top-level text", c.Params)
	}
	want := slacktest.Attachment{
		Color: slack.ColorNormal, Title: "Morning &lt;report&gt;",
		Text:     "Hello *world* &amp; &lt;you&gt;",
		Fallback: "Hello world &amp; &lt;you&gt;",
		Footer:   "health · analysis", MrkdwnIn: []string{"text"},
	}
	if got := c.Attachments; len(got) != 1 || got[0].Color != want.Color || got[0].Title != want.Title || got[0].Text != want.Text ||
		got[0].Fallback != want.Fallback || got[0].Footer != want.Footer || !slices.Equal(got[0].MrkdwnIn, want.MrkdwnIn) {
		t.Errorf("attachments = %+v, want [%+v]", got, want)
	}
	id := "C0DEFAULT:" + c.TS
	if !slices.Equal(r.MessageIDs, []string{id}) || !slices.Equal(sent, r.MessageIDs) {
		t.Errorf("receipt %v, Sent %v, want [%s]", r.MessageIDs, sent, id)
	}
}

func TestUrgencyColour(t *testing.T) {
	tests := []struct {
		urgency, color, fallback string
	}{
		{"low", slack.ColorLow, "done"},
		{"normal", slack.ColorNormal, "done"},
		{"", slack.ColorNormal, "done"},
		{"high", slack.ColorHigh, "‼️ done"},
	}
	for _, tt := range tests {
		t.Run(tt.urgency, func(t *testing.T) {
			srv := slacktest.NewServer(t)
			if _, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: "done", Urgency: tt.urgency}); err != nil {
				t.Fatal(err)
			}
			a := posted(t, srv)
			if len(a) != 1 || a[0].Color != tt.color || a[0].Text != "done" || a[0].Fallback != tt.fallback {
				t.Errorf("attachment = %+v, want colour %s, text done, fallback %q", a, tt.color, tt.fallback)
			}
		})
	}
}

// checkMrkdwn fails the test unless text is well formed on its own: only
// Slack's three escapes, every < a link to a safe scheme, code fences and
// inline code closed, and on every line outside code, each of * _ ~ paired
// (the inputs of the tests that use it have none as literal text).
func checkMrkdwn(t *testing.T, text string) {
	t.Helper()
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '&':
			rest := text[i:]
			if !strings.HasPrefix(rest, "&amp;") && !strings.HasPrefix(rest, "&lt;") && !strings.HasPrefix(rest, "&gt;") {
				t.Errorf("a bare & in %q", text)
				return
			}
		case '<':
			end := strings.IndexByte(text[i:], '>')
			link := text[i+1 : i+max(end, 1)]
			if end < 0 || strings.Contains(link, "<") || !(strings.HasPrefix(link, "http://") || strings.HasPrefix(link, "https://") || strings.HasPrefix(link, "mailto:")) {
				t.Errorf("a < that is not a link in %q", text)
				return
			}
		}
	}
	if n := strings.Count(text, "```"); n%2 != 0 {
		t.Errorf("an unclosed code block (%d fences) in %q", n, text)
	}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") || strings.HasSuffix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range []string{"`", "*", "_", "~"} {
			if strings.Count(line, m)%2 != 0 {
				t.Errorf("an unpaired %s on line %q", m, line)
			}
		}
	}
}

func TestLongMessageIsSplitWithFormattingValidInEveryChunk(t *testing.T) {
	para := "Results are **in: the levels are " + strings.Repeat("steady and fine ", 40) + "today** and _tomorrow " + strings.Repeat("we check again ", 30) + "soon_."
	code := "```\n" + strings.Repeat("line of code\n", 150) + "```"
	md := strings.Join([]string{"# Report", para, para, code, "> " + strings.Repeat("quoted ", 200), para, "[link](https://example.com/x)"}, "\n\n")
	texts, fallbacks := slack.ChunkTexts(md)
	if len(texts) < 3 {
		t.Fatalf("got %d chunks, want several", len(texts))
	}
	var all []string
	for i, text := range texts {
		if n := len([]rune(text)); n > slackspec.MaxMessage {
			t.Errorf("chunk %d holds %d characters, over %d", i, n, slackspec.MaxMessage)
		}
		checkMrkdwn(t, text)
		if strings.TrimSpace(fallbacks[i]) == "" || strings.ContainsAny(fallbacks[i], "*`") {
			t.Errorf("fallback %d = %q, want the chunk's plain text", i, fallbacks[i])
		}
		all = append(all, text)
	}
	// Everything is sent once, in order (the cuts drop only the spaces and
	// breaks they are made at).
	strip := strings.NewReplacer("*", "", "_", "", "`", "", ">", "", "\u200b", "", "<https://example.com/x|link", "link")
	if got, want := strings.Join(strings.Fields(strip.Replace(strings.Join(all, " "))), ""), strings.Join(strings.Fields(strip.Replace(slackspec.Mrkdwn(md))), ""); got != want {
		t.Errorf("the chunks do not add up to the message:\n%.300s\nwant\n%.300s", got, want)
	}

	srv := slacktest.NewServer(t)
	r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: md})
	if err != nil {
		t.Fatal(err)
	}
	got := posted(t, srv)
	if len(got) != len(texts) || len(r.MessageIDs) != len(texts) {
		t.Fatalf("%d messages posted, %d ids, want %d", len(got), len(r.MessageIDs), len(texts))
	}
	for i, a := range got {
		if a.Text != texts[i] {
			t.Errorf("message %d = %.80q, want chunk %d", i, a.Text, i)
		}
	}
}

func TestQuoteGrowingPastTheLimitIsCutSmaller(t *testing.T) {
	// "> " on every one of many short lines makes the mrkdwn longer than
	// the markup it was cut from.
	md := "> " + strings.Repeat("**a**\n> ", 2500)
	texts, _ := slack.ChunkTexts(md)
	if len(texts) < 2 {
		t.Fatalf("got %d chunks, want several", len(texts))
	}
	for i, text := range texts {
		if n := len([]rune(text)); n > slackspec.MaxMessage {
			t.Errorf("chunk %d holds %d characters, over %d", i, n, slackspec.MaxMessage)
		}
		for _, line := range strings.Split(text, "\n") {
			if line != "> *a*" {
				t.Fatalf("chunk %d has line %q, want every line a quoted bold a", i, line)
			}
		}
	}
}

func TestReplyGoesIntoTheThread(t *testing.T) {
	tests := []struct {
		name, thread, recipient string
		wantChannel, wantTS     string // wantTS "root" or "msg" or ""
	}{
		{"a channel message starts a thread", "C0GENERAL:1700000000.000100", "", "C0GENERAL", "1700000000.000100"},
		{"a thread reply answers in its thread", "C0GENERAL:1700000000.000100:1700000050.000200", "", "C0GENERAL", "1700000000.000100"},
		{"a direct message is answered in the conversation", "D0HUMAN01:1700000000.000100", "", "D0HUMAN01", ""},
		{"a thread in a direct message is answered in it", "D0HUMAN01:1700000000.000100:1700000050.000200", "", "D0HUMAN01", "1700000000.000100"},
		{"the same channel as recipient", "C0GENERAL:1700000000.000100", "C0GENERAL", "C0GENERAL", "1700000000.000100"},
		{"another channel gets a message of its own", "C0GENERAL:1700000000.000100", "C0OTHER", "C0OTHER", ""},
		{"no thread: the default channel", "", "", "C0DEFAULT", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := slacktest.NewServer(t)
			md := "answer " + strings.Repeat("long ", 800) // two chunks: both in the thread
			r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Intent: "reply", Thread: tt.thread, Recipient: tt.recipient, Message: md})
			if err != nil {
				t.Fatal(err)
			}
			calls := srv.Calls("chat.postMessage")
			if len(calls) != 2 || len(r.MessageIDs) != 2 {
				t.Fatalf("%d calls, receipt %v; want 2 chunks", len(calls), r.MessageIDs)
			}
			for _, c := range calls {
				if c.Channel != tt.wantChannel || c.Params["thread_ts"] != tt.wantTS {
					t.Errorf("posted to %s with thread_ts %q, want %s with %q", c.Channel, c.Params["thread_ts"], tt.wantChannel, tt.wantTS)
				}
			}
		})
	}
}

func TestReact(t *testing.T) {
	tests := []struct {
		emoji, want string
	}{
		{"👍", "+1"},
		{"❤️", "heart"},
		{"✅", "white_check_mark"},
		{"👍🏽", "+1::skin-tone-4"},
		{":eyes:", "eyes"},
		{"thumbsup", "thumbsup"},
		{":Tada:", "tada"},
	}
	for _, tt := range tests {
		t.Run(tt.emoji, func(t *testing.T) {
			srv := slacktest.NewServer(t)
			root := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "question"})
			msg := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "took it", ThreadTS: root.Event.TS})
			thread := "C0GENERAL:" + root.Event.TS + ":" + msg.Event.TS
			var sent []string
			r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Intent: "react", Emoji: tt.emoji, Thread: thread,
				Sent: func(id string) error { sent = append(sent, id); return nil }})
			if err != nil {
				t.Fatal(err)
			}
			calls := srv.Calls("reactions.add")
			if len(calls) != 1 || !calls[0].OK() || calls[0].Params["name"] != tt.want {
				t.Fatalf("reactions.add calls = %+v, want one accepted with name %s", calls, tt.want)
			}
			m, _ := srv.Message("C0GENERAL", msg.Event.TS)
			if len(m.Reactions) != 1 || m.Reactions[0].Name != tt.want {
				t.Errorf("the message's reactions = %+v, want %s on the message itself", m.Reactions, tt.want)
			}
			if id := "C0GENERAL:" + msg.Event.TS; !slices.Equal(r.MessageIDs, []string{id}) || !slices.Equal(sent, r.MessageIDs) {
				t.Errorf("receipt %v, Sent %v, want [%s]", r.MessageIDs, sent, id)
			}
		})
	}
}

func TestEveryMappedEmojiIsASlackName(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	for _, e := range []string{"👍", "👎", "❤️", "🔥", "🎉", "👀", "✅", "❌", "🙏", "😂", "🤔", "🚀", "💯", "⚠️", "👨‍💻", "✍️", "‼️", "🤷🏿"} {
		cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "x"})
		if _, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "react", Emoji: e, Thread: "C0GENERAL:" + cb.Event.TS}); err != nil {
			t.Errorf("react %s: %v", e, err)
		}
	}
}

func TestReactRefusals(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "x"})
	thread := "C0GENERAL:" + cb.Event.TS
	tests := []struct {
		name, emoji, thread, class string
	}{
		{"emoji Herald cannot name", "🦩", thread, "validation_error"},
		{"no emoji", " ", thread, "validation_error"},
		{"no thread", "👍", "", "validation_error"},
		{"not a Slack thread", "👍", "12345:678", "validation_error"},
		{"unknown emoji name", "no_such_emoji_here", thread, "validation_error"},
		{"unknown message", "👍", "C0GENERAL:1.000001", "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "react", Emoji: tt.emoji, Thread: tt.thread})
			if envelope.ClassOf(err) != tt.class {
				t.Errorf("react: %v, want %s", err, tt.class)
			}
		})
	}
	if n := len(srv.Calls("reactions.add")); n != 2 {
		t.Errorf("%d reactions.add calls, want only the 2 Slack had to decide", n)
	}
}

func TestReactTwiceIsOneReaction(t *testing.T) {
	srv := slacktest.NewServer(t)
	s := newSender(t, srv, srv.Token())
	cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "x"})
	d := deliver.Delivery{Intent: "react", Emoji: "👍", Thread: "C0GENERAL:" + cb.Event.TS}
	// The first attempt's answer was lost: Slack says already_reacted.
	for range 2 {
		if _, err := s.Deliver(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	// A retry that knows the reaction is done makes no call.
	d.Done = []string{"C0GENERAL:" + cb.Event.TS}
	if r, err := s.Deliver(t.Context(), d); err != nil || !slices.Equal(r.MessageIDs, d.Done) {
		t.Fatalf("retry: %v %v", r, err)
	}
	calls := srv.Calls("reactions.add")
	if len(calls) != 2 || calls[1].Error != "already_reacted" {
		t.Errorf("calls = %+v", calls)
	}
	if m, _ := srv.Message("C0GENERAL", cb.Event.TS); len(m.Reactions) != 1 || m.Reactions[0].Count != 1 {
		t.Errorf("reactions = %+v, want one", m.Reactions)
	}
}

func TestRateLimit(t *testing.T) {
	t.Run("a short Retry-After is waited out", func(t *testing.T) {
		srv := slacktest.NewServer(t)
		srv.RateLimitNext("chat.postMessage", 1, 1)
		if _, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: "x"}); err != nil {
			t.Fatal(err)
		}
		calls := srv.Calls("chat.postMessage")
		if len(calls) != 2 || calls[0].Status != http.StatusTooManyRequests || !calls[1].OK() {
			t.Fatalf("calls = %+v, want a 429 then a success", calls)
		}
		if gap := calls[1].Arrived.Sub(calls[0].Answered); gap < time.Second {
			t.Errorf("retried after %s, before Retry-After's 1s", gap)
		}
	})
	t.Run("a long one is handed back", func(t *testing.T) {
		srv := slacktest.NewServer(t)
		srv.RateLimitNext("chat.postMessage", 1, 120)
		_, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: "x"})
		var ra *envelope.RetryAfterError
		if !errors.As(err, &ra) || ra.Wait != 120*time.Second || envelope.ClassOf(err) != "overload_rejected" {
			t.Fatalf("deliver: %v, want a RetryAfterError of 120s", err)
		}
		if n := len(srv.Calls("chat.postMessage")); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
	})
	t.Run("reactions too", func(t *testing.T) {
		srv := slacktest.NewServer(t)
		cb := srv.UserMessage(slacktest.MessageEvent{Channel: "C0GENERAL", Text: "x"})
		srv.RateLimitNext("reactions.add", 1, 90)
		_, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Intent: "react", Emoji: "👍", Thread: "C0GENERAL:" + cb.Event.TS})
		var ra *envelope.RetryAfterError
		if !errors.As(err, &ra) || ra.Wait != 90*time.Second {
			t.Fatalf("react: %v, want a RetryAfterError of 90s", err)
		}
	})
}

func TestErrorClasses(t *testing.T) {
	delivertest.RunErrorCases(t, []delivertest.ErrorCase[*slacktest.Server]{
		{Name: "invalid_auth", Fault: func(s *slacktest.Server) { s.FailNext("chat.postMessage", 1, "invalid_auth") }, Class: "forbidden", Says: "Bot User OAuth Token"},
		{Name: "token_revoked", Fault: func(s *slacktest.Server) { s.FailNext("chat.postMessage", 1, "token_revoked") }, Class: "forbidden", Says: "still installed"},
		{Name: "missing_scope", Fault: func(s *slacktest.Server) { s.FailNext("chat.postMessage", 1, "missing_scope") }, Class: "forbidden", Says: "reinstall the app"},
		{Name: "channel_not_found", Fault: func(s *slacktest.Server) { s.FailChannel("C0DEFAULT", "channel_not_found") }, Class: "not_found", Says: "channel's id"},
		{Name: "not_in_channel", Fault: func(s *slacktest.Server) { s.FailChannel("C0DEFAULT", "not_in_channel") }, Class: "forbidden", Says: "/invite"},
		{Name: "is_archived", Fault: func(s *slacktest.Server) { s.FailChannel("C0DEFAULT", "is_archived") }, Class: "forbidden", Says: "unarchive"},
		{Name: "restricted_action", Fault: func(s *slacktest.Server) { s.FailNext("chat.postMessage", 1, "restricted_action") }, Class: "forbidden", Says: "permissions"},
		{Name: "msg_too_long", Fault: func(s *slacktest.Server) { s.FailNext("chat.postMessage", 1, "msg_too_long") }, Class: "validation_error", Says: "Herald bug"},
		{Name: "an unknown refusal", Fault: func(s *slacktest.Server) { s.FailNext("chat.postMessage", 1, "something_new") }, Class: "validation_error", Says: "something_new"},
		{Name: "internal_error", Fault: func(s *slacktest.Server) { s.FailNext("chat.postMessage", 1, "internal_error") }, Class: "target_unavailable", Says: "try again later"},
		{Name: "503", Fault: func(s *slacktest.Server) { s.FailHTTPNext("chat.postMessage", 1, http.StatusServiceUnavailable) }, Class: "target_unavailable", Says: "try again later"},
		{Name: "500", Fault: func(s *slacktest.Server) { s.FailHTTPNext("chat.postMessage", 1, http.StatusInternalServerError) }, Class: "target_unavailable", Says: "HTTP 500"},
		{Name: "unreachable", Fault: func(s *slacktest.Server) { s.Close() }, Class: "target_unavailable", Says: "check api_url"},
	}, func(t *testing.T) (*slacktest.Server, deliver.Sender, []string) {
		srv := slacktest.NewServer(t)
		return srv, newSender(t, srv, srv.Token()), []string{srv.Token()}
	})
}

func TestTokenNeverInErrors(t *testing.T) {
	const token = "xoxb-1234-5678-SECRETsecretSECRET"
	srv := slacktest.NewServer(t)
	// A token the workspace does not know is refused: the error names the
	// fix, never the token.
	s := newSender(t, srv, token)
	_, err := s.Deliver(t.Context(), deliver.Delivery{Message: "x"})
	if envelope.ClassOf(err) != "forbidden" || strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("deliver: %v", err)
	}
	srv.Close()
	_, err = s.Deliver(t.Context(), deliver.Delivery{Message: "x"})
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("deliver to a closed server: %v", err)
	}
	// A token that is not a Slack token is refused at start, unquoted.
	_, err = slack.New(config.Integration{ID: "s", Type: "slack", Settings: &slack.Config{TokenEnv: tokenEnv}}, deliver.Env{Getenv: func(string) string { return "not a token SECRET" }})
	if !errors.Is(err, config.ErrInvalid) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("New with a malformed token: %v", err)
	}
}

func TestNewChecksConfig(t *testing.T) {
	getenv := func(k string) string {
		if k == tokenEnv {
			return "xoxb-1-2-abc"
		}
		return ""
	}
	tests := []struct {
		name string
		in   config.Integration
		says string
	}{
		{"no token key", config.Integration{ID: "s", Type: "slack"}, "token_env or token_file"},
		{"token variable unset", config.Integration{ID: "s", Type: "slack", Settings: &slack.Config{TokenEnv: "UNSET_VARIABLE"}}, "UNSET_VARIABLE"},
		{"api_url not http", config.Integration{ID: "s", Type: "slack", Settings: &slack.Config{TokenEnv: tokenEnv, APIURL: "slack.com/api"}}, "api_url"},
		{"default channel by name", config.Integration{ID: "s", Type: "slack", Settings: &slack.Config{TokenEnv: tokenEnv, DefaultChannelID: "general"}}, "default_channel_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := slack.New(tt.in, deliver.Env{Getenv: getenv})
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("New: %v, want an error naming %s", err, tt.says)
			}
		})
	}
	// Without api_url, Slack's own.
	if _, err := slack.New(config.Integration{ID: "s", Type: "slack", Settings: &slack.Config{TokenEnv: tokenEnv}}, deliver.Env{Getenv: getenv}); err != nil {
		t.Errorf("New with defaults: %v", err)
	}
}

func TestRecipients(t *testing.T) {
	srv := slacktest.NewServer(t)
	srv.AddChannel("C0RANDOM", "random")
	tests := []struct {
		name, recipient, channel, class string
	}{
		{"channel id", "C0GENERAL", "C0GENERAL", ""},
		{"user id opens a direct message", "U0HUMAN01", "D0HUMAN01", ""},
		{"channel name", "#random", "C0RANDOM", ""},
		{"not an id", "general", "", "validation_error"},
		{"telegram chat id", "12345", "", "validation_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Recipient: tt.recipient, Message: "x"})
			if tt.class != "" {
				if envelope.ClassOf(err) != tt.class {
					t.Errorf("deliver: %v, want %s", err, tt.class)
				}
				return
			}
			if err != nil || len(r.MessageIDs) != 1 || !strings.HasPrefix(r.MessageIDs[0], tt.channel+":") {
				t.Errorf("deliver: %v %v, want a message in %s", r, err, tt.channel)
			}
		})
	}
	noDefault := newSender(t, srv, srv.Token(), func(in *config.Integration) { in.Settings.(*slack.Config).DefaultChannelID = "" })
	if _, err := noDefault.Deliver(t.Context(), deliver.Delivery{Message: "x"}); envelope.ClassOf(err) != "validation_error" || !strings.Contains(err.Error(), "default_channel_id") {
		t.Errorf("no recipient, no default: %v", err)
	}
}
