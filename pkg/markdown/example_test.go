package markdown_test

import (
	"fmt"
	"strings"

	"github.com/heraldhq/herald/pkg/markdown"
)

func ExampleParse() {
	doc := markdown.Parse("# Deploy\n\nRun `make` **now**, see [the logs](https://ci.example.com/42).\n\n- done")
	names := map[markdown.Kind]string{
		markdown.KindHeading: "heading", markdown.KindParagraph: "paragraph", markdown.KindList: "list",
		markdown.KindItem: "item", markdown.KindText: "text", markdown.KindCode: "code",
		markdown.KindStrong: "strong", markdown.KindLink: "link",
	}
	var walk func(nodes []*markdown.Node, depth int)
	walk = func(nodes []*markdown.Node, depth int) {
		for _, n := range nodes {
			fmt.Printf("%s%s %q\n", strings.Repeat("  ", depth), names[n.Kind], n.Text+n.URL)
			walk(n.Children, depth+1)
		}
	}
	walk(doc.Blocks, 0)
	// Output:
	// heading ""
	//   text "Deploy"
	// paragraph ""
	//   text "Run "
	//   code "make"
	//   text " "
	//   strong ""
	//     text "now"
	//   text ", see "
	//   link "https://ci.example.com/42"
	//     text "the logs"
	//   text "."
	// list ""
	//   item ""
	//     text "done"
}

func ExampleHTML() {
	fmt.Println(markdown.HTML("Hi *Ana*,\nthe report is **ready**."))
	// Output:
	// <p>Hi <em>Ana</em>,<br>
	// the report is <strong>ready</strong>.</p>
}

func ExampleEscape() {
	description := "Remove **everything** in <b>bin</b>, see [docs](http://evil.example)"
	md := "Claude asks: " + markdown.Escape(description)
	fmt.Println(md)
	fmt.Println(markdown.HTML(md))
	// Output:
	// Claude asks: Remove \*\*everything\*\* in \<b>bin\</b>, see \[docs\](http\://evil.example)
	// <p>Claude asks: Remove **everything** in &lt;b&gt;bin&lt;/b&gt;, see [docs](http://evil.example)</p>
}

func ExampleCodeBlock() {
	command := "cat <<'EOF'\n```\n**not bold**\nEOF"
	fmt.Println(markdown.HTML(markdown.CodeBlock(command) + "\n\nAllow?"))
	// Output:
	// <pre><code>cat &lt;&lt;&#39;EOF&#39;
	// ```
	// **not bold**
	// EOF</code></pre>
	// <p>Allow?</p>
}

// spans writes a chat message's layout as its text, and its spans as
// [strong …] and [code …].
type spans struct{ b strings.Builder }

func (s *spans) Text(t string) { s.b.WriteString(t) }
func (s *spans) Open(n *markdown.Node) {
	s.b.WriteString(map[markdown.Kind]string{markdown.KindStrong: "[strong ", markdown.KindCode: "[code "}[n.Kind])
}
func (s *spans) Close(*markdown.Node) { s.b.WriteString("]") }

func ExampleDoc_Layout() {
	var s spans
	markdown.Parse("# Build\n\n- **main** passed\n- see `log`").Layout(&s)
	fmt.Println(s.b.String())
	// Output:
	// [strong Build]
	//
	// - [strong main] passed
	// - see [code log]
}
