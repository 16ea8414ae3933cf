package discord_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/discord"
	"github.com/heraldhq/herald/services/messenger/discord/discordtest"
)

// posted is every accepted POST …/messages call.
func posted(srv *discordtest.Server) []discordtest.Call {
	return srv.Accepted(discordtest.RouteCreateMessage)
}

func TestSend(t *testing.T) {
	srv := discordtest.NewServer(t)
	r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{
		Butler: "health", Topic: "safety", Subject: "Dose", Message: "Dose **taken** at 08:00", Urgency: "high",
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := posted(srv)
	if len(calls) != 1 || len(r.MessageIDs) != 1 || r.MessageIDs[0] != calls[0].Message {
		t.Fatalf("receipt %v, calls %+v: want one message, its id in the receipt", r.MessageIDs, calls)
	}
	c := calls[0]
	if c.Channel != discordtest.ChannelDefault {
		t.Errorf("sent to %s, want default_channel_id %s", c.Channel, discordtest.ChannelDefault)
	}
	if c.Authorization != "Bot "+srv.Token() || !strings.HasPrefix(c.UserAgent, "DiscordBot (") || c.ContentType != "application/json" {
		t.Errorf("headers: Authorization %q, User-Agent %q, Content-Type %q", c.Authorization, c.UserAgent, c.ContentType)
	}
	want := "‼️ **Dose**\nDose **taken** at 08:00\n-# health · safety"
	if c.Create.Content != want {
		t.Errorf("content %q, want %q", c.Create.Content, want)
	}
	if am := c.Create.AllowedMentions; am == nil || len(am.Parse) != 0 || am.RepliedUser {
		t.Errorf("allowed_mentions %+v, want nobody notified by the text", am)
	}
	if c.Create.Flags != 1<<2 {
		t.Errorf("flags %d, want SUPPRESS_EMBEDS (no link previews)", c.Create.Flags)
	}
	if c.Create.MessageReference != nil || len(c.Create.Components) != 0 {
		t.Errorf("a plain send with a reference or components: %+v", c.Create)
	}
}

func TestLowUrgencyIsSilent(t *testing.T) {
	srv := discordtest.NewServer(t)
	if _, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: "fyi", Urgency: "low"}); err != nil {
		t.Fatal(err)
	}
	if f := posted(srv)[0].Create.Flags; f != 1<<2|1<<12 {
		t.Errorf("flags %d, want SUPPRESS_EMBEDS|SUPPRESS_NOTIFICATIONS", f)
	}
}

func TestLongMessageIsSplitWellFormed(t *testing.T) {
	srv := discordtest.NewServer(t)
	var paras []string
	for range 6 {
		paras = append(paras, "**bold "+strings.Repeat("word ", 120)+"**\n\n```go\n"+strings.Repeat("fmt.Println(1)\n", 30)+"```")
	}
	r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: strings.Join(paras, "\n\n")})
	if err != nil {
		t.Fatal(err)
	}
	calls := posted(srv)
	if len(calls) < 3 || len(r.MessageIDs) != len(calls) {
		t.Fatalf("%d messages, receipt %v: want the message split", len(calls), r.MessageIDs)
	}
	for i, c := range calls {
		text := c.Create.Content
		if n := len([]rune(text)); n > discordtest.MaxContent {
			t.Errorf("chunk %d holds %d characters", i, n)
		}
		if strings.Count(text, "```")%2 != 0 || strings.Count(text, "**")%2 != 0 {
			t.Errorf("chunk %d leaves a code block or bold open:\n%s", i, text)
		}
		if footer := strings.HasSuffix(text, "\n-# health"); footer != (i == len(calls)-1) {
			t.Errorf("chunk %d has the footer: %v", i, footer)
		}
	}
}

