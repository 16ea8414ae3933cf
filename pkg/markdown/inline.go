package markdown

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// run is one element of an inline text as parseInline first reads it: a
// finished node, or a run of delimiters (* _ ~) that resolveEmphasis pairs.
type run struct {
	node *Node
	*delims
}

type delims struct {
	opens             []Kind // emphasis this run opens, innermost first
	count, orig       int
	closes            int // how many emphases this run closes
	delim             byte
	canOpen, canClose bool
}

// codeSpan is a code span found by scanSpans, keyed by its opening backticks.
type codeSpan struct {
	end     int
	content string
}

// scanSpans finds code spans and matching link brackets in one pass. Code
// spans bind tighter than anything else, so brackets inside them must not
// pair up; doing both here keeps the main pass linear.
func scanSpans(s string) (spans map[int]codeSpan, brackets map[int]int) {
	spans = map[int]codeSpan{}
	brackets = map[int]int{}
	noCloser := map[int]bool{} // backtick run lengths with no run of equal length left
	var open []int
	for i := 0; i < len(s); {
		switch s[i] {
		case '\\':
			if i+1 < len(s) && isASCIIPunct(s[i+1]) {
				i += 2
				continue
			}
		case '`':
			n := runLen(s, i, '`')
			if !noCloser[n] {
				if j := findRun(s, i+n, n); j >= 0 {
					spans[i] = codeSpan{end: j + n, content: trimCode(s[i+n : j])}
					i = j + n
					continue
				}
				noCloser[n] = true
			}
			i += n
			continue
		case '[':
			open = append(open, i)
		case ']':
			if len(open) > 0 {
				brackets[open[len(open)-1]] = i
				open = open[:len(open)-1]
			}
		}
		i++
	}
	return spans, brackets
}

// findRun returns the start of the first run of exactly n backticks at or
// after i, or -1.
func findRun(s string, i, n int) int {
	for i < len(s) {
		j := strings.IndexByte(s[i:], '`')
		if j < 0 {
			return -1
		}
		i += j
		k := runLen(s, i, '`')
		if k == n {
			return i
		}
		i += k
	}
	return -1
}

// trimCode drops one space from each end, which is how markdown lets a code
// span begin or end with a backtick, and turns line breaks into spaces as
// CommonMark does.
func trimCode(c string) string {
	c = strings.ReplaceAll(c, "\n", " ")
	if len(c) >= 2 && c[0] == ' ' && c[len(c)-1] == ' ' && strings.Trim(c, " ") != "" {
		c = c[1 : len(c)-1]
	}
	return c
}

// parseInline parses the inline markup of one paragraph, heading or list
// item. Links cannot nest (neither HTML nor Telegram allows it), so inside a
// link's text brackets and URLs are plain text.
func parseInline(s string, inLink bool) []*Node {
	spans, brackets := scanSpans(s)
	var runs []run
	var buf strings.Builder
	flush := func() {
		if buf.Len() > 0 {
			runs = append(runs, run{node: &Node{Kind: KindText, Text: buf.String()}})
			buf.Reset()
		}
	}
	add := func(n *Node) {
		flush()
		runs = append(runs, run{node: n})
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]):
			buf.WriteByte(s[i+1])
			i += 2
			continue
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			// A backslash hard break; every newline is a break here anyway.
			i++
			continue
		case c == '\n':
			add(&Node{Kind: KindBreak})
			i++
			continue
		case c == '`':
			if sp, ok := spans[i]; ok {
				add(&Node{Kind: KindCode, Text: sp.content})
				i = sp.end
				continue
			}
			n := runLen(s, i, '`')
			buf.WriteString(s[i : i+n])
			i += n
			continue
		case c == '[' && !inLink:
			if j, ok := brackets[i]; ok && j+1 < len(s) && s[j+1] == '(' {
				if dest, end, ok := linkDest(s, j+1); ok {
					text := parseInline(s[i+1:j], true)
					if len(text) == 0 {
						text = []*Node{{Kind: KindText, Text: dest}}
					}
					if allowedURL(dest) {
						add(&Node{Kind: KindLink, URL: dest, Children: text})
					} else {
						for _, n := range text {
							add(n)
						}
					}
					i = end
					continue
				}
			}
		case c == '<' && !inLink:
			if u, end, ok := autolink(s, i); ok {
				add(&Node{Kind: KindLink, URL: u, Children: []*Node{{Kind: KindText, Text: u}}})
				i = end
				continue
			}
		case c == 'h' && !inLink:
			if u, end, ok := bareURL(s, i); ok {
				if allowedURL(u) {
					add(&Node{Kind: KindLink, URL: u, Bare: true, Children: []*Node{{Kind: KindText, Text: u}}})
				} else { // an address with a space in it
					add(&Node{Kind: KindText, Text: u})
				}
				i = end
				continue
			}
		case c == '*' || c == '_' || c == '~':
			n := runLen(s, i, c)
			// A single ~ means "about" far more often than strikethrough.
			if c != '~' || n == 2 {
				canOpen, canClose := flanking(s, i, n, c)
				if canOpen || canClose {
					flush()
					runs = append(runs, run{delims: &delims{delim: c, count: n, orig: n, canOpen: canOpen, canClose: canClose}})
					i += n
					continue
				}
			}
			buf.WriteString(s[i : i+n])
			i += n
			continue
		}
		buf.WriteByte(c)
		i++
	}
	flush()
	return resolveEmphasis(runs)
}

