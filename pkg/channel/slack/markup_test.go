package slack_test

import (
	"testing"

	"github.com/heraldhq/herald/pkg/channel/slack"
)

func TestMrkdwn(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"bold", "**bold** and __bold__", "*bold* and *bold*"},
		{"italic", "*it* and _it_", "_it_ and _it_"},
		{"strike", "~~gone~~", "~gone~"},
		{"nested", "**bold _and italic_**", "*bold _and italic_*"},
		{"escapes", "a & b < c > d", "a &amp; b &lt; c &gt; d"},
		{"no mentions from text", "<!channel> <@U123> <https://evil.example|click>", "&lt;!channel&gt; &lt;@U123&gt; <https://evil.example%7Cclick>"},
		{"code", "run `make test` now", "run `make test` now"},
		{"code keeps markup literal", "`**x** & <y>`", "`**x** &amp; &lt;y&gt;`"},
		{"backtick in code", "``a`b``", "`aˋb`"},
		{"fence", "```go\nfmt.Println(\"<hi>\")\n```", "```\nfmt.Println(\"&lt;hi&gt;\")\n```"},
		{"fence holding backticks", "````\n```\n````", "```\n`\u200b`\u200b`\n```"},
		{"link", "[the docs](https://example.com/a?b=1&c=2)", "<https://example.com/a?b=1&amp;c=2|the docs>"},
		{"link text plain", "[**bold** link](https://example.com)", "<https://example.com|bold link>"},
		{"pipe in link", "[x](https://example.com/a|b)", "<https://example.com/a%7Cb|x>"},
		{"autolink", "<https://example.com>", "<https://example.com>"},
		{"bare URL left to Slack", "see https://example.com", "see https://example.com"},
		{"unsafe link scheme", "[x](javascript:alert(1))", "x"},
		{"heading", "# Title\n\ntext", "*Title*\n\ntext"},
		{"bold across lines", "**one\ntwo**", "*one*\n*two*"},
		{"quote", "> quoted\n> more\n\nafter", "> quoted\n> more\n\nafter"},
		{"list", "- one\n- two", "- one\n- two"},
		{"emoji shortcodes stay", "done :white_check_mark:", "done :white_check_mark:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := slack.Mrkdwn(tt.md); got != tt.want {
				t.Errorf("Mrkdwn(%q) =\n%q\nwant\n%q", tt.md, got, tt.want)
			}
		})
	}
}
