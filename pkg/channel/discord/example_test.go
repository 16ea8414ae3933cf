package discord_test

import (
	"fmt"

	"github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/pkg/markdown"
)

func ExampleChunks() {
	md := "First paragraph.\n\n**" + "A long bold paragraph that does not fit in one small message." + "**"
	for _, c := range discord.Chunks(markdown.Parse(md), 64) {
		fmt.Println(c)
	}
	// Output:
	// First paragraph.
	// **A long bold paragraph that does not fit in one small**
	// **message.**
}

func ExampleMarkdown() {
	fmt.Println(discord.Markdown("# Build\n\n**main** passed; see [the logs](https://ci.example.com/run/42) & <!channel>."))
	// Output:
	// **Build**
	//
	// **main** passed; see [the logs](https://ci.example.com/run/42) & \<!channel\>.
}
