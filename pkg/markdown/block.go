package markdown

import (
	"strconv"
	"strings"
)

// list and item hold a list while it is read: an item's text grows by its
// continuation lines before it is parsed.
type list struct {
	ordered bool
	start   int // number of the first item of an ordered list
	items   []*item
}

type item struct {
	marker string // "-" for any bullet, "3." or "3)" as written for ordered items
	text   string // inline source
	lists  []*list
}

func (l *list) node() *Node {
	n := &Node{Kind: KindList, Ordered: l.ordered, Start: l.start}
	for _, it := range l.items {
		in := &Node{Kind: KindItem, Marker: it.marker, Children: parseInline(it.text, false)}
		for _, sub := range it.lists {
			in.Children = append(in.Children, sub.node())
		}
		n.Children = append(n.Children, in)
	}
	return n
}

// parseBlocks splits a normalized document into blocks. It is deliberately
// line-based and forgiving: a construct that does not parse cleanly becomes a
// paragraph, never an error.
func parseBlocks(src string) []*Node {
	lines := strings.Split(src, "\n")
	var out []*Node
	for i := 0; i < len(lines); {
		line := lines[i]
		switch {
		case isBlank(line):
			i++
		case isFence(line):
			b, n := parseFence(lines[i:])
			out = append(out, b)
			i += n
		case isHeading(line):
			level, text := heading(line)
			out = append(out, &Node{Kind: KindHeading, Level: level, Children: parseInline(text, false)})
			i++
		case isRule(line):
			out = append(out, &Node{Kind: KindRule, Text: strings.TrimSpace(line)})
			i++
		case isQuote(line):
			var body []string
			for ; i < len(lines) && isQuote(lines[i]); i++ {
				body = append(body, unquote(lines[i]))
			}
			out = append(out, &Node{Kind: KindQuote, Children: parseBlocks(strings.Join(body, "\n"))})
		case isItem(line):
			l, n := parseList(lines[i:])
			out = append(out, l.node())
			i += n
		default:
			var para []string
			for ; i < len(lines) && !isBlank(lines[i]) && (len(para) == 0 || !interrupts(lines[i])); i++ {
				para = append(para, strings.TrimSpace(lines[i]))
			}
			out = append(out, &Node{Kind: KindParagraph, Children: parseInline(strings.Join(para, "\n"), false)})
		}
	}
	return out
}

// interrupts reports whether line starts a new block even without a blank
// line before it. Models often write "Steps:\n1. ..." with no blank line.
func interrupts(line string) bool {
	return isFence(line) || isHeading(line) || isRule(line) || isQuote(line) || isItem(line)
}

func isBlank(line string) bool { return strings.TrimSpace(line) == "" }

// indentOf returns the width of line's leading whitespace in columns (a tab
// reaches the next multiple of 4) and its length in bytes.
func indentOf(line string) (cols, n int) {
	for n < len(line) {
		switch line[n] {
		case ' ':
			cols++
		case '\t':
			cols += 4 - cols%4
		default:
			return cols, n
		}
		n++
	}
	return cols, n
}

// stripIndent removes up to cols columns of leading whitespace, so a fenced
// block indented inside a list item keeps its own relative indentation.
func stripIndent(line string, cols int) string {
	c, n := 0, 0
	for n < len(line) && c < cols && (line[n] == ' ' || line[n] == '\t') {
		if line[n] == '\t' {
			c += 4 - c%4
		} else {
			c++
		}
		n++
	}
	return line[n:]
}

type fence struct {
	char   byte
	length int
	indent int
	lang   string
}

// openFence accepts a fence at any indentation: there are no indented code
// blocks here, and models indent fences inside list items.
func openFence(line string) (fence, bool) {
	ind, n := indentOf(line)
	rest := line[n:]
	if rest == "" || (rest[0] != '`' && rest[0] != '~') {
		return fence{}, false
	}
	f := fence{char: rest[0], length: runLen(rest, 0, rest[0]), indent: ind}
	if f.length < 3 {
		return fence{}, false
	}
	info := strings.TrimSpace(rest[f.length:])
	// "```x```" on one line is inline code, not a fence.
	if f.char == '`' && strings.Contains(info, "`") {
		return fence{}, false
	}
	if fields := strings.Fields(info); len(fields) > 0 {
		f.lang = sanitizeLang(fields[0])
	}
	return f, true
}

func isFence(line string) bool {
	_, ok := openFence(line)
	return ok
}

func (f fence) closedBy(line string) bool {
	_, n := indentOf(line)
	rest := line[n:]
	k := runLen(rest, 0, f.char)
	return k >= f.length && strings.TrimSpace(rest[k:]) == ""
}

// parseFence reads a fenced code block. An unclosed fence runs to the end of
// the document, as in CommonMark: a model cut off mid-block still meant code.
func parseFence(lines []string) (*Node, int) {
	f, _ := openFence(lines[0])
	var body []string
	i := 1
	for ; i < len(lines); i++ {
		if f.closedBy(lines[i]) {
			i++
			break
		}
		body = append(body, stripIndent(lines[i], f.indent))
	}
	text := strings.TrimRight(strings.Join(body, "\n"), " \t\n")
	return &Node{Kind: KindCodeBlock, Lang: f.lang, Text: text}, i
}

