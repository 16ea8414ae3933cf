package telegram_test

import (
	"fmt"

	"github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/markdown"
)

func ExampleHTML_report() {
	md := "# Build report\n\n" +
		"**main** passed in `3m12s`; see [the logs](https://ci.example.com/run/42).\n\n" +
		"- 2 < 3 & tests_passed\n" +
		"- [not a link](javascript:alert(1))"
	fmt.Println(telegram.HTML(md))
	// Output:
	// <b>Build report</b>
	//
	// <b>main</b> passed in <code>3m12s</code>; see <a href="https://ci.example.com/run/42">the logs</a>.
	//
	// - 2 &lt; 3 &amp; tests_passed
	// - not a link
}

func ExampleChunks() {
	md := "First paragraph.\n\n**" + "A long bold paragraph that does not fit in one small message." + "**"
	for _, chunk := range telegram.Chunks(markdown.Parse(md), 64) {
		fmt.Println(chunk)
	}
	// Output:
	// First paragraph.
	// <b>A long bold paragraph that does not fit in one small</b>
	// <b>message.</b>
}

func ExampleHTML() {
	fmt.Println(telegram.HTML("# Build\n\n**main** passed; see [the logs](https://ci.example.com/run/42) & <!channel>."))
	// Output:
	// <b>Build</b>
	//
	// <b>main</b> passed; see <a href="https://ci.example.com/run/42">the logs</a> &amp; &lt;!channel&gt;.
}
