package slack_test

import (
	"fmt"

	"github.com/heraldhq/herald/pkg/channel/slack"
	"github.com/heraldhq/herald/pkg/markdown"
)

func ExampleChunks() {
	md := "First paragraph.\n\n**" + "A long bold paragraph that does not fit in one small message." + "**"
	for _, c := range slack.Chunks(markdown.Parse(md), 64) {
		fmt.Printf("%q %q\n", c.Text, c.Fallback)
	}
	// Output:
	// "First paragraph." "First paragraph."
	// "*A long bold paragraph that does not fit in one small message.*" "A long bold paragraph that does not fit in one small message."
}

func ExampleMrkdwn() {
	fmt.Println(slack.Mrkdwn("# Build\n\n**main** passed; see [the logs](https://ci.example.com/run/42) & <!channel>."))
	// Output:
	// *Build*
	//
	// *main* passed; see <https://ci.example.com/run/42|the logs> &amp; &lt;!channel&gt;.
}
