package markdown_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/markdown"
)

// dump writes nodes compactly: a kind's name, its fields, its children in
// parentheses.
func dump(nodes []*markdown.Node) string {
	var parts []string
	for _, n := range nodes {
		var s string
		switch n.Kind {
		case markdown.KindParagraph:
			s = "p"
		case markdown.KindHeading:
			s = fmt.Sprintf("h%d", n.Level)
		case markdown.KindList:
			s = "ul"
			if n.Ordered {
				s = fmt.Sprintf("ol%d", n.Start)
			}
		case markdown.KindItem:
			s = "li" + n.Marker
		case markdown.KindQuote:
			s = "quote"
		case markdown.KindCodeBlock:
			s = fmt.Sprintf("pre[%s]%q", n.Lang, n.Text)
		case markdown.KindRule:
			s = fmt.Sprintf("hr%q", n.Text)
		case markdown.KindText:
			s = fmt.Sprintf("%q", n.Text)
		case markdown.KindBreak:
			s = "br"
		case markdown.KindEmphasis:
			s = "em"
		case markdown.KindStrong:
			s = "strong"
		case markdown.KindStrike:
			s = "del"
		case markdown.KindCode:
			s = fmt.Sprintf("code%q", n.Text)
		case markdown.KindLink:
			s = "a<" + n.URL + ">"
			if n.Bare {
				s = "bare<" + n.URL + ">"
			}
		}
		if len(n.Children) > 0 {
			s += "(" + dump(n.Children) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"empty", "", ""},
		{"paragraphs", "a\nb\n\nc", `p("a" br "b") p("c")`},
		{"emphasis", "**b** *i* ~~s~~ `c`", `p(strong("b") " " em("i") " " del("s") " " code"c")`},
		{"nested emphasis", "***both***", `p(em(strong("both")))`},
		{"snake case stays text", "snake_case_name", `p("snake_case_name")`},
		{"link", "[**docs**](https://go.dev)", `p(a<https://go.dev>(strong("docs")))`},
		{"link without text shows its address", "[](https://go.dev)", `p(a<https://go.dev>("https://go.dev"))`},
		{"unsafe link is its text", "[x](javascript:alert(1)) y", `p("x" " y")`},
		{"bare url", "see https://a.b/c_d.", `p("see " bare<https://a.b/c_d>("https://a.b/c_d") ".")`},
		{"autolink", "<https://a.b>", `p(a<https://a.b>("https://a.b"))`},
		{"heading", "## A *b*", `h2("A " em("b"))`},
		{"empty heading", "#", "h1"},
		{"code block", "```go\nx := 1\n```", `pre[go]"x := 1"`},
		{"odd language dropped", "```<x>\ny\n```", `pre[]"y"`},
		{"rule", "***", `hr"***"`},
		{"quote", "> a\n>\n> > b", `quote(p("a") quote(p("b")))`},
		{"list", "- a\n  - b\n- c", `ul(li-("a" ul(li-("b"))) li-("c"))`},
		{"ordered list", "3) x\n4) y", `ol3(li3)("x") li4)("y"))`},
		{"item continuation", "1. a\n   more", `ol1(li1.("a" br "more"))`},
		{"list after text", "Steps:\n- go", `p("Steps:") ul(li-("go"))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dump(markdown.Parse(tt.md).Blocks); got != tt.want {
				t.Errorf("Parse(%q)\n got: %s\nwant: %s", tt.md, got, tt.want)
			}
		})
	}
}
