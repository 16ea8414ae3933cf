package markdown

import (
	"strings"
	"unicode/utf16"
)

// Slack's mrkdwn is written here, beside SlackLimit, which bounds it, and
// the chunker, which measures it.

// Slack renders d as one Slack mrkdwn text, however long: **bold** ->
// *bold*, *italic* -> _italic_, ~~strike~~ -> ~strike~, `code`, fenced
// blocks -> ``` blocks, [text](url) -> <url|text>, headings -> bold lines,
// "> " quotes kept, and &, <, > escaped as &amp; &lt; &gt; everywhere else,
// so that no text can form a mention (<!channel>) or a link.
//
// mrkdwn has no escape for * _ ~ and `, so such characters written as text
// stay as they are (runs of backticks are broken with a zero-width space so
// that no text opens a code block), and Slack formats only at word
// boundaries, so emphasis inside a word (foo**bar**baz) shows its markers.
func (d *Doc) Slack() string {
	w := newSlackWriter()
	layout(d, w)
	return w.String()
}

// SlackChunk is one Slack message: its mrkdwn, and its plain text for where
// Slack shows no formatting (push notifications), escaped as mrkdwn is.
type SlackChunk struct {
	Text, Fallback string
}

// SlackChunks renders d as Slack messages of at most limit UTF-16 code
// units of mrkdwn each, every one well formed on its own, cut as
// TelegramChunks cuts. A message with nothing to show is none.
func (d *Doc) SlackChunks(limit int) []SlackChunk {
	text := d.Slack()
	if UTF16Len(text) <= max(limit, minLimit) {
		var p plainText
		layout(d, &p)
		if strings.TrimSpace(p.b.String()) == "" || strings.TrimSpace(text) == "" {
			return nil
		}
		return []SlackChunk{{Text: text, Fallback: tgText.Replace(p.b.String())}}
	}
	var out []SlackChunk
	for _, c := range chatChunks(d, limit, slackMeasure, len(text)) {
		w := newSlackWriter()
		c.replay(w)
		var p plainText
		c.replay(&p)
		if s := w.String(); strings.TrimSpace(s) != "" {
			out = append(out, SlackChunk{Text: s, Fallback: tgText.Replace(p.b.String())})
		}
	}
	return out
}

// mrkdwn's escapes are Telegram's: &amp; &lt; &gt;.
func newSlackWriter() *spanWriter {
	return newSpanWriter(func(f *frame, s string) {
		f.b.WriteString(breakBackticks(tgText.Replace(s))) // no text may open a code block
	}, slackSpan)
}

var slackMarkers = map[Kind]string{KindStrong: "*", KindEmphasis: "_", KindStrike: "~"}

func slackSpan(n *Node, content string) string {
	switch n.Kind {
	case KindCode:
		return slackCode(tgText.Replace(content))
	case KindCodeBlock:
		return slackFence(tgText.Replace(content))
	case KindLink:
		return slackLink(n.URL, content)
	case KindQuote:
		return slackQuote(content)
	}
	return wrapLines(content, slackMarkers[n.Kind])
}

// slackCode is an inline code span. mrkdwn has no escape for a backtick
// inside one, so it becomes ˋ (U+02CB), which looks the same.
func slackCode(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if strings.TrimSpace(s) == "" {
		return s
	}
	return "`" + strings.ReplaceAll(s, "`", "ˋ") + "`"
}

// slackFence is a code block. Three backticks inside would end it, so
// runs of backticks are broken up.
func slackFence(s string) string {
	s = strings.TrimRight(breakBackticks(s), "\n")
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return "```\n" + s + "\n```"
}

// slackLink is <url|text>, or <url> when the text is the address. The text
// is plain: Slack shows no formatting inside a link's label.
func slackLink(url, label string) string {
	label = strings.ReplaceAll(label, "\n", " ")
	u := slackLinkEscapes.Replace(url)
	if strings.TrimSpace(label) == "" || label == url {
		return "<" + u + ">"
	}
	return "<" + u + "|" + tgText.Replace(label) + ">"
}

// slackLinkEscapes are Slack's three escapes, and %7C for the "|" that
// would end the address.
var slackLinkEscapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "|", "%7C")

// slackQuote marks every line of s as quoted; an empty line of a quote is
// a lone ">".
func slackQuote(s string) string {
	s = strings.Trim(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		if line == "" {
			lines[i] = ">"
		} else {
			lines[i] = "> " + line
		}
	}
	return strings.Join(lines, "\n")
}

// slackMeasure bounds what slackSpan writes: a character its escape, a
// backtick a zero-width space beside it, a line break the markers its next
// line takes in each span ("> " in a quote, one each end for bold, italic
// and strike); a span its markers, a link its address, and a code block in
// a quote its fence lines' "> ".
var slackMeasure = measure{
	char: func(r rune, open []*Node) (units, alone int) {
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
				case KindStrong, KindEmphasis, KindStrike, KindQuote:
					units += 2
				}
			}
		}
		return units, alone
	},
	span: func(n *Node, open []*Node) int {
		switch n.Kind {
		case KindLink:
			return 3 + UTF16Len(slackLinkEscapes.Replace(n.URL))
		case KindCodeBlock:
			if inside(open, KindQuote) {
				return 8 + 4
			}
			return 8
		}
		return 2
	},
}
