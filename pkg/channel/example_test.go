package channel_test

import (
	"fmt"

	"github.com/heraldhq/herald/pkg/channel"
	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/markdown"
)

func ExampleOf() {
	md := "**Build failed**\n\n" + markdown.CodeBlock("make: *** [all] Error 2")
	for _, typ := range []string{"telegram", "slack", "discord", "email"} {
		c, _ := channel.Of(typ)
		l := spec.WholeLimit
		if c.Limit != nil {
			l = *c.Limit
		}
		fmt.Printf("%s: %d of %d, fits: %v\n", typ, l.Size(md)+l.Mark, l.Max, l.Fits(md))
	}
	// Output:
	// telegram: 58 of 4096, fits: true
	// slack: 47 of 3000, fits: true
	// discord: 209 of 2000, fits: true
	// email: 49 of 65536, fits: true
}
