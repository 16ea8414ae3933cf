package slack

import (
	"strings"

	"github.com/heraldhq/herald/pkg/markdown"
)

// ChunkLimit is the most a message's text may hold, in UTF-16 code units of
// the mrkdwn sent (markdown.SlackMax says why).
const ChunkLimit = markdown.SlackMax

// minChunkLimit is where chunking stops shrinking its limit: below it, a
// chunk is sent as it came (it is far below Slack's own limit anyway).
const minChunkLimit = 256

// chunk is one message of a delivery: its text as Slack mrkdwn, and as plain
// text for the places that show no formatting (push notifications).
type chunk struct {
	text     string
	fallback string
}

// chunks renders md as Slack mrkdwn split into messages of at most
// ChunkLimit each, every one well formed on its own.
//
// The markdown is parsed once, by pkg/markdown, whose chunker already cuts
// at paragraph, line or space and closes and reopens the tags open at a
// cut; each chunk of its Telegram HTML (b, i, s, code, pre, a, blockquote,
// and text escaped as &amp; &lt; &gt;, which are also Slack's escapes) is
// then written as mrkdwn. mrkdwn is nearly always shorter than that HTML;
// when a chunk comes out longer (a long quote gains "> " on every line),
// the whole message is cut again with a smaller limit, so that the chunks
// of a message are the same on every attempt.
func chunks(md string) []chunk {
	for limit := ChunkLimit; ; limit = limit * 3 / 4 {
		var out []chunk
		fits := true
		for _, h := range markdown.TelegramChunks(md, limit) {
			nodes := markdown.ParseHTML(h)
			// The fallback keeps Slack's escapes, which Slack undoes
			// when it shows the text.
			c := chunk{text: mrkdwn(nodes), fallback: markdown.NodesText(nodes)}
			if strings.TrimSpace(c.text) == "" {
				continue
			}
			if utf16Len(c.text) > ChunkLimit && limit > minChunkLimit {
				fits = false
				break
			}
			out = append(out, c)
		}
		if fits {
			return out
		}
	}
}

// Mrkdwn renders md as one Slack mrkdwn text, however long: **bold** ->
// *bold*, *italic* -> _italic_, ~~strike~~ -> ~strike~, `code`, fenced
// blocks -> ``` blocks, [text](url) -> <url|text>, headings -> bold lines,
// "> " quotes kept, and &, <, > escaped as &amp; &lt; &gt; everywhere else,
// so that no text can form a mention (<!channel>) or a link.
//
// mrkdwn has no escape for * _ ~ and `, so such characters written as text
// stay as they are (runs of backticks are broken with a zero-width space so
// that no text opens a code block), and Slack formats only at word
// boundaries, so emphasis inside a word (foo**bar**baz) shows its markers.
func Mrkdwn(md string) string {
	return mrkdwn(markdown.ParseHTML(markdown.TelegramHTML(md)))
}

// markers are the mrkdwn of the inline tags.
var markers = map[string]string{"b": "*", "i": "_", "s": "~"}

// mrkdwn writes nodes as Slack mrkdwn.
func mrkdwn(nodes []*markdown.Node) string {
	var b strings.Builder
	for _, n := range nodes {
		b.WriteString(mrkdwnNode(n))
	}
	return b.String()
}

func mrkdwnNode(n *markdown.Node) string {
	switch n.Tag {
	case "":
		// No text may open a code block.
		return markdown.BreakBackticks(n.Text)
	case "b", "i", "s":
		return markdown.WrapLines(mrkdwn(n.Kids), markers[n.Tag])
	case "code":
		return code(textOf(n))
	case "pre":
		return fence(textOf(n))
	case "a":
		return link(n)
	case "blockquote":
		return quote(mrkdwn(n.Kids))
	}
	return mrkdwn(n.Kids)
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
func link(n *markdown.Node) string {
	text := strings.ReplaceAll(markdown.NodesText(n.Kids), "\n", " ")
	if n.Attr == "" {
		return text
	}
	url := linkEscapes.Replace(n.Attr)
	if label := markdown.UnescapeHTML(text); strings.TrimSpace(label) == "" || label == n.Attr {
		return "<" + url + ">"
	}
	return "<" + url + "|" + text + ">"
}

// linkEscapes are Slack's three escapes, and %7C for the "|" that would end
// the address.
var linkEscapes = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "|", "%7C")

// quote marks every line of s as quoted; an empty line of a quote is a
// lone ">".
func quote(s string) string {
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

// textOf is the text inside n, without tags.
func textOf(n *markdown.Node) string { return markdown.NodesText(n.Kids) }

func utf16Len(s string) int { return markdown.UTF16Len(s) }
