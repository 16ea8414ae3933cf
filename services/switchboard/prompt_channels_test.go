package switchboard_test

import (
	"encoding/json"
	"html"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/heraldhq/herald/pkg/approval"
	slackspec "github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/channel/spec"
	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/markdown"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/slack"
	"github.com/heraldhq/herald/services/messenger/slack/slacktest"
	tgsender "github.com/heraldhq/herald/services/messenger/telegram"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// bashPreview is the input_preview Claude Code 2.1.332 sends for a Bash
// call (truncateForPreview): the input as { "key": value, ... } in JSON
// without HTML escapes, runs of whitespace made one space.
func bashPreview(command, description string) string {
	field := func(v string) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		return strings.TrimSuffix(b.String(), "\n")
	}
	s := `{ "command": ` + field(command) + `, "description": ` + field(description) + ` }`
	return regexp.MustCompile(`\s{2,}`).ReplaceAllString(s, " ")
}

// claudeCut is Claude Code's cut of a text past 3,500 code points: its first
// 2,000 and its last 1,500 around a marker line.
func claudeCut(s string) string {
	r := []rune(s)
	if len(r) <= 3500 {
		return s
	}
	n := len(r) - 3500
	return string(r[:2000]) + "\n⋯ " + strconv.Itoa(n) + " code points elided ⋯\n" + string(r[len(r)-1500:])
}

// longCommand is a shell command of about 8,000 code points, dense with the
// characters that HTML escaping makes longer.
func longCommand() string {
	var b strings.Builder
	b.WriteString("cd /srv/app && echo BEGIN-OF-COMMAND")
	for i := range 60 {
		b.WriteString(" && gzip -9 logs/" + strconv.Itoa(i) + ".log 2>&1 >> /tmp/archive.log && test -s <(ls logs) || exit 1")
	}
	b.WriteString(" && echo END-OF-COMMAND")
	return b.String()
}

// sent delivers md to a channel of one type as the messenger would, and
// returns each message as its reader sees it. Channels that split a long
// message are run through their real sender against their fake; the others
// show a message whole, rendered as they render it.
type sent func(t *testing.T, md string) []string

var sentOn = map[string]sent{
	"telegram": sentOnTelegram,
	"slack":    sentOnSlack,
	"email":    func(_ *testing.T, md string) []string { return []string{htmlText(markdown.HTML(md))} },
	"web":      func(_ *testing.T, md string) []string { return []string{htmlText(markdown.HTML(md))} },
}

// sentOnOther is what a webhook or the log shows: the markdown itself.
func sentOnOther(_ *testing.T, md string) []string { return []string{md} }

var tags = regexp.MustCompile(`<[^>]*>`)

func htmlText(h string) string { return html.UnescapeString(tags.ReplaceAllString(h, "")) }

// promptDelivery is the delivery the butler makes of a prompt.
func promptDelivery(md string) deliver.Delivery {
	return deliver.Delivery{
		Intent: "send", Message: md, Urgency: "high", Topic: "safety", Butler: "health",
		Actions: []envelope.Action{{Label: "Allow", Data: "perm:allow:abcde"}, {Label: "Deny", Data: "perm:deny:abcde"}},
	}
}

// sentOnTelegram is what Telegram shows of each sendMessage: the text after
// entity parsing.
func sentOnTelegram(t *testing.T, md string) []string {
	t.Helper()
	msgs := telegramMessages(t, md)
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Text
	}
	return out
}

