// Package markdown reads the markdown a language model writes into one tree
// (Parse: Doc, Node), from which each channel's renderer writes its markup:
//
//   - HTML: an HTML fragment (an email's text/html part, the web chat).
//   - Layout and Sink: a Doc as a chat message (no headings, lists or
//     nested quotes: text and a few spans), which each chat channel's
//     leaf package (pkg/channel/telegram, slack, discord) writes in its own
//     markup, SpanWriter helping those whose spans wrap finished text.
//   - Chunks, Measure, Chunk: a long chat message cut into pieces each well
//     formed on its own, as the channel's Measure counts it.
//   - Escape and CodeBlock: text from elsewhere put into markdown so that
//     it shows literally; UTF16Len, the chats' unit of length.
//
// The parser covers the markdown models actually produce, not all of
// CommonMark; what it does not recognise shows as the text it was.
package markdown

import "strings"

// HTML renders md as an HTML fragment for an email body: <p>, <strong>, <em>,
// <code>, <pre><code>, <a href>, <del>, <h1>-<h6>, <ul>/<ol>/<li>,
// <blockquote>, <hr>, and <br> for single line breaks inside a paragraph.
// Everything else is escaped. Links are only to http, https, mailto
// and tg addresses (Node.URL).
func HTML(md string) string { return Parse(md).HTML() }

// HTML renders d as HTML(md) describes.
func (d *Doc) HTML() string {
	var b strings.Builder
	writeHTML(&b, d.Blocks)
	return b.String()
}

// normalize makes the input safe to index line by line: Telegram rejects
// invalid UTF-8 outright, and models emit \r\n when they echo Windows text.
func normalize(md string) string {
	md = strings.ToValidUTF8(md, "\uFFFD")
	md = strings.ReplaceAll(md, "\r\n", "\n")
	md = strings.ReplaceAll(md, "\r", "\n")
	// NUL ends strings in too many downstream C libraries to pass it on.
	return strings.ReplaceAll(md, "\x00", "\uFFFD")
}
