// Command switchboard runs Herald's switchboard as its own process, for a compose fleet.
package main

import (
	"github.com/heraldhq/herald/services/process"
	"github.com/heraldhq/herald/services/switchboard"

	// The channel types herald.yaml may name, with their settings and
	// checks: the configuration needs them (docs/decisions.md).
	_ "github.com/heraldhq/herald/services/messenger/channels"
)

func main() { process.Exec(switchboard.Command()) }
