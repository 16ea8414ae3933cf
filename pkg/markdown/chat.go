package markdown

import (
	"strings"
	"unicode/utf8"
)

// Sink is what a chat markup writes: a chat message (Telegram, Slack,
// Discord) has no headings, lists or nested quotes, only text and a few
// spans over it, which Layout gives to a Sink, the same for every chat,
// and each writes in its own markup. The spans are KindStrong,
// KindEmphasis, KindStrike, KindCode, KindCodeBlock, KindLink and
// KindQuote.
type Sink interface {
	Text(s string)
	Open(n *Node)
	Close(n *Node)
}

// headingSpan is the bold a heading is shown in.
var headingSpan = &Node{Kind: KindStrong}

// Layout writes d to w as a chat message: blocks apart by a blank line,
// headings as bold lines, list items as lines of text.
func (d *Doc) Layout(w Sink) { layoutBlocks(d.Blocks, w, false) }

// layoutBlocks separates blocks by a blank line, the only paragraph
// structure a chat message has. A quote inside a quote shows in the outer
// one: Telegram cannot nest them.
func layoutBlocks(blocks []*Node, w Sink, inQuote bool) {
	first := true
	for _, n := range blocks {
		if emptyBlock(n) {
			continue
		}
		if !first {
			w.Text("\n\n")
		}
		first = false
		switch n.Kind {
		case KindParagraph:
			layoutInlines(n.Children, w, &inlineState{br: "\n"})
		case KindHeading:
			w.Open(headingSpan)
			layoutInlines(n.Children, w, &inlineState{br: "\n", strong: true})
			w.Close(headingSpan)
		case KindCodeBlock:
			w.Open(n)
			w.Text(n.Text)
			w.Close(n)
		case KindRule:
			w.Text(n.Text)
		case KindList:
			started := false
			layoutList(n, w, 0, &started)
		case KindQuote:
			if inQuote {
				layoutBlocks(n.Children, w, true)
				break
			}
			w.Open(n)
			layoutBlocks(n.Children, w, true)
			w.Close(n)
		}
	}
}

// emptyBlock reports whether a block shows nothing in a chat message.
func emptyBlock(n *Node) bool {
	switch n.Kind {
	case KindHeading:
		return len(n.Children) == 0
	case KindCodeBlock:
		return n.Text == ""
	case KindQuote:
		for _, c := range n.Children {
			if !emptyBlock(c) {
				return false
			}
		}
		return true
	}
	return false
}

// layoutList writes items as lines of text, "- " or "1. " as written,
// sublists indented, continuation lines under the item's text.
func layoutList(l *Node, w Sink, depth int, started *bool) {
	indent := strings.Repeat("  ", depth)
	for _, it := range l.Children {
		if *started {
			w.Text("\n")
		}
		*started = true
		w.Text(indent + it.Marker + " ")
		inlines, lists := itemParts(it)
		layoutInlines(inlines, w, &inlineState{br: "\n" + indent + strings.Repeat(" ", len(it.Marker)+1)})
		for _, sub := range lists {
			layoutList(sub, w, depth+1, started)
		}
	}
}

// inlineState is what is open around an inline, for Telegram's rules,
// which suit every chat: a link holds no code, and a span inside one of
// its own kind adds nothing.
type inlineState struct {
	br                         string // what a line break is written as
	strong, em, strike, inLink bool
}

func (s *inlineState) flag(k Kind) *bool {
	switch k {
	case KindStrong:
		return &s.strong
	case KindEmphasis:
		return &s.em
	}
	return &s.strike
}

func layoutInlines(nodes []*Node, w Sink, s *inlineState) {
	for _, n := range nodes {
		switch n.Kind {
		case KindText:
			w.Text(n.Text)
		case KindBreak:
			w.Text(s.br)
		case KindCode:
			if s.inLink {
				w.Text(n.Text)
				continue
			}
			w.Open(n)
			w.Text(n.Text)
			w.Close(n)
		case KindStrong, KindEmphasis, KindStrike:
			on := s.flag(n.Kind)
			if *on {
				layoutInlines(n.Children, w, s)
				continue
			}
			*on = true
			w.Open(n)
			layoutInlines(n.Children, w, s)
			w.Close(n)
			*on = false
		case KindLink:
			if n.Bare { // the chat apps link an address by themselves
				layoutInlines(n.Children, w, s)
				continue
			}
			s.inLink = true
			w.Open(n)
			layoutInlines(n.Children, w, s)
			w.Close(n)
			s.inLink = false
		}
	}
}

// Plain is the text a chat message of d shows, without its markup.
func (d *Doc) Plain() string {
	var p plainText
	d.Layout(&p)
	return p.b.String()
}

type plainText struct{ b strings.Builder }

func (p *plainText) Text(s string) { p.b.WriteString(s) }
func (p *plainText) Open(*Node)    {}
func (p *plainText) Close(*Node)   {}

// Measure is how a chat markup counts against its limit, for Chunks: a
// bound from above on what a character or a span (its markers both ends)
// adds to a message, given the spans open around it. Char's alone is what
// the character adds to a chunk sent as plain text.
type Measure struct {
	Char func(r rune, open []*Node) (units, alone int)
	Span func(n *Node, open []*Node) int
}

// chatTokens lays d out as tokens for split, costed by m.
type chatTokens struct {
	m     Measure
	toks  []token
	spans []*Node // open
}

func (t *chatTokens) Text(s string) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		units, alone := t.m.Char(r, t.spans)
		t.toks = append(t.toks, token{kind: tokText, s: s[i : i+n], units: units, alone: alone})
		i += n
	}
}