func telegramMessages(t *testing.T, md string) []*telegramtest.Message {
	t.Helper()
	srv := telegramtest.NewServer(t)
	s, err := tgsender.New(config.Integration{ID: "tg_main", Type: "telegram", Settings: &tgsender.Config{TokenEnv: "TG_TOKEN", APIURL: srv.URL(), DefaultChat: "42"}},
		deliver.Env{Getenv: func(string) string { return srv.Token() }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(t.Context(), promptDelivery(md)); err != nil {
		t.Fatalf("Telegram refused the prompt: %v", err)
	}
	var out []*telegramtest.Message
	for _, c := range srv.Calls("sendMessage") {
		if n := utf16Len(c.Params["text"]); n > tgsender.MaxMessageLength {
			t.Errorf("a message of %d UTF-16 units of HTML, over Telegram's %d", n, tgsender.MaxMessageLength)
		}
		out = append(out, c.Message)
	}
	return out
}

// sentOnSlack is the text of each message posted, Slack's escapes undone.
func sentOnSlack(t *testing.T, md string) []string {
	t.Helper()
	srv := slacktest.NewServer(t)
	s, err := slack.New(config.Integration{ID: "slack_main", Type: "slack", Settings: &slack.Config{TokenEnv: "SLACK_TOKEN", APIURL: srv.URL(), DefaultChannelID: "C0DEFAULT"}},
		deliver.Env{Getenv: func(string) string { return srv.Token() }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliver(t.Context(), promptDelivery(md)); err != nil {
		t.Fatalf("Slack refused the prompt: %v", err)
	}
	unescape := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&", "\u200b", "")
	var out []string
	for _, c := range srv.Calls("chat.postMessage") {
		// A message with buttons shows its text in a section block.
		m, _ := srv.Message(c.Channel, c.TS)
		var texts []string
		for _, b := range m.DecodedBlocks() {
			if b.Type == "section" && b.Text != nil {
				texts = append(texts, b.Text.Text)
			}
		}
		for _, a := range m.Attachments {
			if a.Text != "" {
				texts = append(texts, a.Text)
			}
		}
		for _, text := range texts {
			if n := utf16Len(text); n > slackspec.MaxMessage {
				t.Errorf("a message of %d UTF-16 units, over the Slack sender's %d", n, slackspec.MaxMessage)
			}
			out = append(out, unescape.Replace(text))
		}
	}
	return out
}

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

// TestChannelLimitsAreTheSenders: the limits the butler fits a prompt to
// are those the senders split at (Telegram's, Slack's and Discord's are
// declared once, in pkg/markdown).
func TestChannelLimitsAreTheSenders(t *testing.T) {
	tests := []struct {
		name      string
		got, want int
	}{
		{"whole", spec.WholeLimit.Max, envelope.MaxMessageBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("pkg/markdown says %d, the sender %d", tt.got, tt.want)
			}
		})
	}
}

// TestLongCommandPromptIsOneMessage: on every channel a permission prompt
// for a long shell command is one message within the channel's limit, which
// shows the start and the end of the command with one marker between them
// whose count is honest.
func TestLongCommandPromptIsOneMessage(t *testing.T) {
	full := bashPreview(longCommand(), "Archive the logs")
	previews := []struct {
		name    string
		preview string
	}{
		{"as Claude Code sends a Bash call", full},
		{"cut by Claude Code", claudeCut(full)},
	}
	fullRunes := []rune(full)
	start, end := string(fullRunes[:40]), string(fullRunes[len(fullRunes)-40:])
	for _, typ := range config.ChannelTypes {
		for _, p := range previews {
			t.Run(typ+"/"+p.name, func(t *testing.T) {
				req := approval.Request{ID: "abcde", ToolName: "Bash", Description: "Run shell command", InputPreview: p.preview, CreatedAt: created, ExpiresAt: created.Add(10 * time.Minute)}
				md := approval.Prompt("health", req, config.MessageLimit(typ))
				if lim := config.MessageLimit(typ); !lim.Fits(md) {
					t.Errorf("the prompt measures %d of %d", lim.Size(md)+lim.Mark, lim.Max)
				}
				markers := checkHonest(t, md, full)
				if cuts := config.MessageLimit(typ).Max < spec.WholeLimit.Max; cuts && markers == 0 {
					t.Errorf("nothing was cut for %s", typ)
				}
				show, ok := sentOn[typ]
				if !ok {
					show = sentOnOther
				}
				msgs := show(t, md)
				if len(msgs) != 1 {
					t.Fatalf("the prompt went as %d messages, want 1", len(msgs))
				}
				m := msgs[0]
				for _, want := range []string{"Bash", "Run shell command", start, end, `Reply "yes abcde" or "no abcde"`} {
					if !strings.Contains(m, want) {
						t.Errorf("the message does not show %q:\n%s", want, m)
					}
				}
				if n := len(markerText.FindAllString(m, -1)); n != markers || n > 1 {
					t.Errorf("the message shows %d elision markers, want %d, at most one:\n%s", n, markers, m)
				}
			})
		}
	}
}

var markerText = regexp.MustCompile(`⋯ ([0-9]+) code points? elided ⋯`)

// checkHonest checks md's preview against the full preview: its first code
// block starts it, its last ends it, and the code shown and the code points
// the markers count add up to all of it. It returns how many markers md has.
func checkHonest(t *testing.T, md, full string) (markers int) {
	t.Helper()
	blocks, markers, elided := previewOf(md)
	if len(blocks) == 0 {
		t.Fatalf("no code block in %q", md)
	}
	shown := 0
	for _, b := range blocks {
		shown += len([]rune(b))
	}
	if !strings.HasPrefix(full, blocks[0]) || !strings.HasSuffix(full, blocks[len(blocks)-1]) {
		t.Errorf("the preview shows %.40q … %.40q, not the start and end of the command", blocks[0], blocks[len(blocks)-1])
	}
	if total := len([]rune(full)); shown+elided != total {
		t.Errorf("%d code points shown + %d said elided = %d, want the preview's %d", shown, elided, shown+elided, total)
	}
	return markers
}

// previewOf reads back the code blocks of a prompt's markdown, its markers
// and the code points they say were left out.
func previewOf(md string) (blocks []string, markers, elided int) {
	var fence string
	var body []string
	for line := range strings.SplitSeq(md, "\n") {
		switch {
		case fence == "" && strings.HasPrefix(line, "```") && strings.Trim(line, "`") == "":
			fence, body = line, nil
		case fence != "" && line == fence:
			blocks = append(blocks, strings.Join(body, "\n"))
			fence = ""
		case fence != "":
			body = append(body, line)
		default:
			if m := markerText.FindStringSubmatch(line); m != nil && m[0] == line {
				n, _ := strconv.Atoi(m[1])
				markers, elided = markers+1, elided+n
			}
		}
	}
	return blocks, markers, elided
}

// TestPromptShowsClientTextLiterally: markdown and HTML in what the client
// sends are shown as written, never rendered, on the channels' real
// converters.
func TestPromptShowsClientTextLiterally(t *testing.T) {
	const desc = "**x** <b>bold</b> [link](http://evil) `code` _i_"
	req := approval.Request{ID: "abcde", ToolName: "mcp__evil__<i>run</i>", Description: desc, InputPreview: "ls", CreatedAt: created, ExpiresAt: created.Add(10 * time.Minute)}
	md := approval.Prompt("health", req, telegramspec.Limit)

	t.Run("telegram HTML", func(t *testing.T) {
		h := telegramspec.HTML(md)
		for _, want := range []string{"<b>mcp__evil__&lt;i&gt;run&lt;/i&gt;</b>", ": **x** &lt;b&gt;bold&lt;/b&gt; [link](http://evil) `code` _i_\n"} {
			if !strings.Contains(h, want) {
				t.Errorf("Telegram HTML has no %q:\n%s", want, h)
			}
		}
		for _, bad := range []string{"<b>x</b>", "<b>bold</b>", "<a ", "<code>", "<i>"} {
			if strings.Contains(h, bad) {
				t.Errorf("Telegram HTML has %q:\n%s", bad, h)
			}
		}
	})
	t.Run("telegram as shown", func(t *testing.T) {
		msgs := telegramMessages(t, md)
		if len(msgs) != 1 {
			t.Fatalf("%d messages, want 1", len(msgs))
		}
		m := msgs[0]
		if want := "health asks to run mcp__evil__<i>run</i>: " + desc; !strings.Contains(m.Text, want) {
			t.Errorf("Telegram shows %q, want it to contain %q", m.Text, want)
		}
		var got []string
		text := utf16.Encode([]rune(m.Text))
		for _, e := range m.Entities {
			got = append(got, e.Type+" "+string(utf16.Decode(text[e.Offset:e.Offset+e.Length])))
		}
		if want := []string{"bold health", "bold mcp__evil__<i>run</i>", "pre ls"}; !slices.Equal(got, want) {
			t.Errorf("Telegram formats %q, want %q", got, want)
		}
	})
	t.Run("email HTML", func(t *testing.T) {
		h, _, _ := strings.Cut(markdown.HTML(md), "\n") // the first paragraph
		if want := "**x** &lt;b&gt;bold&lt;/b&gt; [link](http://evil) `code` _i_"; !strings.Contains(h, want) {
			t.Errorf("HTML has no %q:\n%s", want, h)
		}
		for _, bad := range []string{"<strong>x</strong>", "<a ", "<code>", "<em>"} {
			if strings.Contains(h, bad) {
				t.Errorf("HTML has %q:\n%s", bad, h)
			}
		}
	})
	t.Run("slack mrkdwn", func(t *testing.T) {
		m := slackspec.Mrkdwn(md)
		if want := "&lt;b&gt;bold&lt;/b&gt; [link](http://evil)"; !strings.Contains(m, want) {
			t.Errorf("mrkdwn has no %q:\n%s", want, m)
		}
		if strings.Contains(m, "<http") {
			t.Errorf("mrkdwn links:\n%s", m)
		}
	})
}

// TestPreviewCannotLeaveItsCodeBlock: whatever the preview holds, it is
// code, and the prompt's own last line comes after it.
func TestPreviewCannotLeaveItsCodeBlock(t *testing.T) {
	tests := []struct {
		name    string
		preview string
		want    string // the Telegram HTML of the code block
	}{
		{"a fence", "echo hi\n```\n**bold** <b>x</b>\n```\nrm -rf /", "<pre>echo hi\n```\n**bold** &lt;b&gt;x&lt;/b&gt;\n```\nrm -rf /</pre>"},
		{"a longer fence", "````\n# heading\n````", "<pre>````\n# heading\n````</pre>"},
		{"an indented fence", "a\n   ```\n[x](http://evil)", "<pre>a\n   ```\n[x](http://evil)</pre>"},
		{"a tilde fence", "~~~\n> quote\n~~~", "<pre>~~~\n&gt; quote\n~~~</pre>"},
		{"backticks at the end", "echo ```", "<pre>echo ```</pre>"},
	}
	const tail = "\n\nReply \"yes abcde\" or \"no abcde\" (expires in 10m0s)."
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := approval.Request{ID: "abcde", ToolName: "Bash", Description: "Run shell command", InputPreview: tt.preview, CreatedAt: created, ExpiresAt: created.Add(10 * time.Minute)}
			md := approval.Prompt("health", req, telegramspec.Limit)
			want := "🔐 <b>health</b> asks to run <b>Bash</b>: Run shell command\n\n" + tt.want + tail
			if got := telegramspec.HTML(md); got != want {
				t.Errorf("Telegram HTML\n got: %q\nwant: %q", got, want)
			}
			m := slackspec.Mrkdwn(md)
			if !strings.HasSuffix(m, "```"+tail) || strings.Count(m, "```") != 2 {
				t.Errorf("mrkdwn has a code block other than the preview's:\n%s", m)
			}
		})
	}
}