func TestReply(t *testing.T) {
	srv := discordtest.NewServer(t)
	inChannel := srv.UserMessage(discordtest.MessageOptions{Content: "how full is the disk?"})
	thread := srv.NewThread(discordtest.ChannelGeneral, "disk")
	inThread := srv.UserMessage(discordtest.MessageOptions{Channel: thread, Content: "and now?"})
	dm := srv.DirectMessage(discordtest.HumanID, "hi")
	tests := []struct {
		name      string
		msg       discordtest.Message
		recipient string
		channel   string
		ref       bool
	}{
		{"a message in a channel is answered under it", inChannel, "", discordtest.ChannelGeneral, true},
		{"a message in a thread is answered in the thread", inThread, "", thread, true},
		{"a direct message is answered in it", dm, "", dm.ChannelID, true},
		{"a reply sent elsewhere is a message of its own", inChannel, discordtest.ChannelDefault, discordtest.ChannelDefault, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(posted(srv))
			_, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{
				Intent: "reply", Thread: tt.msg.ChannelID + ":" + tt.msg.ID, Recipient: tt.recipient, Message: "93% full",
			})
			if err != nil {
				t.Fatal(err)
			}
			c := posted(srv)[before]
			ref := c.Create.MessageReference
			if c.Channel != tt.channel || (ref != nil) != tt.ref || (ref != nil && ref.MessageID != tt.msg.ID) {
				t.Fatalf("posted to %s with reference %+v; want %s, reference to %s: %v", c.Channel, ref, tt.channel, tt.msg.ID, tt.ref)
			}
			if tt.ref {
				if m, _ := srv.Message(c.Channel, c.Message); m.Type != discordtest.MessageReply || !c.Create.AllowedMentions.RepliedUser {
					t.Errorf("message type %d, allowed_mentions %+v: want a reply notifying the person answered", m.Type, c.Create.AllowedMentions)
				}
			}
		})
	}
	t.Run("a thread identity that is not Discord's", func(t *testing.T) {
		_, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Intent: "reply", Thread: "C0GENERAL:1700000000.0001", Message: "x"})
		if envelope.ClassOf(err) != "validation_error" || !strings.Contains(err.Error(), "source_thread_identity") {
			t.Errorf("deliver: %v, want a validation error naming source_thread_identity", err)
		}
	})
}

func TestButtons(t *testing.T) {
	srv := discordtest.NewServer(t)
	actions := []envelope.Action{{Label: "Allow", Data: "perm:allow:abcde"}, {Label: "Deny", Data: "perm:deny:abcde"},
		{Label: "📎 Reply here", Data: "claim:x"}, {Label: "💬 Keep my chat", Data: "keep:x"}, {Label: "5", Data: "5"}, {Label: "6", Data: "6"}}
	long := strings.Repeat("word ", 500)
	_, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: long, Actions: actions})
	if err != nil {
		t.Fatal(err)
	}
	calls := posted(srv)
	if len(calls) != 2 || len(calls[0].Create.Components) != 0 {
		t.Fatalf("%d messages, the first with components %+v: want the buttons under the last only", len(calls), calls[0].Create.Components)
	}
	rows := calls[1].Create.Components
	if len(rows) != 2 || len(rows[0].Components) != 5 || len(rows[1].Components) != 1 {
		t.Fatalf("rows %+v, want 5 buttons then 1", rows)
	}
	styles := []int{3, 4, 2, 2, 2}
	for i, b := range rows[0].Components {
		if b.Type != 2 || b.Style != styles[i] || b.Label != actions[i].Label || b.CustomID != actions[i].Data {
			t.Errorf("button %d = %+v, want style %d, %q, %q", i, b, styles[i], actions[i].Label, actions[i].Data)
		}
	}
	for _, bad := range [][]envelope.Action{{{Label: "", Data: "x"}}, {{Label: "x", Data: strings.Repeat("d", 101)}}, make([]envelope.Action, 26)} {
		for i := range bad {
			if bad[i].Label == "" && bad[i].Data == "" {
				bad[i] = envelope.Action{Label: "b", Data: "d" + strings.Repeat("x", i)}
			}
		}
		if _, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: "x", Actions: bad}); envelope.ClassOf(err) != "validation_error" {
			t.Errorf("actions %.60v: %v, want validation_error", bad, err)
		}
	}
}

