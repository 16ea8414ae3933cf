// Package markdown turns the markdown a language model writes into the rich
// text Herald's channels deliver: Telegram Bot API HTML (parse_mode HTML), an
// HTML fragment for the text/html part of an email, and Discord's markdown
// (written from the Telegram HTML). Telegram caps a message at 4096
// characters, so TelegramChunks also splits a long message into pieces that
// Telegram accepts one by one. Escape and CodeBlock put text from elsewhere
// into a message so that it shows literally, and Limit says how much one
// message of each channel type holds.
//
// The parser covers the markdown models actually produce (emphasis, code,
// links, headings, lists, quotes, fenced code) rather than all of CommonMark.
// Whatever it does not recognise is escaped and shown as the text it was:
// a model's stray "<" or "*" must never break a delivery.
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
func TelegramHTML(md string) string {
	return renderTelegram(parseBlocks(normalize(md)))
}

// HTML renders md as an HTML fragment for an email body: <p>, <strong>, <em>,
// <code>, <pre><code>, <a href>, <del>, <h1>-<h6>, <ul>/<ol>/<li>,
// <blockquote>, <hr>, and <br> for single line breaks inside a paragraph.
// Everything else is escaped. Links follow the same scheme rule as
// TelegramHTML.
func HTML(md string) string {
	return renderHTML(parseBlocks(normalize(md)))
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
