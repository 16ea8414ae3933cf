// Command messenger runs Herald's messenger as its own process, for a compose fleet.
package main

import (
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/process"
)

func main() { process.Exec(messenger.Command()) }
