// Command butler runs Herald's butler as its own process, for a compose fleet.
package main

import (
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/process"
)

func main() { process.Exec(butler.Command()) }
