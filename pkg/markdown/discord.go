package markdown

import (
	"regexp"
	"strings"
)

// Discord's markdown is written here, not in the Discord channel's package,
// because DiscordLimit measures it: the butler and the switchboard fit a
// one-message text to that limit, and they link no channel package.

// DiscordMax is Discord's limit on a message's content, in characters; the
// sender counts UTF-16 code units, which are never fewer.
const DiscordMax = 2000

// Discord renders md as one Discord message text, however long: **bold**,
// *italic*, ~~strike~~, `code`, fenced blocks with their language, links as
// [text](url), headings as bold lines, "> " quotes; every other character
// that Discord would read as markup (\ * _ ~ ` | [ ] < > and a heading's #)
// is escaped with a backslash, so no text can format, mask a link, mention
// someone or name a channel. Bare URLs are left as written, so they stay
// links.
func Discord(md string) string { return DiscordFromHTML(TelegramHTML(md)) }

// DiscordFromHTML writes h, the HTML of TelegramHTML or one chunk of
// TelegramChunks, as Discord markdown: the Discord sender cuts a message
// where TelegramChunks does, and writes each chunk this way.
func DiscordFromHTML(h string) string { return discordRender(ParseHTML(h)) }

// DiscordEscape escapes s as text that starts a line: every character
// Discord reads as markup, and a leading # or -#.
func DiscordEscape(s string) string {
	var w discordWriter
	w.escaped(s)
	return w.b.String()
}

// discordWriter writes Discord markdown, knowing whether it stands at the
// start of a line (where # and -# open a heading or a subtext).
type discordWriter struct{ b strings.Builder }

func (w *discordWriter) lineStart() bool {
	s := w.b.String()
	return s == "" || strings.HasSuffix(s, "\n")
}

func discordRender(nodes []*Node) string {
	var w discordWriter
	w.nodes(nodes)
	return w.b.String()
}

func (w *discordWriter) nodes(nodes []*Node) {
	for _, n := range nodes {
		w.node(n)
	}
}

func (w *discordWriter) node(n *Node) {
	switch n.Tag {
	case "":
		w.text(UnescapeHTML(n.Text))
	case "b", "strong":
		w.b.WriteString(WrapLines(discordRender(n.Kids), "**"))
	case "i", "em":
		w.b.WriteString(WrapLines(discordRender(n.Kids), "*"))
	case "s", "del", "strike":
		w.b.WriteString(WrapLines(discordRender(n.Kids), "~~"))
	case "u":
		w.b.WriteString(WrapLines(discordRender(n.Kids), "__"))
	case "code":
		w.b.WriteString(discordCodeSpan(UnescapeHTML(NodesText(n.Kids))))
	case "pre":
		w.b.WriteString(discordFence(n))
	case "a":
		w.b.WriteString(discordLink(n))
	case "blockquote":
		w.b.WriteString(discordQuote(discordRender(n.Kids)))
	default:
		w.nodes(n.Kids)
	}
}

// discordBareURL is a link written as its address: Discord makes it a link
// by itself, and escapes inside it would change it.
var discordBareURL = regexp.MustCompile(`https?://[^\s<>]+`)

// text writes s with Discord's markup escaped, bare URLs left whole.
func (w *discordWriter) text(s string) {
	for s != "" {
		loc := discordBareURL.FindStringIndex(s)
		if loc == nil {
			w.escaped(s)
			return
		}
		w.escaped(s[:loc[0]])
		w.b.WriteString(s[loc[0]:loc[1]])
		s = s[loc[1]:]
	}
}

// discordMarkup are the characters Discord reads as markup anywhere in a
// line.
const discordMarkup = "\\*_~`|[]<>"