func TestReact(t *testing.T) {
	srv := discordtest.NewServer(t)
	srv.SetRateLimit(50, time.Second)
	srv.AddEmoji("herald", "1100000000000000777")
	m := srv.UserMessage(discordtest.MessageOptions{Content: "done?"})
	thread := m.ChannelID + ":" + m.ID
	tests := []struct {
		emoji, want, class string
	}{
		{"👍", "👍", ""},
		{"✅", "✅", ""},
		{"<:herald:1100000000000000777>", "herald", ""},
		{"herald:1100000000000000777", "herald", ""},
		{"thumbsup", "", "validation_error"},
		{"<:nope:1100000000000000778>", "", "validation_error"},
		{"two words", "", "validation_error"},
	}
	for _, tt := range tests {
		t.Run(tt.emoji, func(t *testing.T) {
			r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Intent: "react", Emoji: tt.emoji, Thread: thread})
			if tt.class != "" {
				if envelope.ClassOf(err) != tt.class {
					t.Fatalf("react: %v, want %s", err, tt.class)
				}
				return
			}
			if err != nil || len(r.MessageIDs) != 1 || r.MessageIDs[0] != m.ID {
				t.Fatalf("react: %v %v", r, err)
			}
			got, _ := srv.Message(m.ChannelID, m.ID)
			found := false
			for _, re := range got.Reactions {
				found = found || (re.Emoji.Name == tt.want && re.Me)
			}
			if !found {
				t.Errorf("reactions %+v, want the bot's %s", got.Reactions, tt.want)
			}
		})
	}
	t.Run("twice is one reaction", func(t *testing.T) {
		s := newSender(t, srv, srv.Token())
		for range 2 {
			if _, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "react", Emoji: "🎉", Thread: thread}); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := srv.Message(m.ChannelID, m.ID)
		for _, re := range got.Reactions {
			if re.Emoji.Name == "🎉" && re.Count != 1 {
				t.Errorf("🎉 counted %d times", re.Count)
			}
		}
	})
	t.Run("an unknown message", func(t *testing.T) {
		_, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Intent: "react", Emoji: "👍", Thread: m.ChannelID + ":1"})
		if envelope.ClassOf(err) != "not_found" || !strings.Contains(err.Error(), "source_thread_identity") {
			t.Errorf("react: %v, want not_found naming source_thread_identity", err)
		}
	})
}

