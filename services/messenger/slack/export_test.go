package slack

import (
	"github.com/heraldhq/herald/pkg/markdown"
)

// ChunkTexts are the messages md is sent as: their mrkdwn and their plain
// fallback.
func ChunkTexts(md string) (texts, fallbacks []string) {
	for _, c := range chunks(md) {
		texts = append(texts, c.Text)
		fallbacks = append(fallbacks, c.Fallback)
	}
	return texts, fallbacks
}

func utf16Len(s string) int { return markdown.UTF16Len(s) }
