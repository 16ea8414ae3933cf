package slack

import (
	"encoding/json"
	"strings"
	"testing"

	slackspec "github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

// FuzzChunks checks that whatever a model writes becomes messages Slack
// takes and that show what was written: each within slackspec.MaxMessage, using only
// Slack's three escapes, every < a link to a safe address, code blocks
// closed, nothing blank.
func FuzzChunks(f *testing.F) {
	for _, s := range []string{
		"Hello **world** & <you>", "# T\n\n> q\n> **b**\n\n```go\nx := `y`\n```", "[a|b](https://x.y/?a=1&b=2|c)",
		"<!channel> <@U1> ``` a ``` b", "**a\nb** _c_ ~~d~~ `e`", strings.Repeat("> **x**\n", 3000), strings.Repeat("word ", 5000),
		"<https://example.com> <mailto:a@b.c> [t](tg://resolve?domain=x)", "\x00\r\n\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		for i, c := range chunks(md) {
			if strings.TrimSpace(c.Text) == "" || strings.TrimSpace(c.Fallback) == "" {
				t.Fatalf("chunk %d is blank: %q / %q", i, c.Text, c.Fallback)
			}
			if n := utf16Len(c.Text); n > slackspec.MaxMessage {
				t.Fatalf("chunk %d holds %d units, over %d", i, n, slackspec.MaxMessage)
			}
			if n := strings.Count(c.Text, "```"); n%2 != 0 {
				t.Fatalf("chunk %d has %d fences: %q", i, n, c.Text)
			}
			for j := 0; j < len(c.Text); j++ {
				rest := c.Text[j:]
				switch c.Text[j] {
				case '&':
					if !strings.HasPrefix(rest, "&amp;") && !strings.HasPrefix(rest, "&lt;") && !strings.HasPrefix(rest, "&gt;") {
						t.Fatalf("chunk %d has a bare &: %q", i, c.Text)
					}
				case '<':
					end := strings.IndexByte(rest, '>')
					scheme, _, _ := strings.Cut(strings.ToLower(rest[1:]), ":")
					safe := scheme == "http" || scheme == "https" || scheme == "mailto" || scheme == "tg"
					if end < 0 || !safe || strings.ContainsAny(rest[1:end], "<\n") {
						t.Fatalf("chunk %d has a < that is not a safe link: %q", i, c.Text)
					}
				}
			}
		}
	})
}

// FuzzEvent checks that any Events API body either yields nothing or an
// ingress.v1 the bus takes.
func FuzzEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"event_callback","team_id":"T1","event":{"type":"message","channel":"C0A","user":"U1","text":"hi &amp; &lt;b&gt;","ts":"1700000000.000100","channel_type":"channel"}}`,
		`{"type":"event_callback","team_id":"T1","authorizations":[{"user_id":"U0BOT","is_bot":true}],"event":{"type":"app_mention","channel":"D0A","user":"U1","text":"<@U0BOT> hi","ts":"1.2","thread_ts":"1.1"}}`,
		`{"type":"event_callback","event":{"type":"message","subtype":"file_share","channel":"C0A","user":"U1","text":"","ts":"1.2","files":[{"id":"F1","name":"a.pdf","size":-5}]}}`,
		`{"type":"event_callback","event":{"type":"message","bot_id":"B1","channel":"C0A","text":"x","ts":"1.2"}}`,
		`{"type":"url_verification","challenge":"x"}`, `{"type":"event_callback","event":[]}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var cb callback
		if json.Unmarshal(body, &cb) != nil {
			return
		}
		in, why := toIngress("slack_main", &cb)
		if in == nil {
			if why == "" {
				t.Fatal("nothing, and no reason")
			}
			return
		}
		if err := envelope.Check(schemas.Ingress, in); err != nil {
			t.Fatalf("ingress from %s is invalid: %v", body, err)
		}
		if _, err := parseThread(in.RequestContext.SourceThreadIdentity); err != nil {
			t.Fatalf("its thread identity does not parse back: %v", err)
		}
	})
}

// FuzzInteraction checks that any interactivity payload either yields
// nothing or ingress.v1s the bus takes, each a click with callback_data.
func FuzzInteraction(f *testing.F) {
	for _, s := range []string{
		`{"type":"block_actions","user":{"id":"U1","username":"ann","team_id":"T1"},"team":{"id":"T1"},"channel":{"id":"D0A","name":"directmessage"},"container":{"type":"message","message_ts":"1700000000.000100","channel_id":"D0A"},"actions":[{"type":"button","action_id":"herald_1","value":"perm:allow:abcde","action_ts":"1700000001.000200"}]}`,
		`{"type":"block_actions","user":{"id":"U1"},"container":{"type":"message","message_ts":"1.2","channel_id":"C0A","thread_ts":"1.1"},"message":{"ts":"1.2","thread_ts":"1.1"},"trigger_id":"1.2.abc","actions":[{"type":"button","value":"ask:q1:1"},{"type":"button","value":"x","action_ts":"1.3"}]}`,
		`{"type":"block_actions","user":{"id":"U1"},"container":{"type":"view","view_id":"V1"},"actions":[{"type":"button","value":"x","action_ts":"1.3"}]}`,
		`{"type":"view_submission"}`, `{"type":"block_actions","team":null,"channel":null,"message":null,"actions":null}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var p interaction
		if json.Unmarshal(body, &p) != nil {
			return
		}
		ins, why := clicks("slack_main", &p)
		if len(ins) == 0 {
			if why == "" {
				t.Fatal("nothing, and no reason")
			}
			return
		}
		for _, in := range ins {
			if err := envelope.Check(schemas.Ingress, in); err != nil {
				t.Fatalf("ingress from %s is invalid: %v", body, err)
			}
			if _, err := parseThread(in.RequestContext.SourceThreadIdentity); err != nil {
				t.Fatalf("its thread identity does not parse back: %v", err)
			}
			if in.Meta["callback_data"] == "" || in.Meta["callback_query_id"] == "" {
				t.Fatalf("a click without callback_data or callback_query_id: %v", in.Meta)
			}
		}
	})
}
