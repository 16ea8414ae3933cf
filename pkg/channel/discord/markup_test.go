package discord_test

import (
	"testing"

	"github.com/heraldhq/herald/pkg/channel/discord"
)

func TestMarkdown(t *testing.T) {
	tests := []struct{ name, md, want string }{
		{"emphasis", "**b** *i* ~~s~~ `c`", "**b** *i* ~~s~~ `c`"},
		{"heading", "# Title\n\ntext", "**Title**\n\ntext"},
		{"link", "[docs](https://example.com/a_b)", "[docs](https://example.com/a_b)"},
		{"bare url keeps its underscores", "see https://example.com/a_b_c now", "see https://example.com/a_b_c now"},
		{"markup in text is escaped", "2*3 a_b ~x~ `", `2\*3 a\_b \~x\~ \` + "`"},
		{"no mention or channel from text", "<@123> <#456> [x]", `\<@123\> \<#456\> \[x\]`},
		{"a heading mark at a line start", `\# not a heading`, `\# not a heading`},
		{"subtext mark", `-\# small`, `-\# small`},
		{"quote", "> said\n> twice", "> said\n> twice"},
		{"code in a quote keeps its lines", "> ```\n> > x\n> ```", "> ```\n> > x\n> ```"},
		{"code block with its language", "```go\nx := `a`\n```", "```go\nx := `a`\n```"},
		{"three backticks in a block are broken", "```\na ``` b\n```", "```\na `\u200b`\u200b` b\n```"},
		{"list stays a list", "- a\n- b", "- a\n- b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := discord.Markdown(tt.md); got != tt.want {
				t.Errorf("Markdown(%q) = %q, want %q", tt.md, got, tt.want)
			}
		})
	}
}
