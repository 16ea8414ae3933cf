package switchboard

import (
	"context"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/process"
)

// Command is the switchboard as a process of its own (cmd/switchboard),
// restarted on its new configuration at each reload.
func Command() process.Spec {
	return process.Spec{Name: "switchboard", Serve: func(ctx context.Context, r *process.Running) error {
		return r.Rerun(ctx, HealthCheck, func(ctx context.Context, cfg *config.Config, running func()) error {
			return Run(ctx, Options{Config: cfg, NC: r.NC, Log: r.Log, Metrics: r.Process.Metrics, Health: r.Process.Health, Running: running})
		})
	}}
}
