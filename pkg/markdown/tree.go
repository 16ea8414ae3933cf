package markdown

import "strings"

// Node is an element or a text of the HTML TelegramHTML writes, as
// ParseHTML reads it back: what a channel with a markup of its own (Slack's
// mrkdwn, Discord's markdown) renders from.
type Node struct {
	Tag  string // "" for text
	Text string // a text as written, entities and all
	// Attr is an <a>'s href or a <code>'s language, escapes undone.
	Attr string
	Kids []*Node
}

// ParseHTML reads the HTML of TelegramHTML: every "<" starts a tag that its
// first ">" ends, text is escaped, tags are balanced. Anything else is read
// as text, and a stray closing tag is skipped.
func ParseHTML(h string) []*Node {
	root := &Node{Tag: "root"}
	stack := []*Node{root}
	top := func() *Node { return stack[len(stack)-1] }
	for len(h) > 0 {
		i := strings.IndexByte(h, '<')
		if i != 0 {
			if i < 0 {
				i = len(h)
			}
			top().Kids = append(top().Kids, &Node{Text: h[:i]})
			h = h[i:]
			continue
		}
		j := strings.IndexByte(h, '>')
		if j < 0 {
			top().Kids = append(top().Kids, &Node{Text: strings.ReplaceAll(h, "<", "&lt;")})
			break
		}
		tag := h[1:j]
		h = h[j+1:]
		if name, ok := strings.CutPrefix(tag, "/"); ok {
			if len(stack) > 1 && top().Tag == name {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		name, attrs, _ := strings.Cut(tag, " ")
		n := &Node{Tag: name}
		switch {
		case name == "a":
			if v, ok := strings.CutPrefix(attrs, `href="`); ok {
				n.Attr = UnescapeHTML(strings.TrimSuffix(v, `"`))
			}
		case name == "code":
			if v, ok := strings.CutPrefix(attrs, `class="language-`); ok {
				n.Attr = UnescapeHTML(strings.TrimSuffix(v, `"`))
			}
		}
		top().Kids = append(top().Kids, n)
		stack = append(stack, n)
	}
	return root.Kids
}

var htmlEscapes = strings.NewReplacer("&quot;", `"`, "&lt;", "<", "&gt;", ">", "&amp;", "&")

// UnescapeHTML undoes the escapes TelegramHTML writes (&quot; &lt; &gt;
// &amp;).
func UnescapeHTML(s string) string { return htmlEscapes.Replace(s) }