// flanking applies CommonMark's flanking rules, which is what keeps
// snake_case_names and "2 * 3 * 4" from turning italic.
func flanking(s string, i, n int, c byte) (canOpen, canClose bool) {
	before, after := ' ', ' ' // the ends of the text count as whitespace
	if i > 0 {
		before, _ = utf8.DecodeLastRuneInString(s[:i])
	}
	if i+n < len(s) {
		after, _ = utf8.DecodeRuneInString(s[i+n:])
	}
	left := !unicode.IsSpace(after) && (!isPunct(after) || unicode.IsSpace(before) || isPunct(before))
	right := !unicode.IsSpace(before) && (!isPunct(before) || unicode.IsSpace(after) || isPunct(after))
	if c == '_' {
		return left && (!right || isPunct(before)), right && (!left || isPunct(after))
	}
	return left, right
}

// resolveEmphasis pairs delimiter runs the way CommonMark's "process
// emphasis" does, which gets "***both***" and "*a **b** c*" right. It only
// notes on each run which emphasis it opens and closes; nest builds the tree
// afterwards, so a long paragraph costs no repeated copying.
func resolveEmphasis(nodes []run) []*Node {
	var stack []int // indices of runs that may still open
	// bottom[k] is the stack height below which no opener can match a closer
	// of kind k; it keeps long runs of unmatched delimiters linear.
	bottom := map[[3]int]int{}
	shrink := func(h int) {
		stack = stack[:h]
		for k, b := range bottom {
			if b > h {
				bottom[k] = h
			}
		}
	}
	for i := range nodes {
		c := &nodes[i]
		if c.delims == nil {
			continue
		}
		for c.canClose && c.count > 0 {
			key := [3]int{int(c.delim), boolInt(c.canOpen), c.orig % 3}
			k := len(stack) - 1
			for ; k >= bottom[key]; k-- {
				if matches(&nodes[stack[k]], c) {
					break
				}
			}
			if k < bottom[key] {
				bottom[key] = len(stack)
				break
			}
			o := &nodes[stack[k]]
			use, kind := 1, KindEmphasis
			switch {
			case c.delim == '~':
				use, kind = 2, KindStrike
			case o.count >= 2 && c.count >= 2:
				use, kind = 2, KindStrong
			}
			o.count -= use
			c.count -= use
			o.opens = append(o.opens, kind)
			c.closes++
			// Openers between the pair can no longer match: emphasis nests.
			if o.count == 0 {
				shrink(k)
			} else {
				shrink(k + 1)
			}
		}
		if c.count > 0 && c.canOpen {
			stack = append(stack, i)
		}
	}
	return nest(nodes)
}

// nest turns the flat nodes into a tree. A run closes its emphasis with its
// leftmost characters and opens with its rightmost, leaving any unmatched
// characters in between as text. Its opens were recorded innermost first.
func nest(runs []run) []*Node {
	type frame struct {
		kind     Kind
		children []*Node
	}
	stack := []frame{{}}
	add := func(n *Node) {
		top := &stack[len(stack)-1]
		top.children = append(top.children, n)
	}
	for _, r := range runs {
		if r.delims == nil {
			add(r.node)
			continue
		}
		for range r.closes {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			add(&Node{Kind: f.kind, Children: f.children})
		}
		if r.count > 0 {
			add(&Node{Kind: KindText, Text: strings.Repeat(string(r.delim), r.count)})
		}
		for _, kind := range slices.Backward(r.opens) {
			stack = append(stack, frame{kind: kind})
		}
	}
	return stack[0].children
}

