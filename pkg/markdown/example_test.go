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

func ExampleTelegramHTML() {
	md := "# Build report\n\n" +
		"**main** passed in `3m12s`; see [the logs](https://ci.example.com/run/42).\n\n" +
		"- 2 < 3 & tests_passed\n" +
		"- [not a link](javascript:alert(1))"
	fmt.Println(markdown.TelegramHTML(md))
	// Output:
	// <b>Build report</b>
	//
	// <b>main</b> passed in <code>3m12s</code>; see <a href="https://ci.example.com/run/42">the logs</a>.
	//
	// - 2 &lt; 3 &amp; tests_passed
	// - not a link
}

func ExampleTelegramChunks() {
	md := "First paragraph.\n\n**" + "A long bold paragraph that does not fit in one small message." + "**"
	for _, chunk := range markdown.TelegramChunks(md, 64) {
		fmt.Println(chunk)
	}
	// Output:
	// First paragraph.
	// <b>A long bold paragraph that does not fit in one small</b>
	// <b>message.</b>
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
	fmt.Println(markdown.TelegramHTML(md))
	// Output:
	// Claude asks: Remove \*\*everything\*\* in \<b>bin\</b>, see \[docs\](http\://evil.example)
	// Claude asks: Remove **everything** in &lt;b&gt;bin&lt;/b&gt;, see [docs](http://evil.example)
}

func ExampleCodeBlock() {
	command := "cat <<'EOF'\n```\n**not bold**\nEOF"
	fmt.Println(markdown.TelegramHTML(markdown.CodeBlock(command) + "\n\nAllow?"))
	// Output:
	// <pre>cat &lt;&lt;'EOF'
	// ```
	// **not bold**
	// EOF</pre>
	//
	// Allow?
}

func ExampleLimit() {
	md := "**Build failed**\n\n" + markdown.CodeBlock("make: *** [all] Error 2")
	for _, l := range []struct {
		name string
		markdown.Limit
	}{{"telegram", markdown.TelegramLimit}, {"slack", markdown.SlackLimit}, {"whole", markdown.WholeLimit}} {
		fmt.Printf("%s: %d of %d, fits: %v\n", l.name, l.Size(md)+l.Mark, l.Max, l.Fits(md))
	}
	// Output:
	// telegram: 58 of 4096, fits: true
	// slack: 55 of 3000, fits: true
	// whole: 49 of 65536, fits: true
}

func ExampleDoc() {
	doc := markdown.Parse("# Build\n\n**main** passed; see [the logs](https://ci.example.com/run/42) & <!channel>.")
	fmt.Println(doc.TelegramHTML())
	fmt.Println(doc.Slack())
	fmt.Println(doc.Discord())
	fmt.Println(doc.HTML())
	// Output:
	// <b>Build</b>
	//
	// <b>main</b> passed; see <a href="https://ci.example.com/run/42">the logs</a> &amp; &lt;!channel&gt;.
	// *Build*
	//
	// *main* passed; see <https://ci.example.com/run/42|the logs> &amp; &lt;!channel&gt;.
	// **Build**
	//
	// **main** passed; see [the logs](https://ci.example.com/run/42) & \<!channel\>.
	// <h1>Build</h1>
	// <p><strong>main</strong> passed; see <a href="https://ci.example.com/run/42">the logs</a> &amp; &lt;!channel&gt;.</p>
}

func ExampleDoc_SlackChunks() {
	md := "First paragraph.\n\n**" + "A long bold paragraph that does not fit in one small message." + "**"
	for _, c := range markdown.Parse(md).SlackChunks(64) {
		fmt.Printf("%q %q\n", c.Text, c.Fallback)
	}
	// Output:
	// "First paragraph." "First paragraph."
	// "*A long bold paragraph that does not fit in one small message.*" "A long bold paragraph that does not fit in one small message."
}

func ExampleDoc_DiscordChunks() {
	md := "First paragraph.\n\n**" + "A long bold paragraph that does not fit in one small message." + "**"
	for _, c := range markdown.Parse(md).DiscordChunks(64) {
		fmt.Println(c)
	}
	// Output:
	// First paragraph.
	// **A long bold paragraph that does not fit in one small**
	// **message.**
}
