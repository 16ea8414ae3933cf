// Package markdown turns the markdown a language model writes into the rich
// text Herald's channels deliver. Parse reads it into one tree (Doc, Node),
// which every renderer writes from: TelegramHTML (Bot API HTML), Slack
// (mrkdwn) and Discord (its markdown) share one chat layout, headings as
// bold lines and lists as text; HTML writes an email's text/html part.
// TelegramChunks, SlackChunks and DiscordChunks split a long message into
// pieces each well formed on its own; Limit says how much one message of
// each channel type holds. Escape and CodeBlock put text from elsewhere
// into a message so that it shows literally.
//
// The parser covers the markdown models actually produce, not all of
// CommonMark; what it does not recognise shows as the text it was.
package markdown

import "strings"

// TelegramHTML renders md as Telegram HTML: **bold**/__bold__ -> <b>,
// *italic*/_italic_ -> <i>, `code` -> <code>, fenced ``` blocks (optional
// language) -> <pre><code class="language-x">…</code></pre> (plain <pre> with
// no language), [text](url) -> <a href="url">text</a> (only http, https,
// mailto, tg schemes; otherwise render the text only), ~~strike~~ -> <s>,
// "> quote" lines -> <blockquote>. Everything else is escaped (& < > and "
// inside attributes) so it can never form a tag. Headings (# ...) become
// <b>…</b> on their own line; list items keep "- " / "1. " text as plain text
// (Telegram has no list tags). Blank-line-separated paragraphs stay separated
// by "\n\n".
func TelegramHTML(md string) string { return Parse(md).TelegramHTML() }

// TelegramHTML renders d as TelegramHTML(md) describes.
func (d *Doc) TelegramHTML() string {
	var w telegramWriter
	layout(d, &w)
	return w.b.String()
}

// HTML renders md as an HTML fragment for an email body: <p>, <strong>, <em>,
// <code>, <pre><code>, <a href>, <del>, <h1>-<h6>, <ul>/<ol>/<li>,
// <blockquote>, <hr>, and <br> for single line breaks inside a paragraph.
// Everything else is escaped. Links follow the same scheme rule as
// TelegramHTML.
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
