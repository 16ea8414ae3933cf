package markdown

import (
	"strings"
	"unicode/utf8"
)

// A chat message (Telegram, Slack, Discord) has no headings, lists or
// nested quotes, only text and a few spans over it; layout writes a Doc as
// such a message, the same for the three, and each writes the spans in its
// own markup. The spans are KindStrong, KindEmphasis, KindStrike,
// KindCode, KindCodeBlock, KindLink and KindQuote.
type sink interface {
	text(s string)
	open(n *Node)
	close(n *Node)
}

// headingSpan is the bold a heading is shown in.
var headingSpan = &Node{Kind: KindStrong}

func layout(d *Doc, w sink) { layoutBlocks(d.Blocks, w, false) }

// layoutBlocks separates blocks by a blank line, the only paragraph
// structure a chat message has. A quote inside a quote shows in the outer
// one: Telegram cannot nest them.
func layoutBlocks(blocks []*Node, w sink, inQuote bool) {
	first := true
	for _, n := range blocks {
		if emptyBlock(n) {
			continue
		}
		if !first {
			w.text("\n\n")
		}
		first = false
		switch n.Kind {
		case KindParagraph:
			layoutInlines(n.Children, w, &inlineState{br: "\n"})
		case KindHeading:
			w.open(headingSpan)
			layoutInlines(n.Children, w, &inlineState{br: "\n", strong: true})
			w.close(headingSpan)
		case KindCodeBlock:
			w.open(n)
			w.text(n.Text)
			w.close(n)
		case KindRule:
			w.text(n.Text)
		case KindList:
			started := false
			layoutList(n, w, 0, &started)
		case KindQuote:
			if inQuote {
				layoutBlocks(n.Children, w, true)
				break
			}
			w.open(n)
			layoutBlocks(n.Children, w, true)
			w.close(n)
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
func layoutList(l *Node, w sink, depth int, started *bool) {
	indent := strings.Repeat("  ", depth)
	for _, it := range l.Children {
		if *started {
			w.text("\n")
		}
		*started = true
		w.text(indent + it.Marker + " ")
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

func layoutInlines(nodes []*Node, w sink, s *inlineState) {
	for _, n := range nodes {
		switch n.Kind {
		case KindText:
			w.text(n.Text)
		case KindBreak:
			w.text(s.br)
		case KindCode:
			if s.inLink {
				w.text(n.Text)
				continue
			}
			w.open(n)
			w.text(n.Text)
			w.close(n)
		case KindStrong, KindEmphasis, KindStrike:
			on := s.flag(n.Kind)
			if *on {
				layoutInlines(n.Children, w, s)
				continue
			}
			*on = true
			w.open(n)
			layoutInlines(n.Children, w, s)
			w.close(n)
			*on = false
		case KindLink:
			if n.Bare { // the chat apps link an address by themselves
				layoutInlines(n.Children, w, s)
				continue
			}
			s.inLink = true
			w.open(n)
			layoutInlines(n.Children, w, s)
			w.close(n)
			s.inLink = false
		}
	}
}

// plainText is what a chat message shows, without its markup.
type plainText struct{ b strings.Builder }

func (p *plainText) text(s string) { p.b.WriteString(s) }
func (p *plainText) open(*Node)    {}
func (p *plainText) close(*Node)   {}

// measure is how a chat markup counts against its limit, for chunking: a
// bound from above on what a character or a span (its markers both ends)
// adds to a message, given the spans open around it. alone is what the
// character adds to a chunk sent as plain text.
type measure struct {
	char func(r rune, open []*Node) (units, alone int)
	span func(n *Node, open []*Node) int
}

// chatTokens lays d out as tokens for split, costed by m.
type chatTokens struct {
	m     measure
	toks  []token
	spans []*Node // open
}

func (t *chatTokens) text(s string) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		units, alone := t.m.char(r, t.spans)
		t.toks = append(t.toks, token{kind: tokText, s: s[i : i+n], units: units, alone: alone})
		i += n
	}
}

func (t *chatTokens) open(n *Node) {
	t.toks = append(t.toks, token{kind: tokOpen, node: n, units: t.m.span(n, t.spans)})
	t.spans = append(t.spans, n)
}

func (t *chatTokens) close(n *Node) {
	t.toks = append(t.toks, token{kind: tokClose, node: n})
	t.spans = t.spans[:len(t.spans)-1]
}

// chatChunks cuts d into chunks of at most limit units as m counts them;
// size, the length of d's whole text, is about as many tokens as it has.
func chatChunks(d *Doc, limit int, m measure, size int) []chunk {
	t := &chatTokens{m: m, toks: make([]token, 0, size)}
	layout(d, t)
	return split(t.toks, limit)
}

// replay writes chunk c to w: the spans open at its start, then its tokens,
// then the closing of what is still open; a plain chunk only its text.
func (c chunk) replay(w sink) {
	var open []*Node
	if !c.plain {
		for _, t := range c.open {
			w.open(t.node)
			open = append(open, t.node)
		}
	}
	for _, t := range c.toks {
		switch {
		case t.kind == tokText:
			w.text(t.s)
		case c.plain:
		case t.kind == tokOpen:
			w.open(t.node)
			open = append(open, t.node)
		case len(open) > 0:
			w.close(open[len(open)-1])
			open = open[:len(open)-1]
		}
	}
	for k := len(open) - 1; k >= 0; k-- {
		w.close(open[k])
	}
}

// spanWriter writes a markup whose spans are written once their content is
// known (Slack's and Discord's: their formatting ends at a line break, and a
// link's text is plain). A run of text between spans goes to run as one
// string, since a bare URL or a run of backticks may cross Text nodes;
// inside code and links text is kept as it is, without markup.
type spanWriter struct {
	frames []*frame
	run    func(f *frame, s string)
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

func newSpanWriter(run func(f *frame, s string), span func(n *Node, content string) string) *spanWriter {
	return &spanWriter{frames: []*frame{{}}, run: run, span: span}
}

func (w *spanWriter) top() *frame { return w.frames[len(w.frames)-1] }

func (w *spanWriter) flush(f *frame) {
	if f.pending.Len() > 0 {
		w.run(f, f.pending.String())
		f.pending.Reset()
	}
}

func (w *spanWriter) text(s string) {
	if f := w.top(); f.raw {
		f.b.WriteString(s)
	} else {
		f.pending.WriteString(s)
	}
}

func (w *spanWriter) open(n *Node) {
	f := w.top()
	w.flush(f)
	raw := f.raw || n.Kind == KindCode || n.Kind == KindCodeBlock || n.Kind == KindLink
	w.frames = append(w.frames, &frame{node: n, raw: raw})
}

func (w *spanWriter) close(*Node) {
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

func (w *spanWriter) String() string {
	f := w.top()
	w.flush(f)
	return f.b.String()
}

// wrapLines puts marker around the text of each line of s, as Discord and
// Slack need for bold, italic and strike: their formatting ends at a line
// break, and a marker next to a space is shown as written ("** x**"), so
// spaces stay outside and blank lines stay bare.
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

// breakBackticks puts a zero-width space between backticks that follow
// each other, so that no text opens or closes a code span or block: for
// markups without an escape for them there (Discord's, Slack's mrkdwn).
func breakBackticks(s string) string {
	for strings.Contains(s, "``") {
		s = strings.ReplaceAll(s, "``", "`\u200b`")
	}
	return s
}

// inside reports whether a span of kind k is open.
func inside(open []*Node, k Kind) bool {
	for _, n := range open {
		if n.Kind == k {
			return true
		}
	}
	return false
}
