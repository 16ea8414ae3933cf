package telegram

import (
	"strings"
	"unicode/utf16"

	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/markdown"
)

// MaxMessage is the most a sendMessage text holds, in UTF-16 code units of
// its HTML, where the sender cuts.
const MaxMessage = 4096

// Limit is a telegram message's: MaxMessage of HTML, with room for the
// sender's urgent mark.
var Limit = spec.Limit{Max: MaxMessage, Mark: 3, Measure: func(md string) int { return markdown.UTF16Len(HTML(md)) }}

// HTML renders md as Telegram HTML: **bold**/__bold__ -> <b>,
// *italic*/_italic_ -> <i>, `code` -> <code>, fenced ``` blocks (optional
// language) -> <pre><code class="language-x">…</code></pre> (plain <pre>
// with no language), [text](url) -> <a href="url">text</a>, ~~strike~~ ->
// <s>, "> quote" lines -> <blockquote>. Everything else is escaped (& < >,
// and " inside attributes) so it can never form a tag. Headings become
// <b>…</b> on their own line; list items keep "- " / "1. " as text
// (Telegram has no list tags); paragraphs stay apart by "\n\n".
func HTML(md string) string {
	h, _ := render(markdown.Parse(md))
	return h
}

// render writes d as HTML, and whether it shows anything but whitespace.
func render(d *markdown.Doc) (string, bool) {
	var w writer
	d.Layout(&w)
	return w.b.String(), w.shown
}

// Chunks renders d as Telegram messages of at most limit UTF-16 code units
// of HTML each, every one a balanced fragment on its own: tags open at a
// cut are closed at the end of the chunk and opened again, attributes and
// all, at the start of the next (markdown.Doc.Chunks says where it cuts).
// A message that shows nothing but whitespace is none: Telegram refuses it.
func Chunks(d *markdown.Doc, limit int) []string {
	h, shown := render(d)
	if !shown {
		return nil
	}
	if markdown.UTF16Len(h) <= max(limit, markdown.MinLimit) {
		return []string{h}
	}
	var out []string
	for _, c := range d.Chunks(limit, measure, len(h)) {
		var w writer
		c.Replay(&w)
		out = append(out, w.b.String())
	}
	return out
}

// measure counts what writer writes: a character its escape, a span its
// tags both ends.
var measure = markdown.Measure{
	Char: func(r rune, _ []*markdown.Node) (units, alone int) {
		switch r {
		case '&':
			units = len("&amp;")
		case '<', '>':
			units = len("&lt;")
		default:
			units = utf16.RuneLen(r)
		}
		return units, units
	},
	Span: func(n *markdown.Node, _ []*markdown.Node) int {
		return markdown.UTF16Len(openTag(n)) + len(closeTag(n))
	},
}

// Telegram understands only &lt; &gt; &amp; and &quot;, and counts every
// escaped character against the message limit, so text escapes the
// minimum.
var (
	textEscapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEscapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
)

// writer writes the chat layout as Telegram HTML; shown, once it has
// written more than whitespace.
type writer struct {
	b     strings.Builder
	shown bool
}

func (w *writer) Text(s string) {
	_, _ = textEscapes.WriteString(&w.b, s)
	w.shown = w.shown || strings.TrimSpace(s) != ""
}
func (w *writer) Open(n *markdown.Node)  { w.b.WriteString(openTag(n)) }
func (w *writer) Close(n *markdown.Node) { w.b.WriteString(closeTag(n)) }

func openTag(n *markdown.Node) string {
	switch n.Kind {
	case markdown.KindStrong:
		return "<b>"
	case markdown.KindEmphasis:
		return "<i>"
	case markdown.KindStrike:
		return "<s>"
	case markdown.KindCode:
		return "<code>"
	case markdown.KindCodeBlock:
		if n.Lang != "" {
			return `<pre><code class="language-` + attrEscapes.Replace(n.Lang) + `">`
		}
		return "<pre>"
	case markdown.KindLink:
		return `<a href="` + attrEscapes.Replace(n.URL) + `">`
	}
	return "<blockquote>"
}

func closeTag(n *markdown.Node) string {
	switch n.Kind {
	case markdown.KindStrong:
		return "</b>"
	case markdown.KindEmphasis:
		return "</i>"
	case markdown.KindStrike:
		return "</s>"
	case markdown.KindCode:
		return "</code>"
	case markdown.KindCodeBlock:
		if n.Lang != "" {
			return "</code></pre>"
		}
		return "</pre>"
	case markdown.KindLink:
		return "</a>"
	}
	return "</blockquote>"
}