// sanitizeLang keeps a language name only if it looks like one; it ends up in
// a class attribute that Telegram's chunks may repeat in every chunk, so it must
// also stay short.
func sanitizeLang(s string) string {
	if len(s) > 24 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("+#._-", c) >= 0) {
			return ""
		}
	}
	return s
}

func isHeading(line string) bool {
	ind, n := indentOf(line)
	rest := line[n:]
	k := runLen(rest, 0, '#')
	return ind <= 3 && k >= 1 && k <= 6 && (k == len(rest) || rest[k] == ' ' || rest[k] == '\t')
}

func heading(line string) (level int, text string) {
	_, n := indentOf(line)
	rest := line[n:]
	level = runLen(rest, 0, '#')
	text = strings.TrimSpace(rest[level:])
	// An optional closing run of #s is decoration, not text.
	if t := strings.TrimRight(text, "#"); t == "" {
		text = ""
	} else if t != text && (strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t")) {
		text = strings.TrimSpace(t)
	}
	return level, text
}

func isRule(line string) bool {
	t := strings.TrimSpace(line)
	if len(t) < 3 || (t[0] != '-' && t[0] != '*' && t[0] != '_') {
		return false
	}
	n := 0
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case t[0]:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3
}

func isQuote(line string) bool {
	ind, n := indentOf(line)
	return ind <= 3 && n < len(line) && line[n] == '>'
}

func unquote(line string) string {
	_, n := indentOf(line)
	return strings.TrimPrefix(line[n+1:], " ")
}

type itemLine struct {
	indent  int
	ordered bool
	num     int
	marker  string
	content string
}

func listItem(line string) (itemLine, bool) {
	ind, n := indentOf(line)
	rest := line[n:]
	if rest == "" || isRule(line) {
		return itemLine{}, false
	}
	afterMarker := func(k int) (string, bool) {
		if k == len(rest) {
			return "", true
		}
		if rest[k] != ' ' && rest[k] != '\t' {
			return "", false
		}
		return strings.TrimSpace(rest[k:]), true
	}
	if c := rest[0]; c == '-' || c == '*' || c == '+' {
		content, ok := afterMarker(1)
		return itemLine{indent: ind, marker: "-", content: content}, ok
	}
	k := 0
	for k < len(rest) && k < 9 && rest[k] >= '0' && rest[k] <= '9' {
		k++
	}
	if k == 0 || k == len(rest) || (rest[k] != '.' && rest[k] != ')') {
		return itemLine{}, false
	}
	content, ok := afterMarker(k + 1)
	num, _ := strconv.Atoi(rest[:k])
	return itemLine{indent: ind, ordered: true, num: num, marker: rest[:k+1], content: content}, ok
}

func isItem(line string) bool {
	_, ok := listItem(line)
	return ok
}

// parseList reads one list, nesting items by indentation. A change between
// bullets and numbers at the top level ends the list, so the caller starts a
// new one; deeper down it starts a sibling sublist.
func parseList(lines []string) (*list, int) {
	first, _ := listItem(lines[0])
	root := &list{ordered: first.ordered, start: first.num}
	type frame struct {
		indent int
		l      *list
	}
	stack := []frame{{first.indent, root}}
	var last *item
	i := 0
	for i < len(lines) {
		line := lines[i]
		if isBlank(line) {
			// A blank line ends the list unless an item or an indented
			// continuation follows it.
			j := i + 1
			for j < len(lines) && isBlank(lines[j]) {
				j++
			}
			if j == len(lines) {
				return root, j
			}
			if ind, _ := indentOf(lines[j]); !isItem(lines[j]) && (ind < 2 || interrupts(lines[j])) {
				return root, i
			}
			i = j
			continue
		}
		m, ok := listItem(line)
		if !ok {
			if interrupts(line) {
				return root, i
			}
			// A lazy continuation line belongs to the latest item.
			if last.text != "" {
				last.text += "\n"
			}
			last.text += strings.TrimSpace(line)
			i++
			continue
		}
		for len(stack) > 1 && m.indent < stack[len(stack)-1].indent {
			stack = stack[:len(stack)-1]
		}
		top := &stack[len(stack)-1]
		switch {
		case m.indent >= top.indent+2:
			parent := top.l.items[len(top.l.items)-1]
			sub := &list{ordered: m.ordered, start: m.num}
			parent.lists = append(parent.lists, sub)
			stack = append(stack, frame{m.indent, sub})
			top = &stack[len(stack)-1]
		case m.ordered != top.l.ordered:
			if len(stack) == 1 {
				return root, i
			}
			parent := stack[len(stack)-2].l.items[len(stack[len(stack)-2].l.items)-1]
			sub := &list{ordered: m.ordered, start: m.num}
			parent.lists = append(parent.lists, sub)
			*top = frame{m.indent, sub}
		}
		last = &item{marker: m.marker, text: m.content}
		top.l.items = append(top.l.items, last)
		i++
	}
	return root, i
}

// runLen counts the bytes equal to c starting at s[i].
func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}
