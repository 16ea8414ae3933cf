package markdown_test

import (
	"testing"

	"github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/markdown"
)

// seeds are small documents that reach every construct and the awkward
// corners between them.
var seeds = []string{
	"",
	"**bold** *it* __b__ _i_ ~~s~~ `code` [l](https://x.y) <https://a.b>",
	"# head\n\npara\nline\n\n- a\n  - b\n1. c\n\n> q\n>> qq\n\n```go\nx\n```\n\n---",
	"***a** b* _a __b__ c_ **a *b* c** *a**b*c**",
	"<script>alert(1)</script> & &amp; \" '",
	"[x](javascript:alert(1)) [y](https://a.b/\"q\") [`c`](tg://user?id=1) [[n](http://n)]",
	"snake_case_name 2 * 3 a*b*c ~5 ~~~x~~~ \\*esc\\* `` a`b ``",
	"🦀 𝔘𝔫𝔦 👍🏽 **😀*😀*😀**",
	"[" + "verylongtext " + "](https://example.com/" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa)",
	"> ```\n> code in quote\n> ```",
}

func FuzzTelegramHTML(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := telegram.HTML(md)
		if _, err := visibleText(out, telegramMarkup); err != nil {
			t.Fatalf("TelegramHTML(%q) = %q: %v", md, out, err)
		}
	})
}

func FuzzHTML(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := markdown.HTML(md)
		if _, err := visibleText(out, htmlMarkup); err != nil {
			t.Fatalf("HTML(%q) = %q: %v", md, out, err)
		}
	})
}

func FuzzTelegramChunks(f *testing.F) {
	for i, s := range seeds {
		f.Add(s, 64+i*7)
	}
	// Short enough that the fuzzer can still minimise what grows from it.
	doc := longDocument()
	f.Add(doc[:1200]+"**\n\n```\n"+doc[len(doc)-600:], 100)
	f.Fuzz(func(t *testing.T, md string, limit int) {
		if limit < 0 {
			limit = -(limit + 1)
		}
		limit = 64 + limit%(5000-64+1)
		chunks := telegram.Chunks(markdown.Parse(md), limit)
		if err := checkChunks(md, limit, chunks); err != nil {
			t.Fatalf("TelegramChunks(%q, %d) = %q: %v", md, limit, chunks, err)
		}
	})
}
