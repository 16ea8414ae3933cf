package discord

import (
	"regexp"
	"strings"
	"unicode/utf16"

	"github.com/heraldhq/herald/pkg/markdown"
)

// MaxMessageLength is Discord's limit on a message's content, in
// characters; the sender counts UTF-16 code units, which are never fewer.
const MaxMessageLength = 2000

// Limit is how much one Discord message holds, for a writer that needs its
// text in one (a permission prompt and its buttons): MaxMessageLength
// UTF-16 code units of the Discord markdown the sender writes, with room
// for what decorator adds to a prompt: the urgent mark, and the subtext
// line naming the butler (63 characters, each escaped at worst) and its
// topic.
var Limit = markdown.NewLimit(MaxMessageLength, 160, func(md string) int { return utf16Len(Markdown(md)) })

// minChunkLimit is where chunking stops shrinking its limit: below it, a
// chunk is sent as it came.
const minChunkLimit = 256

// chunks renders md as Discord markdown split into messages of at most
// limit UTF-16 code units each, every one well formed on its own; decorate
// adds what the sender puts around a chunk (an urgency mark, the subject,
// the butler's footer), given its index and the number of chunks.
//
// The markdown is parsed once, by pkg/markdown, whose chunker already cuts
// at a paragraph, line or space and closes and reopens the tags open at a
// cut; each chunk of its Telegram HTML (b, i, s, code, pre, a, blockquote,
// escaped text) is then written as Discord markdown. When a chunk comes out
// longer than limit (escapes, a quote's "> " on every line, the
// decorations), the whole message is cut again with a smaller limit, so the
// chunks of a message are the same on every attempt.
func chunks(md string, limit int, decorate func(text string, i, n int) string) []string {
	for cut := limit; ; cut = cut * 3 / 4 {
		var parts []string
		for _, h := range markdown.TelegramChunks(md, cut) {
			if text := render(markdown.ParseHTML(h)); strings.TrimSpace(text) != "" {
				parts = append(parts, text)
			}
		}
		fits := true
		for i := range parts {
			parts[i] = decorate(parts[i], i, len(parts))
			if utf16Len(parts[i]) > limit {
				fits = false
			}
		}
		if fits || cut <= minChunkLimit {
			return parts
		}
	}
}

// Markdown renders md as one Discord message text, however long: **bold**,
// *italic*, ~~strike~~, `code`, fenced blocks with their language, links as
// [text](url), headings as bold lines, "> " quotes; every other character
// that Discord would read as markup (\ * _ ~ ` | [ ] < > and a heading's #)
// is escaped with a backslash, so no text can format, mask a link, mention
// someone or name a channel. Bare URLs are left as written, so they stay
// links.
func Markdown(md string) string { return render(markdown.ParseHTML(markdown.TelegramHTML(md))) }

// writer writes Discord markdown, knowing whether it stands at the start of
// a line (where # and -# open a heading or a subtext).
type writer struct{ b strings.Builder }

func (w *writer) lineStart() bool {
	s := w.b.String()
	return s == "" || strings.HasSuffix(s, "\n")
}

func render(nodes []*markdown.Node) string {
	var w writer
	w.nodes(nodes)
	return w.b.String()
}

func (w *writer) nodes(nodes []*markdown.Node) {
	for _, n := range nodes {
		w.node(n)
	}
}

func (w *writer) node(n *markdown.Node) {
	switch n.Tag {
	case "":
		w.text(markdown.UnescapeHTML(n.Text))
	case "b", "strong":
		w.b.WriteString(wrapLines(renderKids(n), "**"))
	case "i", "em":
		w.b.WriteString(wrapLines(renderKids(n), "*"))
	case "s", "del", "strike":
		w.b.WriteString(wrapLines(renderKids(n), "~~"))
	case "u":
		w.b.WriteString(wrapLines(renderKids(n), "__"))
	case "code":
		w.b.WriteString(codeSpan(markdown.UnescapeHTML(plain(n.Kids))))
	case "pre":
		w.b.WriteString(fence(n))
	case "a":
		w.b.WriteString(link(n))
	case "blockquote":
		w.b.WriteString(quote(renderKids(n)))
	default:
		w.nodes(n.Kids)
	}
}

func renderKids(n *markdown.Node) string { return render(n.Kids) }

// bareURL is a link written as its address: Discord makes it a link by
// itself, and escapes inside it would change it.
var bareURL = regexp.MustCompile(`https?://[^\s<>]+`)

// text writes s with Discord's markup escaped, bare URLs left whole.
func (w *writer) text(s string) {
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

func (w *writer) escaped(s string) {
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

// wrapLines puts marker around the text of each line of s: spaces stay
// outside (Discord shows "** x**" as written) and blank lines stay bare.
func wrapLines(s, marker string) string {
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

// codeSpan is an inline code span: one backtick around it, or two (with
// spaces) when it holds one; a run of backticks inside is broken with a
// zero-width space, since nothing escapes one in code.
func codeSpan(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if strings.TrimSpace(s) == "" {
		return s
	}
	s = breakRuns(s)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// fence is a code block with its language. Three backticks inside would end
// it, so runs of backticks are broken up.
func fence(n *markdown.Node) string {
	lang := ""
	text := ""
	for _, k := range n.Kids {
		if k.Tag == "code" {
			lang = k.Attr
			text += plain(k.Kids)
		} else {
			text += plain([]*markdown.Node{k})
		}
	}
	text = strings.TrimRight(breakRuns(markdown.UnescapeHTML(text)), "\n")
	if strings.TrimSpace(text) == "" {
		return ""
	}
	if strings.ContainsAny(lang, " `\n") {
		lang = ""
	}
	return "```" + lang + "\n" + text + "\n```"
}

// breakRuns puts a zero-width space between backticks that follow each
// other, so that no text opens or closes a code span or block.
func breakRuns(s string) string {
	for strings.Contains(s, "``") {
		s = strings.ReplaceAll(s, "``", "`\u200b`")
	}
	return s
}

// link is [text](url), or the bare url when the text is the address. The
// text is plain: a masked link shows no formatting. An address with a
// space or parenthesis is percent-encoded there, so it cannot end early.
func link(n *markdown.Node) string {
	label := strings.ReplaceAll(markdown.UnescapeHTML(plain(n.Kids)), "\n", " ")
	if n.Attr == "" {
		var w writer
		w.text(label)
		return w.b.String()
	}
	url := linkEscapes.Replace(n.Attr)
	if strings.TrimSpace(label) == "" || label == n.Attr {
		return url
	}
	var w writer
	w.escaped(label)
	return "[" + w.b.String() + "](" + url + ")"
}

var linkEscapes = strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E")

// quote marks every line of s as quoted; Discord has no nested quotes, and
// an empty line of a quote is a lone ">".
func quote(s string) string {
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

// plain writes nodes as their text without tags, entities kept.
func plain(nodes []*markdown.Node) string {
	var b strings.Builder
	for _, n := range nodes {
		if n.Tag == "" {
			b.WriteString(n.Text)
			continue
		}
		b.WriteString(plain(n.Kids))
	}
	return b.String()
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