func (w *discordWriter) escaped(s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if w.lineStart() {
			// "# " opens a heading, "-# " a subtext; lists ("- ", "1. ")
			// came from the markdown's own lists and stay lists.
			rest := strings.TrimLeft(s[i:], " ")
			if strings.HasPrefix(rest, "#") || strings.HasPrefix(rest, "-#") {
				lead := len(s[i:]) - len(rest)
				w.b.WriteString(s[i : i+lead])
				i += lead
				if s[i] == '-' {
					w.b.WriteByte('-')
					i++
				}
				w.b.WriteString(`\#`)
				continue
			}
		}
		if strings.IndexByte(discordMarkup, c) >= 0 {
			w.b.WriteByte('\\')
		}
		w.b.WriteByte(c)
	}
}

// WrapLines puts marker around the text of each line of s, as Discord
// and Slack need for bold, italic and strike: their formatting ends at a
// line break, and a marker next to a space is shown as written ("** x**"),
// so spaces stay outside and blank lines stay bare.
func WrapLines(s, marker string) string {
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		core := strings.TrimSpace(line)
		if core == "" {
			continue
		}
		start := strings.Index(line, core)
		lines[i] = line[:start] + marker + core + marker + line[start+len(core):]
	}
	return strings.Join(lines, "\n")
}

// discordCodeSpan is an inline code span: one backtick around it, or two
// (with spaces) when it holds one; a run of backticks inside is broken with
// a zero-width space, since nothing escapes one in code.
func discordCodeSpan(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if strings.TrimSpace(s) == "" {
		return s
	}
	s = BreakBackticks(s)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// discordFence is a code block with its language. Three backticks inside
// would end it, so runs of backticks are broken up.
func discordFence(n *Node) string {
	lang := ""
	text := ""
	for _, k := range n.Kids {
		if k.Tag == "code" {
			lang = k.Attr
			text += NodesText(k.Kids)
		} else {
			text += NodesText([]*Node{k})
		}
	}
	text = strings.TrimRight(BreakBackticks(UnescapeHTML(text)), "\n")
	if strings.TrimSpace(text) == "" {
		return ""
	}
	if strings.ContainsAny(lang, " `\n") {
		lang = ""
	}
	return "```" + lang + "\n" + text + "\n```"
}

// BreakBackticks puts a zero-width space between backticks that follow
// each other, so that no text opens or closes a code span or block: for
// markdown dialects without an escape for them there (Discord's, Slack's
// mrkdwn).
func BreakBackticks(s string) string {
	for strings.Contains(s, "``") {
		s = strings.ReplaceAll(s, "``", "`\u200b`")
	}
	return s
}

// discordLink is [text](url), or the bare url when the text is the
// address. The text is plain: a masked link shows no formatting. An address
// with a space or parenthesis is percent-encoded there, so it cannot end
// early.
func discordLink(n *Node) string {
	label := strings.ReplaceAll(UnescapeHTML(NodesText(n.Kids)), "\n", " ")
	if n.Attr == "" {
		var w discordWriter
		w.text(label)
		return w.b.String()
	}
	url := discordLinkEscapes.Replace(n.Attr)
	if strings.TrimSpace(label) == "" || label == n.Attr {
		return url
	}
	return "[" + DiscordEscape(label) + "](" + url + ")"
}

var discordLinkEscapes = strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E")

// discordQuote marks every line of s as quoted; Discord has no nested
// quotes, and an empty line of a quote is a lone ">".
func discordQuote(s string) string {
	s = strings.Trim(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		line = strings.TrimPrefix(strings.TrimPrefix(line, "> "), ">")
		if line == "" {
			lines[i] = ">"
		} else {
			lines[i] = "> " + line
		}
	}
	return strings.Join(lines, "\n")
}

// NodesText writes nodes as their text without tags, entities kept (&amp;
// &lt; &gt;, which are also Slack's escapes).
func NodesText(nodes []*Node) string {
	var b strings.Builder
	for _, n := range nodes {
		if n.Tag == "" {
			b.WriteString(n.Text)
			continue
		}
		b.WriteString(NodesText(n.Kids))
	}
	return b.String()
}
