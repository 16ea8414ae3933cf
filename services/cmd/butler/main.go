// Command butler runs Herald's butler as its own process, for a compose fleet.
package main

import (
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/process"

	// The channel types herald.yaml may name, with their settings and
	// checks: the configuration needs them (docs/decisions.md).
	_ "github.com/heraldhq/herald/services/messenger/channels"
)

func main() { process.Exec(butler.Command()) }
