package markdown

// Kind is what a Node is.
type Kind uint8

// The kinds of blocks, then of inlines. The comment on each names the
// fields of Node it uses.
const (
	KindParagraph Kind = iota // Children: inlines
	KindHeading               // Level (1-6); Children: inlines, none if empty
	KindList                  // Ordered, Start; Children: items
	KindItem                  // Marker; Children: inlines, then sublists
	KindQuote                 // Children: blocks
	KindCodeBlock             // Text: the code; Lang: "" or a sane name
	KindRule                  // Text: the line as written ("---")
	KindText                  // Text
	KindBreak                 // a line break inside a paragraph or item
	KindEmphasis              // Children
	KindStrong                // Children
	KindStrike                // Children
	KindCode                  // Text
	KindLink                  // URL; Bare for an address in running text; Children: its text
)

// Node is a block or an inline of a parsed document.
type Node struct {
	Kind Kind
	// Bare marks a link written as its address in running text, which
	// the chat apps link by themselves.
	Bare bool
	// Ordered, and Start (its first number), describe a list.
	Ordered bool
	Start   int
	// Level is a heading's level.
	Level int
	Text  string
	// Lang is a code block's language, checked to be a plain name.
	Lang string
	// URL is a link's address: always http, https, mailto or
	// tg://resolve. A link to anything else parses as its text.
	URL string
	// Marker is an item's marker: "-" for any bullet, "3." or "3)" as
	// written.
	Marker   string
	Children []*Node
}

// Doc is a parsed document: its blocks in order.
type Doc struct {
	Blocks []*Node
}

// Parse parses md into the tree that every renderer here writes from. It
// never fails: what does not parse as markup is text.
func Parse(md string) *Doc {
	return &Doc{Blocks: parseBlocks(normalize(md))}
}

// itemParts splits an item's children into its inlines and its sublists.
func itemParts(it *Node) (inlines, lists []*Node) {
	for i, n := range it.Children {
		if n.Kind == KindList {
			return it.Children[:i], it.Children[i:]
		}
	}
	return it.Children, nil
}
