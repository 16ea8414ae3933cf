package markdown_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/markdown"
)

func TestLimitFits(t *testing.T) {
	tests := []struct {
		name  string
		limit markdown.Limit
		md    string
		size  int
		fits  bool
	}{
		// "&" is 5 units of HTML, "😀" 2; the mark takes 3.
		{"telegram counts its HTML", markdown.TelegramLimit, "**" + strings.Repeat("&", 817) + "**", 7 + 817*5, true},
		{"telegram keeps room for the mark", markdown.TelegramLimit, strings.Repeat("😀", 2047), 4094, false},
		{"telegram at the limit", markdown.TelegramLimit, strings.Repeat("😀", 2046) + "a", 4093, true},
		{"slack counts its HTML", markdown.SlackLimit, strings.Repeat("<", 750), 3000, true},
		{"slack counts a space between backticks", markdown.SlackLimit, markdown.CodeBlock(strings.Repeat("`", 1495)), 11 + 2*1495, false},
		{"slack counts quote marks", markdown.SlackLimit, "> a\n> a\n> a", 25 + 5 + 2*2, true},
		{"whole counts bytes", markdown.WholeLimit, strings.Repeat("é", 32<<10), 64 << 10, true},
		{"whole over", markdown.WholeLimit, strings.Repeat("é", 32<<10) + ".", 64<<10 + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.limit.Size(tt.md); got != tt.size {
				t.Errorf("Size = %d, want %d", got, tt.size)
			}
			if got := tt.limit.Fits(tt.md); got != tt.fits {
				t.Errorf("Fits = %v, want %v", got, tt.fits)
			}
		})
	}
}
