package markdown

import "strings"

// Escape returns markdown that every renderer here shows as s, literally: no
// emphasis, code, link, heading, list or quote comes of it, whatever s holds.
// It is for text from elsewhere placed inside a line (a tool's name, a
// description), so a line break in s becomes a space; like any line, it
// loses the whitespace at its ends when it is one of its own.
//
// Only characters that could start markup are escaped, with a backslash:
// \ (before punctuation or at the end) ` * _ ~ [ ] < everywhere, ":" in
// "://" (a bare URL would become a link in HTML), and what would open a
// block at the start of a line (# - + > and the "." or ")" of "1."). The
// raw markdown, which a webhook or a plain-text mail shows, stays readable.
func Escape(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	lead := leadEscape(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 == len(s) || isASCIIPunct(s[i+1]) {
				b.WriteByte('\\')
			}
		case strings.IndexByte("`*_~[]<", c) >= 0,
			c == ':' && strings.HasPrefix(s[i+1:], "//"),
			i == lead:
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// leadEscape is the index of the byte that makes s open a block when s
// begins a line (the "#" of a heading, the "-" of a list item, the "." of
// "1."), or -1. The parser's own tests decide, so "-5" and "#tag" stay as
// they are.
func leadEscape(s string) int {
	if !interrupts(s) {
		return -1
	}
	_, n := indentOf(s)
	if m, ok := listItem(s); ok && m.ordered {
		return n + len(m.marker) - 1
	}
	return n
}

// CodeBlock returns a fenced code block that every renderer here shows as
// code, exactly as written (line breaks normalised, trailing blank space
// dropped), whatever code holds: its fence is longer than any run of
// backticks inside, so no line of code can close it early.
func CodeBlock(code string) string {
	fence := strings.Repeat("`", max(3, longestRun(code, '`')+1))
	return fence + "\n" + code + "\n" + fence
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	most := 0
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], c)
		if j < 0 {
			break
		}
		n := runLen(s, i+j, c)
		most = max(most, n)
		i += j + n
	}
	return most
}
