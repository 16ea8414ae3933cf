package discord

import (
	"regexp"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/markdown"
)

// MaxMessage is the most a message's content holds: 2000 characters,
// never fewer than the UTF-16 code units the sender counts.
const MaxMessage = 2000

// Limit is a discord message's: MaxMessage of its markdown, with room for
// what the sender adds to a prompt: the urgent mark, and the subtext line
// naming the butler (63 characters, each escaped at worst) and its topic.
var Limit = spec.Limit{Max: MaxMessage, Mark: 160, Measure: func(md string) int { return markdown.UTF16Len(Markdown(md)) }}

// Markdown renders md as one Discord message text, however long: **bold**,
// *italic*, ~~strike~~, `code`, fenced blocks with their language, links
// as [text](url), headings as bold lines, "> " quotes; every other
// character that Discord would read as markup (\ * _ ~ ` | [ ] < > and a
// heading's #) is escaped with a backslash, so no text can format, mask a
// link, mention someone or name a channel. Bare URLs are left as written,
// so they stay links.
func Markdown(md string) string { return render(markdown.Parse(md)) }

func render(d *markdown.Doc) string {
	w := newWriter()
	d.Layout(w)
	return w.String()
}

// Chunks renders d as Discord messages of at most limit UTF-16 code units
// each, every one well formed on its own (markdown.Doc.Chunks says where
// it cuts). A message with nothing to show is none.
func Chunks(d *markdown.Doc, limit int) []string {
	text := render(d)
	if markdown.UTF16Len(text) <= max(limit, markdown.MinLimit) {
		if strings.TrimSpace(d.Plain()) == "" || strings.TrimSpace(text) == "" {
			return nil
		}
		return []string{text}
	}
	var out []string
	for _, c := range d.Chunks(limit, measure, len(text)) {
		w := newWriter()
		c.Replay(w)
		if s := w.String(); strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	return out
}

// Escape escapes s as text that starts a line: every character Discord
// reads as markup, and a leading # or -#.
func Escape(s string) string {
	var b strings.Builder
	textWriter{&b}.escaped(s)
	return b.String()
}

// textWriter writes Discord markdown, knowing whether it stands at the
// start of a line (where # and -# open a heading or a subtext).
type textWriter struct{ b *strings.Builder }

func (w textWriter) lineStart() bool {
	s := w.b.String()
	return s == "" || strings.HasSuffix(s, "\n")
}

func newWriter() *markdown.SpanWriter {
	return markdown.NewSpanWriter(func(b *strings.Builder, s string) { textWriter{b}.text(s) }, span)
}

var markers = map[markdown.Kind]string{markdown.KindStrong: "**", markdown.KindEmphasis: "*", markdown.KindStrike: "~~"}

func span(n *markdown.Node, content string) string {
	switch n.Kind {
	case markdown.KindCode:
		return codeSpan(content)
	case markdown.KindCodeBlock:
		return fence(n.Lang, content)
	case markdown.KindLink:
		return link(n.URL, content)
	case markdown.KindQuote:
		return markdown.QuoteLines(content)
	}
	return markdown.WrapLines(content, markers[n.Kind])
}

// bareURL is a link written as its address: Discord makes it a link by
// itself, and escapes inside it would change it.
var bareURL = regexp.MustCompile(`https?://[^\s<>]+`)

// text writes s with Discord's markup escaped, bare URLs left whole.
func (w textWriter) text(s string) {
	for s != "" {
		loc := bareURL.FindStringIndex(s)
		if loc == nil {
			w.escaped(s)
			return
		}
		w.escaped(s[:loc[0]])
		w.b.WriteString(s[loc[0]:loc[1]])
		s = s[loc[1]:]
	}
}

// markup are the characters Discord reads as markup anywhere in a line.
const markup = "\\*_~`|[]<>"

func (w textWriter) escaped(s string) {
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
		if strings.IndexByte(markup, c) >= 0 {
			w.b.WriteByte('\\')
		}
		w.b.WriteByte(c)
	}
}

// codeSpan is an inline code span: one backtick around it, or two (with
// spaces) when it holds one; a run of backticks inside is broken with a
// zero-width space, since nothing escapes one in code.
func codeSpan(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if strings.TrimSpace(s) == "" {
		return s
	}
	s = markdown.BreakBackticks(s)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// fence is a code block with its language. Three backticks inside would
// end it, so runs of backticks are broken up.
func fence(lang, text string) string {
	text = strings.TrimRight(markdown.BreakBackticks(text), "\n")
	if strings.TrimSpace(text) == "" {
		return ""
	}
	if strings.ContainsAny(lang, " `\n") {
		lang = ""
	}
	return "```" + lang + "\n" + text + "\n```"
}

// link is [text](url), or the bare url when the text is the address. The
// text is plain: a masked link shows no formatting. An address with a
// space or parenthesis is percent-encoded there, so it cannot end early.
func link(url, label string) string {
	label = strings.ReplaceAll(label, "\n", " ")
	u := linkEscapes.Replace(url)
	if strings.TrimSpace(label) == "" || label == url {
		return u
	}
	return "[" + Escape(label) + "](" + u + ")"
}

var linkEscapes = strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E")

// measure bounds what span writes: a character its backslash, where code
// does not keep it as it is (a backtick there its zero-width space); a
// line break the markers its next line takes in each span ("> " in a
// quote, both ends of bold, italic and strike); a span its markers, a link
// its address, and a code block in a quote its fence lines' "> ".
var measure = markdown.Measure{
	Char: func(r rune, open []*markdown.Node) (units, alone int) {
		alone = utf16.RuneLen(r)
		if r == '#' || r < utf8.RuneSelf && strings.IndexByte(markup, byte(r)) >= 0 {
			alone = 2
		}
		units = alone
		if markdown.Inside(open, markdown.KindCode) || markdown.Inside(open, markdown.KindCodeBlock) {
			units = utf16.RuneLen(r)
			if r == '`' {
				units = 2
			}
		}
		if r == '\n' {
			for _, n := range open {
				switch n.Kind {
				case markdown.KindEmphasis, markdown.KindQuote:
					units += 2
				case markdown.KindStrong, markdown.KindStrike:
					units += 4
				}
			}
		}
		return units, alone
	},
	Span: func(n *markdown.Node, open []*markdown.Node) int {
		switch n.Kind {
		case markdown.KindStrong, markdown.KindStrike:
			return 4
		case markdown.KindCode:
			return 6
		case markdown.KindCodeBlock:
			if markdown.Inside(open, markdown.KindQuote) {
				return 8 + len(n.Lang) + 4
			}
			return 8 + len(n.Lang)
		case markdown.KindLink:
			return 4 + markdown.UTF16Len(linkEscapes.Replace(n.URL))
		}
		return 2 // emphasis, quote
	},
}
