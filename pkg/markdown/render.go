package markdown

import (
	"strconv"
	"strings"
)

// Telegram understands only &lt; &gt; &amp; and &quot;, and counts every
// escaped character against the message limit, so text escapes the minimum.
var (
	tgText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	tgAttr = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	htText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")
)

// dialect is what differs between the two outputs at the inline level.
type dialect struct {
	strong, em, strike string
	br                 string
	esc, attr          *strings.Replacer
	// telegram applies Telegram's nesting rules: a link may not hold code,
	// and tags that repeat an enclosing one are dropped.
	telegram bool
	// bareLinks makes bare URLs into <a>; Telegram links them by itself.
	bareLinks bool
}

var (
	telegramDialect = dialect{strong: "b", em: "i", strike: "s", br: "\n", esc: tgText, attr: tgAttr, telegram: true}
	htmlDialect     = dialect{strong: "strong", em: "em", strike: "del", br: "<br>\n", esc: htText, attr: htText, bareLinks: true}
)

type inlineWriter struct {
	d    *dialect
	b    *strings.Builder
	open map[inlineKind]bool // formatting tags currently open
	link bool
}

func (d *dialect) inline(b *strings.Builder, src string, open ...inlineKind) {
	w := &inlineWriter{d: d, b: b, open: map[inlineKind]bool{}}
	for _, k := range open {
		w.open[k] = true
	}
	w.write(parseInline(src, false))
}

func (w *inlineWriter) write(nodes []*inline) {
	for _, n := range nodes {
		switch n.kind {
		case inlineText:
			w.b.WriteString(w.d.esc.Replace(n.text))
		case inlineBreak:
			w.b.WriteString(w.d.br)
		case inlineCode:
			if w.link && w.d.telegram {
				w.b.WriteString(w.d.esc.Replace(n.text))
				continue
			}
			w.b.WriteString("<code>" + w.d.esc.Replace(n.text) + "</code>")
		case inlineStrong:
			w.wrap(n, w.d.strong)
		case inlineEm:
			w.wrap(n, w.d.em)
		case inlineStrike:
			w.wrap(n, w.d.strike)
		case inlineLink:
			w.writeLink(n)
		}
	}
}

func (w *inlineWriter) wrap(n *inline, tag string) {
	if w.open[n.kind] && w.d.telegram {
		w.write(n.children)
		return
	}
	was := w.open[n.kind]
	w.open[n.kind] = true
	w.b.WriteString("<" + tag + ">")
	w.write(n.children)
	w.b.WriteString("</" + tag + ">")
	w.open[n.kind] = was
}

func (w *inlineWriter) writeLink(n *inline) {
	children := n.children
	if len(children) == 0 {
		children = []*inline{{kind: inlineText, text: n.text}}
	}
	if !allowedURL(n.text) || (n.bare && !w.d.bareLinks) {
		w.write(children)
		return
	}
	w.b.WriteString(`<a href="` + w.d.attr.Replace(n.text) + `">`)
	w.link = true
	w.write(children)
	w.link = false
	w.b.WriteString("</a>")
}

func renderTelegram(blocks []*block) string {
	var b strings.Builder
	writeTelegramBlocks(&b, blocks, false)
	return b.String()
}

// writeTelegramBlocks separates blocks by a blank line, which is the only
// paragraph structure a Telegram message has.
func writeTelegramBlocks(b *strings.Builder, blocks []*block, inQuote bool) {
	d := &telegramDialect
	for _, bl := range blocks {
		var p strings.Builder
		switch bl.kind {
		case blockPara:
			d.inline(&p, bl.text)
		case blockHeading:
			if bl.text != "" {
				p.WriteString("<b>")
				d.inline(&p, bl.text, inlineStrong)
				p.WriteString("</b>")
			}
		case blockCode:
			if bl.text == "" {
				break
			}
			if bl.lang != "" {
				p.WriteString(`<pre><code class="language-` + tgAttr.Replace(bl.lang) + `">` + tgText.Replace(bl.text) + "</code></pre>")
			} else {
				p.WriteString("<pre>" + tgText.Replace(bl.text) + "</pre>")
			}
		case blockRule:
			p.WriteString(tgText.Replace(bl.text))
		case blockList:
			writeTelegramList(&p, bl.list, 0)
		case blockQuote:
			var q strings.Builder
			writeTelegramBlocks(&q, bl.quote, true)
			switch {
			case q.Len() == 0:
			case inQuote: // Telegram cannot nest quotes; the outer one shows it.
				p.WriteString(q.String())
			default:
				p.WriteString("<blockquote>" + q.String() + "</blockquote>")
			}
		}
		if p.Len() == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(p.String())
	}
}

func writeTelegramList(b *strings.Builder, l *list, depth int) {
	indent := strings.Repeat("  ", depth)
	for _, it := range l.items {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(indent + it.marker + " ")
		var t strings.Builder
		telegramDialect.inline(&t, it.text)
		// Continuation lines line up under the item's text.
		b.WriteString(strings.ReplaceAll(t.String(), "\n", "\n"+indent+strings.Repeat(" ", len(it.marker)+1)))
		for _, sub := range it.lists {
			writeTelegramList(b, sub, depth+1)
		}
	}
}

func renderHTML(blocks []*block) string {
	var b strings.Builder
	writeHTMLBlocks(&b, blocks)
	return b.String()
}

func writeHTMLBlocks(b *strings.Builder, blocks []*block) {
	d := &htmlDialect
	for i, bl := range blocks {
		if i > 0 {
			b.WriteString("\n")
		}
		switch bl.kind {
		case blockPara:
			b.WriteString("<p>")
			d.inline(b, bl.text)
			b.WriteString("</p>")
		case blockHeading:
			h := "h" + strconv.Itoa(bl.level)
			b.WriteString("<" + h + ">")
			d.inline(b, bl.text)
			b.WriteString("</" + h + ">")
		case blockCode:
			if bl.lang != "" {
				b.WriteString(`<pre><code class="language-` + htText.Replace(bl.lang) + `">`)
			} else {
				b.WriteString("<pre><code>")
			}
			b.WriteString(htText.Replace(bl.text) + "</code></pre>")
		case blockRule:
			b.WriteString("<hr>")
		case blockList:
			writeHTMLList(b, bl.list)
		case blockQuote:
			b.WriteString("<blockquote>\n")
			writeHTMLBlocks(b, bl.quote)
			b.WriteString("\n</blockquote>")
		}
	}
}

func writeHTMLList(b *strings.Builder, l *list) {
	switch {
	case !l.ordered:
		b.WriteString("<ul>\n")
	case l.start != 1:
		b.WriteString(`<ol start="` + strconv.Itoa(l.start) + `">` + "\n")
	default:
		b.WriteString("<ol>\n")
	}
	for _, it := range l.items {
		b.WriteString("<li>")
		htmlDialect.inline(b, it.text)
		for _, sub := range it.lists {
			b.WriteString("\n")
			writeHTMLList(b, sub)
		}
		b.WriteString("</li>\n")
	}
	if l.ordered {
		b.WriteString("</ol>")
	} else {
		b.WriteString("</ul>")
	}
}