func matches(o, c *run) bool {
	if o.delim != c.delim || o.count == 0 {
		return false
	}
	if c.delim == '~' {
		return true
	}
	// CommonMark's "rule of 3" stops "*a**b*" from pairing the wrong runs.
	if (o.canClose || c.canOpen) && (o.orig+c.orig)%3 == 0 && (o.orig%3 != 0 || c.orig%3 != 0) {
		return false
	}
	return true
}

// maxDest bounds how far linkDest looks for the end of a link, so that text
// full of "](" cannot make parsing quadratic. Real URLs are far shorter.
const maxDest = 4096

// linkDest parses "(dest)" or "(dest "title")" starting at s[i] == '('.
func linkDest(s string, i int) (dest string, end int, ok bool) {
	s = s[:min(len(s), i+maxDest)]
	j := skipSpace(s, i+1)
	if j < len(s) && s[j] == '<' {
		k := strings.IndexAny(s[j+1:], "<>\n")
		if k < 0 || s[j+1+k] != '>' {
			return "", 0, false
		}
		dest = s[j+1 : j+1+k]
		j += k + 2
	} else {
		start, depth := j, 0
	scan:
		for ; j < len(s); j++ {
			switch c := s[j]; {
			case c == '\\' && j+1 < len(s) && isASCIIPunct(s[j+1]):
				j++
			case c <= ' ':
				break scan
			case c == '(':
				depth++
			case c == ')':
				if depth == 0 {
					break scan
				}
				depth--
			}
		}
		dest = s[start:j]
	}
	if k := skipSpace(s, j); k > j && k < len(s) && strings.IndexByte("\"'(", s[k]) >= 0 {
		closer := s[k]
		if closer == '(' {
			closer = ')'
		}
		t := strings.IndexByte(s[k+1:], closer)
		if t < 0 {
			return "", 0, false
		}
		j = k + 1 + t + 1 // a title is accepted and dropped: neither output shows it
	}
	j = skipSpace(s, j)
	if j >= len(s) || s[j] != ')' {
		return "", 0, false
	}
	return unescape(dest), j + 1, true
}

// autolink parses "<https://...>" at s[i] == '<'.
func autolink(s string, i int) (string, int, bool) {
	k := strings.IndexAny(s[i+1:], "<> \t\n")
	if k < 0 || s[i+1+k] != '>' {
		return "", 0, false
	}
	u := s[i+1 : i+1+k]
	if !allowedURL(u) {
		return "", 0, false
	}
	return u, i + k + 2, true
}

// bareURL recognises an http(s) URL in running text so that the underscores
// and asterisks inside it stay part of the URL instead of becoming emphasis.
func bareURL(s string, i int) (string, int, bool) {
	rest := s[i:]
	var scheme int
	switch {
	case strings.HasPrefix(rest, "https://"):
		scheme = len("https://")
	case strings.HasPrefix(rest, "http://"):
		scheme = len("http://")
	default:
		return "", 0, false
	}
	if i > 0 {
		if r, _ := utf8.DecodeLastRuneInString(s[:i]); unicode.IsLetter(r) || unicode.IsDigit(r) {
			return "", 0, false
		}
	}
	j := i
	for j < len(s) && s[j] > ' ' && s[j] != '<' && s[j] != '`' {
		j++
	}
	// Trailing punctuation belongs to the sentence, and so does a ")" that
	// closes a parenthesis opened before the URL.
	opens, closes := strings.Count(s[i:j], "("), strings.Count(s[i:j], ")")
	for j > i {
		c := s[j-1]
		if c == ')' && opens < closes {
			closes--
		} else if strings.IndexByte(".,:;!?'\"*_~", c) < 0 {
			break
		}
		j--
	}
	if j-i <= scheme {
		return "", 0, false
	}
	return s[i:j], j, true
}

// allowedURL admits only schemes that cannot run script in a mail client or
// be refused by Telegram. Of Telegram's own tg: links only tg://resolve (a
// user, bot or channel by name) passes: tg://proxy and tg://socks would
// offer the reader a proxy of the sender's choosing, tg://login and the like
// act on their account.
func allowedURL(u string) bool {
	colon := strings.IndexByte(u, ':')
	if colon <= 0 {
		return false
	}
	switch strings.ToLower(u[:colon]) {
	case "http", "https", "mailto":
	case "tg":
		rest := strings.ToLower(u[colon:])
		if rest != "://resolve" && !strings.HasPrefix(rest, "://resolve?") {
			return false
		}
	default:
		return false
	}
	for _, r := range u {
		if r <= ' ' || r == 0x7f || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
		i++
	}
	return i
}

func isASCIIPunct(c byte) bool {
	return c < utf8.RuneSelf && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) >= 0
}

func isPunct(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
