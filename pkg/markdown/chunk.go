package markdown

import (
	"strings"
	"unicode/utf16"
)

// MinLimit is the smallest limit Chunks honours. The deepest nesting of
// spans without attributes that a chat message has (a quote, bold, italic,
// strike and code), opened and closed in Telegram HTML around one escaped
// character, just fits in it.
const MinLimit = 64

// Chunk is one piece of a message as Chunks cuts it: the spans open at its
// start, to be opened again, and its tokens; a plain chunk is sent as its
// text alone.
type Chunk struct {
	open  []token
	toks  []token
	plain bool
}

// split cuts toks into chunks of at most limit units each, as Chunks
// describes, for every chat markup: only the tokens' costs differ.
func split(toks []token, limit int) []Chunk {
	limit = max(limit, MinLimit)
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
	var chunks []Chunk
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
		chunks = append(chunks, Chunk{open: open, toks: toks[i:c.end], plain: c.plain})
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

// token is an indivisible piece of a message: a character, or the opening
// or closing of a span. Cutting only between tokens is what keeps escapes,
// markers and surrogate pairs whole.
type token struct {
	s    string // the character
	node *Node  // the span an open or close token is of
	// units is what the token adds to a chunk, a span's closing included;
	// alone, what a character adds to a chunk of plain text.
	units, alone int
	kind         tokKind
}

func (t token) blank() bool { return strings.TrimSpace(t.s) == "" }

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

// UTF16Len is the length of s in UTF-16 code units, the unit in which
// Telegram, Slack and Discord count a message's length.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
