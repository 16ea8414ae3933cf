package discord

import (
	discordspec "github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/pkg/markdown"
)

// minChunkLimit is where chunking stops shrinking its limit: below it, a
// chunk is sent as it came.
const minChunkLimit = 256

// chunks renders md as Discord markdown (pkg/channel/discord writes it),
// split into messages of at most limit UTF-16 code units each, every one
// well formed on its own; decorate
// adds what the sender puts around a chunk (an urgency mark, the subject,
// the butler's footer), given its index and the number of chunks.
//
// discordspec.Chunks cuts the message to fit; when the decorations make a
// chunk too long, the whole message is cut again with a smaller limit, so
// the chunks of a message are the same on every attempt.
func chunks(md string, limit int, decorate func(text string, i, n int) string) []string {
	doc := markdown.Parse(md)
	for cut := limit; ; cut = cut * 3 / 4 {
		parts := discordspec.Chunks(doc, cut)
		fits := true
		for i := range parts {
			parts[i] = decorate(parts[i], i, len(parts))
			if utf16Len(parts[i]) > limit {
				fits = false
			}
		}
		if fits || cut <= minChunkLimit {
			return parts
		}
	}
}

func utf16Len(s string) int { return markdown.UTF16Len(s) }