func (t *chatTokens) Open(n *Node) {
	t.toks = append(t.toks, token{kind: tokOpen, node: n, units: t.m.Span(n, t.spans)})
	t.spans = append(t.spans, n)
}

func (t *chatTokens) Close(n *Node) {
	t.toks = append(t.toks, token{kind: tokClose, node: n})
	t.spans = t.spans[:len(t.spans)-1]
}

// Chunks cuts d into chunks of at most limit units as m counts them, each
// to be written whole by Chunk.Replay. A cut goes at a paragraph break if
// the chunk has one, else at a line break, else at a space, else between
// characters; the break characters cut at are dropped, and so is a stretch
// of whitespace too long for any chunk; all other text is kept in order. If
// the spans open at a cut leave no room for even one character (a link
// whose address is near the limit), that chunk is plain text. A limit below
// MinLimit counts as MinLimit; a document that shows nothing but
// whitespace is no chunk. size, about how many characters d has, sizes
// the token list.
func (d *Doc) Chunks(limit int, m Measure, size int) []Chunk {
	t := &chatTokens{m: m, toks: make([]token, 0, size)}
	d.Layout(t)
	return split(t.toks, limit)
}

// Replay writes chunk c to w: the spans open at its start, then its tokens,
// then the closing of what is still open; a plain chunk only its text.
func (c Chunk) Replay(w Sink) {
	var open []*Node
	if !c.plain {
		for _, t := range c.open {
			w.Open(t.node)
			open = append(open, t.node)
		}
	}
	for _, t := range c.toks {
		switch {
		case t.kind == tokText:
			w.Text(t.s)
		case c.plain:
		case t.kind == tokOpen:
			w.Open(t.node)
			open = append(open, t.node)
		case len(open) > 0:
			w.Close(open[len(open)-1])
			open = open[:len(open)-1]
		}
	}
	for k := len(open) - 1; k >= 0; k-- {
		w.Close(open[k])
	}
}

// Plain is the text chunk c shows, without its markup.
func (c Chunk) Plain() string {
	var p plainText
	c.Replay(&p)
	return p.b.String()
}

// SpanWriter is a Sink for a markup whose spans are written once their
// content is known (Slack's and Discord's: their formatting ends at a line
// break, and a link's text is plain). A run of text between spans goes to
// run as one string, since a bare URL or a run of backticks may cross Text
// nodes; inside code and links text is kept as it is, without markup, and
// span writes the span around it.
type SpanWriter struct {
	frames []*frame
	run    func(b *strings.Builder, s string)
	span   func(n *Node, content string) string
}

// frame is a span being written: b is its content so far, pending its text
// not yet given to run.
type frame struct {
	node    *Node
	b       strings.Builder
	pending strings.Builder
	raw     bool
}

// NewSpanWriter returns a SpanWriter writing text by run and spans by span.
func NewSpanWriter(run func(b *strings.Builder, s string), span func(n *Node, content string) string) *SpanWriter {
	return &SpanWriter{frames: []*frame{{}}, run: run, span: span}
}

func (w *SpanWriter) top() *frame { return w.frames[len(w.frames)-1] }

func (w *SpanWriter) flush(f *frame) {
	if f.pending.Len() > 0 {
		w.run(&f.b, f.pending.String())
		f.pending.Reset()
	}
}

// Text writes s.
func (w *SpanWriter) Text(s string) {
	if f := w.top(); f.raw {
		f.b.WriteString(s)
	} else {
		f.pending.WriteString(s)
	}
}

// Open starts span n.
func (w *SpanWriter) Open(n *Node) {
	f := w.top()
	w.flush(f)
	raw := f.raw || n.Kind == KindCode || n.Kind == KindCodeBlock || n.Kind == KindLink
	w.frames = append(w.frames, &frame{node: n, raw: raw})
}

// Close ends the span open last.
func (w *SpanWriter) Close(*Node) {
	f := w.top()
	w.flush(f)
	w.frames = w.frames[:len(w.frames)-1]
	parent := w.top()
	if parent.raw {
		parent.b.WriteString(f.b.String())
		return
	}
	parent.b.WriteString(w.span(f.node, f.b.String()))
}

// String is what has been written.
func (w *SpanWriter) String() string {
	f := w.top()
	w.flush(f)
	return f.b.String()
}

// WrapLines puts marker around the text of each line of s, as Discord and
// Slack need for bold, italic and strike: their formatting ends at a line
// break, and a marker next to a space is shown as written ("** x**"), so
// spaces stay outside and blank lines stay bare.
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

// QuoteLines marks every line of s as quoted, as Slack's and Discord's
// quotes are written: "> " before each, a lone ">" for an empty one, and
// no line before or after.
func QuoteLines(s string) string {
	s = strings.Trim(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		if line == "" {
			lines[i] = ">"
		} else {
			lines[i] = "> " + line
		}
	}
	return strings.Join(lines, "\n")
}

// BreakBackticks puts a zero-width space between backticks that follow
// each other, so that no text opens or closes a code span or block: for
// markups without an escape for them there (Discord's, Slack's mrkdwn).
func BreakBackticks(s string) string {
	for strings.Contains(s, "``") {
		s = strings.ReplaceAll(s, "``", "`\u200b`")
	}
	return s
}

// Inside reports whether a span of kind k is open.
func Inside(open []*Node, k Kind) bool {
	for _, n := range open {
		if n.Kind == k {
			return true
		}
	}
	return false
}
