// Package switchboard is Herald's only router (docs/architecture.md): its
// routing core (package core) with the human-in-the-loop features listed
// in Features, each a package of its own. Run is what every binary runs.
package switchboard

import (
	"context"

	"github.com/heraldhq/herald/services/switchboard/attention"
	"github.com/heraldhq/herald/services/switchboard/claims"
	"github.com/heraldhq/herald/services/switchboard/core"
	"github.com/heraldhq/herald/services/switchboard/prompts"
	"github.com/heraldhq/herald/services/switchboard/questions"
	"github.com/heraldhq/herald/services/switchboard/quiet"
)

// Features are the switchboard's features, in the order the core calls
// them: a prompt or question is recorded before a claim or a note adds its
// buttons, and quiet hours, last, hold only what nothing waits on.
var Features = []core.New{
	prompts.New,
	questions.New,
	claims.New,
	attention.New,
	quiet.New,
}

// Options configure a switchboard.
type Options = core.Options

// Status is the switchboard's answer on its status endpoint.
type Status = core.Status

// HealthCheck is the name of the switchboard's readiness check.
const HealthCheck = core.HealthCheck

// Run routes until ctx is done, then drains; with no o.Features, it runs
// Features.
func Run(ctx context.Context, o Options) error {
	if o.Features == nil {
		o.Features = Features
	}
	return core.Run(ctx, o)
}