func TestRecipients(t *testing.T) {
	srv := discordtest.NewServer(t)
	tests := []struct {
		name, recipient, class string
		dm                     bool // the message went to the person's direct message
	}{
		{"a channel id", discordtest.ChannelGeneral, "", false},
		{"a user id opens a direct message", discordtest.HumanID, "", true},
		{"a user written as a mention", "<@" + discordtest.OtherHumanID + ">", "", true},
		{"an id that is neither", "1100000000000000999", "not_found", false},
		{"not an id", "#general", "validation_error", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(posted(srv))
			r, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Recipient: tt.recipient, Message: "x"})
			if tt.class != "" {
				if envelope.ClassOf(err) != tt.class || !strings.Contains(err.Error(), strings.Trim(tt.recipient, "<@>")) {
					t.Errorf("deliver: %v, want %s naming the recipient", err, tt.class)
				}
				return
			}
			if err != nil || len(r.MessageIDs) != 1 {
				t.Fatalf("deliver: %v %v", r, err)
			}
			c := posted(srv)[before]
			user := strings.Trim(tt.recipient, "<@>")
			if got := c.Channel == srv.DMChannel(user) && c.Channel != ""; got != tt.dm {
				t.Errorf("posted to %s; in the direct message of %s: %v, want %v", c.Channel, user, got, tt.dm)
			}
		})
	}
	t.Run("a person's direct message is opened once", func(t *testing.T) {
		s := newSender(t, srv, srv.Token())
		before := len(srv.Calls(discordtest.RouteCreateDM))
		for range 3 {
			if _, err := s.Deliver(t.Context(), deliver.Delivery{Recipient: discordtest.HumanID, Message: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(srv.Calls(discordtest.RouteCreateDM)) - before; n != 1 {
			t.Errorf("opened the direct message %d times, want 1", n)
		}
	})
	t.Run("no recipient and no default", func(t *testing.T) {
		s := newSender(t, srv, srv.Token(), func(in *config.Integration) { in.Settings.(*discord.Config).DefaultChannelID = "" })
		if _, err := s.Deliver(t.Context(), deliver.Delivery{Message: "x"}); envelope.ClassOf(err) != "validation_error" || !strings.Contains(err.Error(), "default_channel_id") {
			t.Errorf("deliver: %v", err)
		}
	})
}

func TestRateLimit(t *testing.T) {
	t.Run("a short retry_after is waited out", func(t *testing.T) {
		srv := discordtest.NewServer(t)
		srv.RateLimitNext(discordtest.RouteCreateMessage, 1, 300*time.Millisecond, false)
		if _, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: "x"}); err != nil {
			t.Fatal(err)
		}
		calls := srv.Calls(discordtest.RouteCreateMessage)
		if len(calls) != 2 || calls[0].Status != http.StatusTooManyRequests || !calls[1].OK() {
			t.Fatalf("calls = %+v, want a 429 then a success", calls)
		}
		if gap := calls[1].Arrived.Sub(calls[0].Answered); gap < 300*time.Millisecond {
			t.Errorf("retried after %s, before retry_after's 300ms", gap)
		}
	})
	t.Run("a long one is handed back", func(t *testing.T) {
		srv := discordtest.NewServer(t)
		srv.RateLimitNext(discordtest.RouteCreateMessage, 1, 90*time.Second, true)
		_, err := newSender(t, srv, srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: "x"})
		var ra *envelope.RetryAfterError
		if !errors.As(err, &ra) || ra.Wait != 90*time.Second || envelope.ClassOf(err) != "overload_rejected" {
			t.Fatalf("deliver: %v, want a RetryAfterError of 90s", err)
		}
		if n := len(srv.Calls(discordtest.RouteCreateMessage)); n != 1 {
			t.Errorf("%d calls, want 1", n)
		}
	})
	t.Run("a spent bucket is waited for instead of collecting a 429", func(t *testing.T) {
		srv := discordtest.NewServer(t)
		srv.SetRateLimit(2, 400*time.Millisecond)
		s := newSender(t, srv, srv.Token())
		for range 3 {
			if _, err := s.Deliver(t.Context(), deliver.Delivery{Message: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		calls := srv.Calls(discordtest.RouteCreateMessage)
		for _, c := range calls {
			if c.Status == http.StatusTooManyRequests {
				t.Fatalf("calls %+v: a 429 though the headers said the bucket was spent", calls)
			}
		}
		if len(calls) != 3 || calls[2].Arrived.Before(calls[0].Arrived.Add(300*time.Millisecond)) {
			t.Errorf("the third call came %s after the first, before the bucket reset", calls[2].Arrived.Sub(calls[0].Arrived))
		}
	})
}

func TestErrorClasses(t *testing.T) {
	delivertest.RunErrorCases(t, []delivertest.ErrorCase[*discordtest.Server]{
		{Name: "unknown channel", Fault: func(s *discordtest.Server) {
			s.FailChannel(discordtest.ChannelDefault, 404, 10003, "Unknown Channel")
		}, Class: "not_found", Says: "Copy Channel ID"},
		{Name: "missing access", Fault: func(s *discordtest.Server) { s.FailChannel(discordtest.ChannelDefault, 403, 50001, "Missing Access") }, Class: "forbidden", Says: "View Channel"},
		{Name: "missing permissions", Fault: func(s *discordtest.Server) {
			s.FailNext(discordtest.RouteCreateMessage, 1, 403, 50013, "Missing Permissions")
		}, Class: "forbidden", Says: "Send Messages"},
		{Name: "cannot message the user", Fault: func(s *discordtest.Server) {
			s.FailNext(discordtest.RouteCreateMessage, 1, 403, 50007, "Cannot send messages to this user")
		}, Class: "forbidden", Says: "direct messages"},
		{Name: "archived thread", Fault: func(s *discordtest.Server) {
			s.FailNext(discordtest.RouteCreateMessage, 1, 400, 50083, "Thread is archived")
		}, Class: "forbidden", Says: "unarchive"},
		{Name: "invalid form body", Fault: func(s *discordtest.Server) {
			s.FailNext(discordtest.RouteCreateMessage, 1, 400, 50035, "Invalid Form Body")
		}, Class: "validation_error", Says: "Herald bug"},
		{Name: "an unknown refusal", Fault: func(s *discordtest.Server) {
			s.FailNext(discordtest.RouteCreateMessage, 1, 400, 99999, "Something new")
		}, Class: "validation_error", Says: "Something new"},
		{Name: "502 from Cloudflare", Fault: func(s *discordtest.Server) { s.FailHTTPNext(discordtest.RouteCreateMessage, 1, 502) }, Class: "target_unavailable", Says: "try again later"},
		{Name: "500 JSON", Fault: func(s *discordtest.Server) {
			s.FailNext(discordtest.RouteCreateMessage, 1, 500, 0, "500: Internal Server Error")
		}, Class: "target_unavailable", Says: "try again later"},
		{Name: "unreachable", Fault: func(s *discordtest.Server) { s.Close() }, Class: "target_unavailable", Says: "check api_url"},
	}, func(t *testing.T) (*discordtest.Server, deliver.Sender, []string) {
		srv := discordtest.NewServer(t)
		return srv, newSender(t, srv, srv.Token()), []string{srv.Token()}
	})
}

func TestTokenNeverInErrors(t *testing.T) {
	srv := discordtest.NewServer(t)
	wrong := "MTEwMDAwMDAwMDAwMDAwMDkwMA.GhK3pA.SECRETsecretSECRETsecretSECRETsecret12"
	s := newSender(t, srv, wrong)
	_, err := s.Deliver(t.Context(), deliver.Delivery{Message: "x"})
	if envelope.ClassOf(err) != "forbidden" || !strings.Contains(err.Error(), tokenEnv) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("deliver with a wrong token: %v, want forbidden naming %s, without the token", err, tokenEnv)
	}
	srv.Close()
	if _, err = s.Deliver(t.Context(), deliver.Delivery{Message: "x"}); err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("deliver to a closed server: %v", err)
	}
	// A token that is not a Discord bot token is refused at start, unquoted.
	_, err = discord.New(integration(srv), deliver.Env{Getenv: func(string) string { return "not a token SECRET" }})
	if !errors.Is(err, config.ErrInvalid) || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), `"discord_main"`) {
		t.Errorf("New with a malformed token: %v", err)
	}
	// "Bot <token>", as the header has it, is taken.
	if _, err := newSender(t, srv, "Bot "+srv.Token()).Deliver(t.Context(), deliver.Delivery{Message: "x"}); envelope.ClassOf(err) != "target_unavailable" {
		t.Errorf("a token written with its Bot prefix: %v", err)
	}
}

