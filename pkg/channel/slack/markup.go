package slack

import (
	"strings"
	"unicode/utf16"

	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/markdown"
)

// MaxMessage is the most a message's text holds here, in UTF-16 code units
// of mrkdwn. Slack takes up to 40,000 characters but stops showing a
// message in full (and push notifications stop arriving) well before;
// 3,000 is what a person reads on one screen.
const MaxMessage = 3000

// Limit is a slack message's: MaxMessage of mrkdwn.
var Limit = spec.Limit{Max: MaxMessage, Measure: func(md string) int { return markdown.UTF16Len(Mrkdwn(md)) }}

// Mrkdwn renders md as one Slack mrkdwn text, however long: **bold** ->
// *bold*, *italic* -> _italic_, ~~strike~~ -> ~strike~, `code`, fenced
// blocks -> ``` blocks, [text](url) -> <url|text>, headings -> bold lines,
// "> " quotes kept, and &, <, > escaped as &amp; &lt; &gt; everywhere else,
// so that no text can form a mention (<!channel>) or a link.
//
// mrkdwn has no escape for * _ ~ and `, so such characters written as text
// stay as they are (runs of backticks are broken with a zero-width space
// so that no text opens a code block), and Slack formats only at word
// boundaries, so emphasis inside a word (foo**bar**baz) shows its markers.
func Mrkdwn(md string) string { return render(markdown.Parse(md)) }

func render(d *markdown.Doc) string {
	w := newWriter()
	d.Layout(w)
	return w.String()
}

// Chunk is one Slack message: its mrkdwn, and its plain text for where
// Slack shows no formatting (push notifications), escaped as mrkdwn is.
type Chunk struct {
	Text, Fallback string
}

// Chunks renders d as Slack messages of at most limit UTF-16 code units of
// mrkdwn each, every one well formed on its own (markdown.Doc.Chunks says
// where it cuts). A message with nothing to show is none.
func Chunks(d *markdown.Doc, limit int) []Chunk {
	text := render(d)
	if markdown.UTF16Len(text) <= max(limit, markdown.MinLimit) {
		plain := d.Plain()
		if strings.TrimSpace(plain) == "" || strings.TrimSpace(text) == "" {
			return nil
		}
		return []Chunk{{Text: text, Fallback: escapes.Replace(plain)}}
	}
	var out []Chunk
	for _, c := range d.Chunks(limit, measure, len(text)) {
		w := newWriter()
		c.Replay(w)
		if s := w.String(); strings.TrimSpace(s) != "" {
			out = append(out, Chunk{Text: s, Fallback: escapes.Replace(c.Plain())})
		}
	}
	return out
}

// escapes are mrkdwn's three.
var escapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func newWriter() *markdown.SpanWriter {
	return markdown.NewSpanWriter(func(b *strings.Builder, s string) {
		b.WriteString(markdown.BreakBackticks(escapes.Replace(s))) // no text may open a code block
	}, span)
}

var markers = map[markdown.Kind]string{markdown.KindStrong: "*", markdown.KindEmphasis: "_", markdown.KindStrike: "~"}

func span(n *markdown.Node, content string) string {
	switch n.Kind {
	case markdown.KindCode:
		return code(escapes.Replace(content))
	case markdown.KindCodeBlock:
		return fence(escapes.Replace(content))
	case markdown.KindLink:
		return link(n.URL, content)
	case markdown.KindQuote:
		return markdown.QuoteLines(content)
	}
	return markdown.WrapLines(content, markers[n.Kind])
}

// code is an inline code span. mrkdwn has no escape for a backtick inside
// one, so it becomes ˋ (U+02CB), which looks the same.
func code(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if strings.TrimSpace(s) == "" {
		return s
	}
	return "`" + strings.ReplaceAll(s, "`", "ˋ") + "`"
}

// fence is a code block. Three backticks inside would end it, so runs of
// backticks are broken up.
func fence(s string) string {
	s = strings.TrimRight(markdown.BreakBackticks(s), "\n")
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return "```\n" + s + "\n```"
}

// link is <url|text>, or <url> when the text is the address. The text is
// plain: Slack shows no formatting inside a link's label.
func link(url, label string) string {
	label = strings.ReplaceAll(label, "\n", " ")
	u := linkEscapes.Replace(url)
	if strings.TrimSpace(label) == "" || label == url {
		return "<" + u + ">"
	}
	return "<" + u + "|" + escapes.Replace(label) + ">"
}

// linkEscapes are Slack's three escapes, and %7C for the "|" that would end
// the address.
var linkEscapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "|", "%7C")

// measure bounds what span writes: a character its escape, a backtick a
// zero-width space beside it, a line break the markers its next line takes
// in each span ("> " in a quote, one each end for bold, italic and
// strike); a span its markers, a link its address, and a code block in a
// quote its fence lines' "> ".
var measure = markdown.Measure{
	Char: func(r rune, open []*markdown.Node) (units, alone int) {
		switch r {
		case '&':
			alone = 5
		case '<', '>':
			alone = 4
		case '`':
			alone = 2
		default:
			alone = utf16.RuneLen(r)
		}
		units = alone
		if r == '\n' {
			for _, n := range open {
				switch n.Kind {
				case markdown.KindStrong, markdown.KindEmphasis, markdown.KindStrike, markdown.KindQuote:
					units += 2
				}
			}
		}
		return units, alone
	},
	Span: func(n *markdown.Node, open []*markdown.Node) int {
		switch n.Kind {
		case markdown.KindLink:
			return 3 + markdown.UTF16Len(linkEscapes.Replace(n.URL))
		case markdown.KindCodeBlock:
			if markdown.Inside(open, markdown.KindQuote) {
				return 8 + 4
			}
			return 8
		}
		return 2
	},
}
