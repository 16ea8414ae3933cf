package markdown

import (
	"strconv"
	"strings"
)

// htText escapes text and attributes for HTML.
var htText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

// writeHTML writes blocks as an email's HTML: unlike a chat's, it shows
// headings, lists and nested quotes as such, so it walks the tree itself.
func writeHTML(b *strings.Builder, blocks []*Node) {
	for i, n := range blocks {
		if i > 0 {
			b.WriteString("\n")
		}
		switch n.Kind {
		case KindParagraph:
			b.WriteString("<p>")
			writeHTMLInlines(b, n.Children)
			b.WriteString("</p>")
		case KindHeading:
			h := "h" + strconv.Itoa(n.Level)
			b.WriteString("<" + h + ">")
			writeHTMLInlines(b, n.Children)
			b.WriteString("</" + h + ">")
		case KindCodeBlock:
			if n.Lang != "" {
				b.WriteString(`<pre><code class="language-` + htText.Replace(n.Lang) + `">`)
			} else {
				b.WriteString("<pre><code>")
			}
			b.WriteString(htText.Replace(n.Text) + "</code></pre>")
		case KindRule:
			b.WriteString("<hr>")
		case KindList:
			writeHTMLList(b, n)
		case KindQuote:
			b.WriteString("<blockquote>\n")
			writeHTML(b, n.Children)
			b.WriteString("\n</blockquote>")
		}
	}
}

func writeHTMLList(b *strings.Builder, l *Node) {
	switch {
	case !l.Ordered:
		b.WriteString("<ul>\n")
	case l.Start != 1:
		b.WriteString(`<ol start="` + strconv.Itoa(l.Start) + `">` + "\n")
	default:
		b.WriteString("<ol>\n")
	}
	for _, it := range l.Children {
		inlines, lists := itemParts(it)
		b.WriteString("<li>")
		writeHTMLInlines(b, inlines)
		for _, sub := range lists {
			b.WriteString("\n")
			writeHTMLList(b, sub)
		}
		b.WriteString("</li>\n")
	}
	if l.Ordered {
		b.WriteString("</ol>")
	} else {
		b.WriteString("</ul>")
	}
}

func writeHTMLInlines(b *strings.Builder, nodes []*Node) {
	for _, n := range nodes {
		switch n.Kind {
		case KindText:
			_, _ = htText.WriteString(b, n.Text)
		case KindBreak:
			b.WriteString("<br>\n")
		case KindCode:
			b.WriteString("<code>" + htText.Replace(n.Text) + "</code>")
		case KindStrong:
			writeHTMLSpan(b, "strong", n.Children)
		case KindEmphasis:
			writeHTMLSpan(b, "em", n.Children)
		case KindStrike:
			writeHTMLSpan(b, "del", n.Children)
		case KindLink:
			b.WriteString(`<a href="` + htText.Replace(n.URL) + `">`)
			writeHTMLInlines(b, n.Children)
			b.WriteString("</a>")
		}
	}
}

func writeHTMLSpan(b *strings.Builder, tag string, nodes []*Node) {
	b.WriteString("<" + tag + ">")
	writeHTMLInlines(b, nodes)
	b.WriteString("</" + tag + ">")
}
