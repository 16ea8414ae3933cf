package markdown

import (
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// minLimit is the smallest limit honoured. The deepest nesting of tags
// without attributes that TelegramHTML produces (blockquote, b, i, s, code),
// opened and closed around one escaped character, just fits in it.
const minLimit = 64

// TelegramChunks renders md and splits it into chunks, each at most limit
// characters counted in UTF-16 code units of the HTML string (Telegram counts
// UTF-16), each a valid, balanced Telegram HTML fragment on its own: tags open
// at a cut are closed at the end of the chunk and reopened (same tag, same
// attributes) at the start of the next.
//
// A cut goes at a paragraph break ("\n\n") if the chunk has one, else at a
// line break, else at a space, else anywhere between characters; never inside
// an entity, a tag or a surrogate pair. The break characters cut at are
// dropped, and so is a stretch of whitespace too long for any chunk; all
// other text is kept in order. If the tags open at a cut leave no room for
// even one character (a link with a URL near the limit), that chunk is sent
// as plain text. A limit below 64 counts as 64. A message that fits is one
// chunk; a message that shows nothing but whitespace is none.
func TelegramChunks(md string, limit int) []string {
	h := TelegramHTML(md)
	if UTF16Len(h) <= max(limit, minLimit) {
		// One chunk, the common case: no need to split it into tokens.
		if !visible(h) {
			return nil // Telegram refuses a message with nothing to show.
		}
		return []string{h}
	}
	var chunks []string
	for _, c := range split(tokenize(h), limit) {
		var b strings.Builder
		open := c.open
		if !c.plain {
			for _, t := range open {
				b.WriteString(t.s)
			}
		}
		for _, t := range c.toks {
			if !c.plain || t.kind == tokText {
				b.WriteString(t.s)
			}
			open = t.apply(open)
		}
		if !c.plain {
			for k := len(open) - 1; k >= 0; k-- {
				b.WriteString(open[k].closer())
			}
		}
		chunks = append(chunks, b.String())
	}
	return chunks
}

// chunk is one piece of a message as split cuts it: the spans open at its
// start, to be opened again, and its tokens; a plain chunk is sent as its
// text alone.
type chunk struct {
	open  []token
	toks  []token
	plain bool
}

// split cuts toks into chunks of at most limit units each, as
// TelegramChunks describes, for every chat markup: only the tokens' costs
// differ.
func split(toks []token, limit int) []chunk {
	limit = max(limit, minLimit)
	last := -1 // the last token with visible, non-blank text
	for i, t := range toks {
		if t.kind == tokText && !t.blank() {
			last = i
		}
	}
	if last < 0 {
		// Telegram refuses a message with nothing to show.
		return nil
	}
	var chunks []chunk
	var open []token
	for i := 0; ; {
		// Tags closing right at a cut would only make empty elements.
		for i < len(toks) && toks[i].kind == tokClose {
			open = toks[i].apply(open)
			i++
		}
		if i > last {
			return chunks
		}
		c := cut(toks, i, open, limit, false)
		if c.end < 0 {
			// Even one character does not fit beside the open tags (a very
			// long link, say): send this stretch as plain text instead.
			c = cut(toks, i, nil, limit, true)
		}
		if c.end < 0 {
			// More blank space than a whole message holds: Telegram refuses
			// a chunk of only whitespace, and nobody misses the blank.
			for ; toks[i].kind != tokText || toks[i].blank(); i++ {
				open = toks[i].apply(open)
			}
			continue
		}
		chunks = append(chunks, chunk{open: open, toks: toks[i:c.end], plain: c.plain})
		for _, t := range toks[i:c.end] {
			open = t.apply(open)
		}
		i = c.end + c.drop
	}
}

type cutClass int

const (
	cutParagraph cutClass = iota
	cutLine
	cutSpace
	cutAnywhere
	numCutClasses
)

type cutPoint struct {
	end   int // the chunk is toks[start:end]
	drop  int // break tokens after end that no chunk shows
	plain bool
}

// cut finds where the chunk starting at toks[start] ends: the last cut of the
// most preferred class that still fits. In plain mode tags are left out and
// cost nothing.
func cut(toks []token, start int, open []token, limit int, plain bool) cutPoint {
	size := 0
	for _, t := range open {
		size += t.units
	}
	best := [numCutClasses]int{-1, -1, -1, -1}
	drops := [numCutClasses]int{2, 1, 1, 0}
	text := false // the chunk so far shows something besides whitespace
	for j := start; j < len(toks); j++ {
		t := toks[j]
		if text && (plain || toks[j-1].kind != tokOpen) {
			best[classify(toks, j)] = j
		}
		switch {
		case t.kind == tokText && plain:
			size += t.alone
			text = text || !t.blank()
		case t.kind == tokText:
			size += t.units
			text = text || !t.blank()
		case plain:
		case t.kind == tokOpen:
			size += t.units
		}
		if size > limit {
			for c, end := range best {
				if end >= 0 {
					return cutPoint{end: end, drop: drops[c], plain: plain}
				}
			}
			return cutPoint{end: -1}
		}
	}
	return cutPoint{end: len(toks), plain: plain}
}

func classify(toks []token, j int) cutClass {
	switch toks[j].s {
	case "\n":
		if j+1 < len(toks) && toks[j+1].s == "\n" {
			return cutParagraph
		}
		return cutLine
	case " ":
		return cutSpace
	}
	return cutAnywhere
}

type tokKind uint8

const (
	tokText tokKind = iota
	tokOpen
	tokClose
)

// token is an indivisible piece of a message: a tag, an entity or one
// character of Telegram HTML, or a character or span of layout. Cutting
// only between tokens is what keeps entities, tags and surrogate pairs
// whole.
type token struct {
	s    string // the HTML, or the character
	node *Node  // the span a layout token opens or closes
	// units is what the token adds to a chunk, an open tag's closing
	// included; alone, what a character adds to a chunk of plain text.
	units, alone int
	kind         tokKind
}

func (t token) blank() bool { return strings.TrimSpace(t.s) == "" }

// tag is the name of an HTML token's tag.
func (t token) tag() string {
	name, _, _ := strings.Cut(strings.TrimPrefix(t.s[1:len(t.s)-1], "/"), " ")
	return name
}

func (t token) closer() string { return "</" + t.tag() + ">" }

// apply returns the stack of open tags after t.
func (t token) apply(stack []token) []token {
	switch t.kind {
	case tokOpen:
		return append(stack[:len(stack):len(stack)], t)
	case tokClose:
		if len(stack) > 0 {
			return stack[:len(stack)-1]
		}
	}
	return stack
}

// visible reports whether HTML that TelegramHTML produced has a text token
// that is not blank (as tokenize would split it), without splitting it.
func visible(h string) bool {
	for i := 0; i < len(h); {
		switch h[i] {
		case '<':
			i += strings.IndexByte(h[i:], '>') + 1
		case '&':
			return true // an entity is never blank
		default:
			r, n := utf8.DecodeRuneInString(h[i:])
			if !unicode.IsSpace(r) {
				return true
			}
			i += n
		}
	}
	return false
}

// tokenize splits HTML that TelegramHTML produced. It relies on that: every
// "<" starts a tag whose first ">" ends it, and every "&" starts an entity.
func tokenize(h string) []token {
	toks := make([]token, 0, len(h)) // one at most per byte: no regrowing
	for i := 0; i < len(h); {
		var t token
		switch h[i] {
		case '<':
			j := strings.IndexByte(h[i:], '>')
			t.s = h[i : i+j+1]
			t.kind = tokOpen
			if t.s[1] == '/' {
				t.kind = tokClose
			}
		case '&':
			j := strings.IndexByte(h[i:], ';')
			t.s = h[i : i+j+1]
		default:
			_, n := utf8.DecodeRuneInString(h[i:])
			t.s = h[i : i+n]
		}
		t.units = UTF16Len(t.s)
		t.alone = t.units
		if t.kind == tokOpen {
			t.units += len(t.tag()) + 3 // its closer
		}
		toks = append(toks, t)
		i += len(t.s)
	}
	return toks
}

// UTF16Len is the length of s in UTF-16 code units, the unit in which
// Telegram, Slack and Discord count a message's length.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