func TestNewChecksConfig(t *testing.T) {
	srv := discordtest.NewServer(t)
	getenv := func(k string) string {
		if k == tokenEnv {
			return srv.Token()
		}
		return ""
	}
	tests := []struct {
		name string
		cfg  discord.Config
		says string
	}{
		{"no token key", discord.Config{}, "token_env or token_file"},
		{"token variable unset", discord.Config{TokenEnv: "UNSET_VARIABLE"}, "UNSET_VARIABLE"},
		{"api_url not http", discord.Config{TokenEnv: tokenEnv, APIURL: "discord.com/api"}, "api_url"},
		{"gateway_url not ws", discord.Config{TokenEnv: tokenEnv, GatewayURL: "https://gateway.discord.gg"}, "gateway_url"},
		{"default channel by name", discord.Config{TokenEnv: tokenEnv, DefaultChannelID: "#general"}, "default_channel_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			_, err := discord.New(config.Integration{ID: "d", Type: "discord", Settings: &cfg}, deliver.Env{Getenv: getenv})
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("New: %v, want an error naming %s", err, tt.says)
			}
		})
	}
	c := discord.Config{}
	c.Defaults()
	if c.TokenEnv != discord.DefaultTokenEnv {
		t.Errorf("token_env defaults to %q", c.TokenEnv)
	}
	if _, err := discord.New(config.Integration{ID: "d", Type: "discord", Settings: &discord.Config{TokenEnv: tokenEnv}}, deliver.Env{Getenv: getenv}); err != nil {
		t.Errorf("New with defaults: %v", err)
	}
}

// TestTyping: the sign of life shows the bot typing in the channel (or
// thread) of the message it is about, by Discord's typing route.
func TestTyping(t *testing.T) {
	srv := discordtest.NewServer(t)
	thread := srv.NewThread(discordtest.ChannelGeneral, "disk")
	m := srv.UserMessage(discordtest.MessageOptions{Channel: thread, Content: "and now?"})
	typer, ok := newSender(t, srv, srv.Token()).(deliver.Typer)
	if !ok {
		t.Fatal("the Discord sender cannot show typing")
	}
	if err := typer.Typing(t.Context(), deliver.Delivery{Intent: "reply", Thread: m.ChannelID + ":" + m.ID}); err != nil {
		t.Fatal(err)
	}
	calls := srv.Accepted(discordtest.RouteTyping)
	if len(calls) != 1 || calls[0].Channel != thread {
		t.Fatalf("typing calls %+v, want one in thread %s", calls, thread)
	}
	if err := typer.Typing(t.Context(), deliver.Delivery{Intent: "reply", Thread: "1100000000000000999:1100000000000000998"}); err == nil {
		t.Error("typing in a channel the bot cannot see: no error")
	}
}
