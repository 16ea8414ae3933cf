package markdown_test

import (
	"testing"

	"github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/markdown"
)

// shortDocument is a typical reply: a heading, emphasis, code, a link, a
// list, a quote and a code block.
const shortDocument = "# Build report\n\n**main** passed in `3m12s`; see [the logs](https://ci.example.com/run/42).\n\n" +
	"- 2 < 3 & tests_passed\n- *flaky*: `TestRetry` (3 of 5)\n  - rerun: ~~no~~ yes\n\n> The deploy waits for you.\n> Allow it?\n\n```sh\nmake deploy ENV=prod\n```"

// BenchmarkRender renders a short reply and a long report (longDocument)
// for every channel, whole and in chunks.
func BenchmarkRender(b *testing.B) {
	renderers := []struct {
		name string
		f    func(md string)
	}{
		{"TelegramHTML", func(md string) { telegram.HTML(md) }},
		{"HTML", func(md string) { markdown.HTML(md) }},
		{"Slack", func(md string) { slack.Mrkdwn(md) }},
		{"Discord", func(md string) { discord.Markdown(md) }},
		{"TelegramChunks", func(md string) { telegram.Chunks(markdown.Parse(md), telegram.MaxMessage) }},
		{"SlackChunks", func(md string) { slack.Chunks(markdown.Parse(md), slack.MaxMessage) }},
		{"DiscordChunks", func(md string) { discord.Chunks(markdown.Parse(md), discord.MaxMessage) }},
	}
	for _, r := range renderers {
		for _, d := range []struct{ name, md string }{{"short", shortDocument}, {"long", longDocument()}} {
			b.Run(r.name+"/"+d.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r.f(d.md)
				}
			})
		}
	}
}
