// Command switchboard runs Herald's switchboard as its own process, for a compose fleet.
package main

import (
	"github.com/heraldhq/herald/services/process"
	"github.com/heraldhq/herald/services/switchboard"
)

func main() { process.Exec(switchboard.Command()) }
