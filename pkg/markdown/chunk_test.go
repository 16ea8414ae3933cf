package markdown_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"

	"github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/markdown"
)

// telegramLimit is the most characters Telegram accepts in one message.
const telegramLimit = 4096

func utf16Units(s string) int { return len(utf16.Encode([]rune(s))) }

// checkChunks verifies what a Telegram user would notice about chunks of md:
// each is within limit, each is well-formed Telegram HTML with something to
// show, and together they show the text of the whole message in order, with
// at most the break characters ("\n\n", "\n" or " ") missing at each cut.
func checkChunks(md string, limit int, chunks []string) error {
	whole, err := visibleText(telegram.HTML(md), telegramMarkup)
	if err != nil {
		return fmt.Errorf("TelegramHTML: %w", err)
	}
	rest := whole
	for k, c := range chunks {
		if n := utf16Units(c); n > max(limit, 64) {
			return fmt.Errorf("chunk %d is %d UTF-16 units, limit %d", k, n, limit)
		}
		v, err := visibleText(c, telegramMarkup)
		if err != nil {
			return fmt.Errorf("chunk %d %q: %w", k, c, err)
		}
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("chunk %d %q shows nothing", k, c)
		}
		breaks := []string{""}
		if k > 0 {
			breaks = []string{"", " ", "\n", "\n\n"}
		}
		if k > 0 && len(rest)-len(strings.TrimLeftFunc(rest, unicode.IsSpace)) > max(limit, 64) {
			// A stretch of blank longer than a message may go.
			rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		}
		i := slices.IndexFunc(breaks, func(b string) bool { return strings.HasPrefix(rest, b+v) })
		if i < 0 {
			return fmt.Errorf("chunk %d shows %q, message goes on with %.80q", k, v, rest)
		}
		rest = rest[len(breaks[i])+len(v):]
	}
	if strings.TrimSpace(rest) != "" {
		return fmt.Errorf("text lost after the last chunk: %.80q", rest)
	}
	return nil
}

// longDocument is a model's long answer: paragraphs, a bold passage longer
// than a message, a code block longer than a message, escapes and astral
// characters.
func longDocument() string {
	var b strings.Builder
	b.WriteString("# Weekly report 🚀\n\n")
	for i := range 8 {
		fmt.Fprintf(&b, "Paragraph %d: the deploy of *service-%d* went fine & latency < 200ms 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 👍🏽. ", i, i)
		b.WriteString(strings.Repeat("More words about the week, nothing special. ", 4))
		b.WriteString("\n\n")
	}
	b.WriteString("**bold start.")
	for i := range 110 {
		sep := " "
		if i == 60 {
			sep = "\n"
		}
		fmt.Fprintf(&b, "%sbold sentence %d with an emoji 🎉 and [a link](https://example.com/%d).", sep, i, i)
	}
	b.WriteString("**\n\n```go\n")
	for i := range 150 {
		fmt.Fprintf(&b, "fmt.Println(%d, \"<tag>\" && x) // 🦀\n", i)
	}
	b.WriteString("```\n\nThe end.")
	return b.String()
}

func TestTelegramChunksLongDocument(t *testing.T) {
	md := longDocument()
	if n := utf16Units(md); n < 10000 {
		t.Fatalf("document is only %d units long", n)
	}
	chunks := telegram.Chunks(markdown.Parse(md), telegramLimit)
	if len(chunks) < 3 {
		t.Fatalf("got %d chunks, want at least 3", len(chunks))
	}
	if err := checkChunks(md, telegramLimit, chunks); err != nil {
		t.Fatal(err)
	}
	// The bold passage and the code block are each longer than a message,
	// so some cut falls inside each and the formatting carries over.
	var boldCarried, codeCarried bool
	for k := 1; k < len(chunks); k++ {
		prev, next := chunks[k-1], chunks[k]
		if strings.HasSuffix(prev, "</b>") && strings.HasPrefix(next, "<b>bold sentence") {
			boldCarried = true
		}
		if strings.HasSuffix(prev, "</code></pre>") && strings.HasPrefix(next, `<pre><code class="language-go">fmt.Println(`) {
			codeCarried = true
		}
	}
	if !boldCarried {
		t.Error("no chunk boundary inside the bold passage reopens <b>")
	}
	if !codeCarried {
		t.Error("no chunk boundary inside the code block reopens <pre><code class=\"language-go\">")
	}
}