// TestPromptSharesTheRoom: when a prompt is too long, the description gives
// way first, but keeps half of the message against a long preview.
func TestPromptSharesTheRoom(t *testing.T) {
	tests := []struct {
		name        string
		desc        string
		preview     string
		descAtLeast int // code points of the description shown
		descAtMost  int
		previewCut  bool
	}{
		{"both short", "Delete build outputs", "rm -rf ./bin", 20, 20, false},
		{"a short preview leaves the rest to the description", strings.Repeat("a", 5000), "rm -rf ./bin", 3900, 4096, false},
		{"a long preview leaves half to the description", strings.Repeat("a", 5000), strings.Repeat("b", 5000), 1800, 2048, true},
		{"a short description leaves the rest to the preview", "Run shell command", strings.Repeat("b", 5000), 17, 17, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := approval.Request{ID: "abcde", ToolName: "Bash", Description: tt.desc, InputPreview: tt.preview, CreatedAt: created, ExpiresAt: created.Add(10 * time.Minute)}
			md := approval.Prompt("health", req, telegramspec.Limit)
			if !telegramspec.Limit.Fits(md) {
				t.Fatalf("the prompt does not fit: %d", telegramspec.Limit.Size(md))
			}
			line, _, _ := strings.Cut(md, "\n")
			desc := strings.TrimPrefix(line, "🔐 **health** asks to run **Bash**: ")
			shown := len([]rune(strings.Replace(markerText.ReplaceAllString(desc, ""), "  ", "", 1)))
			if shown < tt.descAtLeast || shown > tt.descAtMost {
				t.Errorf("%d code points of the description shown, want %d to %d", shown, tt.descAtLeast, tt.descAtMost)
			}
			if _, markers, _ := previewOf(md); (markers > 0) != tt.previewCut {
				t.Errorf("the preview has %d markers, want it cut: %v", markers, tt.previewCut)
			}
		})
	}
}

// created is when the prompts of these tests were opened.
var created = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
