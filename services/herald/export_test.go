package herald

import (
	"context"
	"fmt"

	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/process"
	"github.com/heraldhq/herald/services/switchboard"
)

// RunService runs one service of a compose fleet (switchboard, messenger,
// butler) as its own process, as its binary does (services/cmd),
// for the tests of the services' command lines.
func RunService(ctx context.Context, service string, args []string, o IO) int {
	var spec process.Spec
	switch service {
	case "switchboard":
		spec = switchboard.Command()
	case "messenger":
		spec = messenger.Command()
	case "butler":
		spec = butler.Command()
	default:
		fmt.Fprintf(o.Stderr, "unknown service %q\n", service)
		return 2
	}
	return process.Main(ctx, spec, args, o)
}