func TestTelegramChunksCutPreference(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want []string
	}{
		{
			name: "paragraph break before a later line break",
			md:   "first paragraph\n\nsecond line one\nsecond line two and many more words here to pass the limit",
			want: []string{"first paragraph", "second line one", "second line two and many more words here to pass the limit"},
		},
		{
			name: "line break before a later space",
			md:   "one two three\nfour five six seven eight nine ten eleven twelve thirteen x",
			want: []string{"one two three", "four five six seven eight nine ten eleven twelve thirteen x"},
		},
		{
			name: "last space that fits",
			md:   strings.TrimSpace(strings.Repeat("abcdefghi ", 10)),
			want: []string{
				strings.TrimSpace(strings.Repeat("abcdefghi ", 6)),
				strings.TrimSpace(strings.Repeat("abcdefghi ", 4)),
			},
		},
		{
			name: "anywhere, but not inside a surrogate pair",
			md:   strings.Repeat("a", 63) + "😀" + strings.Repeat("b", 10),
			want: []string{strings.Repeat("a", 63), "😀" + strings.Repeat("b", 10)},
		},
		{
			name: "anywhere, but not inside an entity",
			md:   strings.Repeat("a", 62) + "&" + strings.Repeat("b", 10),
			want: []string{strings.Repeat("a", 62), "&amp;" + strings.Repeat("b", 10)},
		},
		{
			name: "formatting reopened after a cut",
			md:   "**" + strings.TrimSpace(strings.Repeat("bold word ", 8)) + "**",
			want: []string{
				"<b>" + strings.TrimSpace(strings.Repeat("bold word ", 5)) + " bold</b>",
				"<b>word bold word bold word</b>",
			},
		},
		{
			name: "link reopened with its href",
			md:   "[" + strings.TrimSpace(strings.Repeat("click ", 12)) + "](https://e.io)",
			want: []string{
				`<a href="https://e.io">` + strings.TrimSpace(strings.Repeat("click ", 6)) + "</a>",
				`<a href="https://e.io">` + strings.TrimSpace(strings.Repeat("click ", 6)) + "</a>",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := telegram.Chunks(markdown.Parse(tt.md), 64)
			if !slices.Equal(got, tt.want) {
				t.Errorf("TelegramChunks(%q, 64)\n got: %q\nwant: %q", tt.md, got, tt.want)
			}
			if err := checkChunks(tt.md, 64, got); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestTelegramChunksShort(t *testing.T) {
	tests := []struct {
		name  string
		md    string
		limit int
		want  []string
	}{
		{"fits in one chunk", "**hi** there", 4096, []string{"<b>hi</b> there"}},
		{"exactly the limit", strings.Repeat("x", 64), 64, []string{strings.Repeat("x", 64)}},
		{"empty message has no chunks", "", 4096, nil},
		{"blank message has no chunks", " \n\n ", 4096, nil},
		{"code that shows only a space has no chunks", "` `", 4096, nil},
		{"blank stretch longer than a message is dropped", "```\na" + strings.Repeat(" ", 200) + "b\n```", 64, []string{"<pre>a" + strings.Repeat(" ", 64-11-1) + "</pre>", "<pre>b</pre>"}},
		{"link too long for any chunk is sent as its text", "[see this](https://example.com/" + strings.Repeat("a", 80) + ")", 64, []string{"see this"}},
		{"tiny limit counts as 64", strings.Repeat("y", 70), 1, []string{strings.Repeat("y", 64), "yyyyyy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := telegram.Chunks(markdown.Parse(tt.md), tt.limit)
			if !slices.Equal(got, tt.want) {
				t.Errorf("TelegramChunks(%q, %d)\n got: %q\nwant: %q", tt.md, tt.limit, got, tt.want)
			}
		})
	}
}

// TestRandomDocuments renders many documents built from random pieces of
// markdown and splits them at small limits, where formatting crosses cuts
// most often.
func TestRandomDocuments(t *testing.T) {
	pieces := []string{
		"word ", "other ", "**", "*", "_", "__", "~~", "`", "```go\n", "```\n",
		"\n", "\n\n", "> ", "- ", "1. ", "# ", "[link ", "](https://example.com/x_y)",
		"<https://a.b/c>", "https://h.i/j_k ", "&", "<", ">", "\"", "🎉", "𝔘", "👍🏽",
		"snake_case ", "    ", "\t", "é",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 3000 {
		var b strings.Builder
		for range r.IntN(120) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		md, limit := b.String(), 64+r.IntN(200)
		if err := checkChunks(md, limit, telegram.Chunks(markdown.Parse(md), limit)); err != nil {
			t.Fatalf("document %d: TelegramChunks(%q, %d): %v", n, md, limit, err)
		}
		if out := markdown.HTML(md); !validHTML(out) {
			t.Fatalf("document %d: HTML(%q) = %q is not well-formed", n, md, out)
		}
	}
}

func validHTML(s string) bool {
	_, err := visibleText(s, htmlMarkup)
	return err == nil
}

// TestChatChunks splits random documents for Slack and Discord at small
// limits: every chunk fits in its own markup, and the chunks' plain text
// is the message's, in order.
func TestChatChunks(t *testing.T) {
	pieces := []string{
		"word ", "other ", "**", "*", "_", "~~", "`", "```go\n", "```\n", "\n", "\n\n", "> ", "- ", "1. ", "# ",
		"[link ", "](https://example.com/a|b)", "https://h.i/j_k ", "&", "<", ">", "#", "🎉", "👍🏽", "snake_case ",
	}
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 2000 {
		var b strings.Builder
		for range r.IntN(150) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		md, limit := b.String(), 64+r.IntN(300)
		var texts, fallbacks []string
		for _, c := range slack.Chunks(markdown.Parse(md), limit) {
			texts, fallbacks = append(texts, c.Text), append(fallbacks, c.Fallback)
		}
		whole := ""
		if all := slack.Chunks(markdown.Parse(md), 1<<30); len(all) == 1 {
			whole = all[0].Fallback
		}
		if err := checkPieces(whole, fallbacks, limit); err != nil {
			t.Fatalf("document %d: SlackChunks(%q, %d): %v", n, md, limit, err)
		}
		for k, c := range texts {
			if u := utf16Units(c); u > limit {
				t.Fatalf("document %d: SlackChunks(%q, %d): chunk %d is %d units: %q", n, md, limit, k, u, c)
			}
		}
		for k, c := range discord.Chunks(markdown.Parse(md), limit) {
			if u := utf16Units(c); u > limit {
				t.Fatalf("document %d: DiscordChunks(%q, %d): chunk %d is %d units: %q", n, md, limit, k, u, c)
			}
		}
	}
}

// checkPieces is checkChunks for plain text: the pieces are whole, in
// order, with at most a break ("\n\n", "\n" or " ") or a blank stretch
// longer than a message missing at each cut.
func checkPieces(whole string, pieces []string, limit int) error {
	rest := whole
	for k, v := range pieces {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("piece %d %q shows nothing", k, v)
		}
		if k > 0 && len(rest)-len(strings.TrimLeftFunc(rest, unicode.IsSpace)) > limit {
			rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		}
		i := slices.IndexFunc([]string{"", " ", "\n", "\n\n"}, func(b string) bool { return strings.HasPrefix(rest, b+v) })
		if i < 0 || (k == 0 && i > 0) {
			return fmt.Errorf("piece %d is %q, message goes on with %.80q", k, v, rest)
		}
		rest = rest[len([]string{"", " ", "\n", "\n\n"}[i])+len(v):]
	}
	if strings.TrimSpace(rest) != "" {
		return fmt.Errorf("text lost after the last piece: %.80q", rest)
	}
	return nil
}
