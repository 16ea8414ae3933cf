package channel_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/markdown"
)

func TestLimitFits(t *testing.T) {
	tests := []struct {
		name  string
		limit spec.Limit
		md    string
		size  int
		fits  bool
	}{
		// "&" is 5 units of HTML, "😀" 2; the mark takes 3.
		{"telegram counts its HTML", telegram.Limit, "**" + strings.Repeat("&", 817) + "**", 7 + 817*5, true},
		{"telegram keeps room for the mark", telegram.Limit, strings.Repeat("😀", 2047), 4094, false},
		{"telegram at the limit", telegram.Limit, strings.Repeat("😀", 2046) + "a", 4093, true},
		{"slack counts its mrkdwn", slack.Limit, strings.Repeat("<", 750), 3000, true},
		{"slack counts a space between backticks", slack.Limit, markdown.CodeBlock(strings.Repeat("`", 1497)), 8 + 2*1497 - 1, false},
		{"slack counts quote marks", slack.Limit, "> a\n> a\n> a", 11, true},
		{"whole counts bytes", spec.WholeLimit, strings.Repeat("é", 32<<10), 64 << 10, true},
		{"whole over", spec.WholeLimit, strings.Repeat("é", 32<<10) + ".", 64<<10 + 1, false},
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
