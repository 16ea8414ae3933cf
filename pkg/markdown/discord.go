package markdown

import (
	"regexp"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Discord's markdown is written here, not in the Discord channel's package,
// because DiscordLimit measures it: the butler and the switchboard fit a
// one-message text to that limit, and they link no channel package.

// Discord renders md as one Discord message text, however long: **bold**,
// *italic*, ~~strike~~, `code`, fenced blocks with their language, links as
// [text](url), headings as bold lines, "> " quotes; every other character
// that Discord would read as markup (\ * _ ~ ` | [ ] < > and a heading's #)
// is escaped with a backslash, so no text can format, mask a link, mention
// someone or name a channel. Bare URLs are left as written, so they stay
// links.
func Discord(md string) string { return Parse(md).Discord() }

// Discord renders d as Discord(md) describes.
func (d *Doc) Discord() string {
	w := newDiscordWriter()
	layout(d, w)
	return w.String()
}

// DiscordChunks renders d as Discord messages of at most limit UTF-16
// code units each, every one well formed on its own, cut as TelegramChunks
// cuts. A message with nothing to show is none.
func (d *Doc) DiscordChunks(limit int) []string {
	text := d.Discord()
	if UTF16Len(text) <= max(limit, minLimit) {
		var p plainText
		layout(d, &p)
		if strings.TrimSpace(p.b.String()) == "" || strings.TrimSpace(text) == "" {
			return nil
		}
		return []string{text}
	}
	var out []string
	for _, c := range chatChunks(d, limit, discordMeasure, len(text)) {
		w := newDiscordWriter()
		c.replay(w)
		if s := w.String(); strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// DiscordEscape escapes s as text that starts a line: every character
// Discord reads as markup, and a leading # or -#.
func DiscordEscape(s string) string {
	var b strings.Builder
	discordWriter{&b}.escaped(s)
	return b.String()
}

// discordWriter writes Discord markdown, knowing whether it stands at the
// start of a line (where # and -# open a heading or a subtext).
type discordWriter struct{ b *strings.Builder }

func (w discordWriter) lineStart() bool {
	s := w.b.String()
	return s == "" || strings.HasSuffix(s, "\n")
}

func newDiscordWriter() *spanWriter {
	return newSpanWriter(func(f *frame, s string) { discordWriter{&f.b}.text(s) }, discordSpan)
}

var discordMarkers = map[Kind]string{KindStrong: "**", KindEmphasis: "*", KindStrike: "~~"}

func discordSpan(n *Node, content string) string {
	switch n.Kind {
	case KindCode:
		return discordCodeSpan(content)
	case KindCodeBlock:
		return discordFence(n.Lang, content)
	case KindLink:
		return discordLink(n.URL, content)
	case KindQuote:
		return discordQuote(content)
	}
	return wrapLines(content, discordMarkers[n.Kind])
}

// discordBareURL is a link written as its address: Discord makes it a link
// by itself, and escapes inside it would change it.
var discordBareURL = regexp.MustCompile(`https?://[^\s<>]+`)

// text writes s with Discord's markup escaped, bare URLs left whole.
func (w discordWriter) text(s string) {
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

func (w discordWriter) escaped(s string) {
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

// discordCodeSpan is an inline code span: one backtick around it, or two
// (with spaces) when it holds one; a run of backticks inside is broken with
// a zero-width space, since nothing escapes one in code.
func discordCodeSpan(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if strings.TrimSpace(s) == "" {
		return s
	}
	s = breakBackticks(s)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// discordFence is a code block with its language. Three backticks inside
// would end it, so runs of backticks are broken up.
func discordFence(lang, text string) string {
	text = strings.TrimRight(breakBackticks(text), "\n")
	if strings.TrimSpace(text) == "" {
		return ""
	}
	if strings.ContainsAny(lang, " `\n") {
		lang = ""
	}
	return "```" + lang + "\n" + text + "\n```"
}

// discordLink is [text](url), or the bare url when the text is the
// address. The text is plain: a masked link shows no formatting. An address
// with a space or parenthesis is percent-encoded there, so it cannot end
// early.
func discordLink(url, label string) string {
	label = strings.ReplaceAll(label, "\n", " ")
	u := discordLinkEscapes.Replace(url)
	if strings.TrimSpace(label) == "" || label == url {
		return u
	}
	return "[" + DiscordEscape(label) + "](" + u + ")"
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

// discordMeasure bounds what discordSpan writes: a character its
// backslash, where code does not keep it as it is (a backtick there its
// zero-width space); a line break the markers its next line takes in each
// span ("> " in a quote, both ends of bold, italic and strike); a span its
// markers, a link its address, and a code block in a quote its fence
// lines' "> ".
var discordMeasure = measure{
	char: func(r rune, open []*Node) (units, alone int) {
		alone = utf16.RuneLen(r)
		if r == '#' || r < utf8.RuneSelf && strings.IndexByte(discordMarkup, byte(r)) >= 0 {
			alone = 2
		}
		units = alone
		if inside(open, KindCode) || inside(open, KindCodeBlock) {
			units = utf16.RuneLen(r)
			if r == '`' {
				units = 2
			}
		}
		if r == '\n' {
			for _, n := range open {
				switch n.Kind {
				case KindEmphasis, KindQuote:
					units += 2
				case KindStrong, KindStrike:
					units += 4
				}
			}
		}
		return units, alone
	},
	span: func(n *Node, open []*Node) int {
		switch n.Kind {
		case KindStrong, KindStrike:
			return 4
		case KindCode:
			return 6
		case KindCodeBlock:
			if inside(open, KindQuote) {
				return 8 + len(n.Lang) + 4
			}
			return 8 + len(n.Lang)
		case KindLink:
			return 4 + UTF16Len(discordLinkEscapes.Replace(n.URL))
		}
		return 2 // emphasis, quote
	},
}
