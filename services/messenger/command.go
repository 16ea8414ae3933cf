package messenger

import (
	"context"
	"flag"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/process"
)

// Command is the messenger as a process of its own (cmd/messenger),
// restarted on its new configuration at each reload.
func Command() process.Spec {
	return process.Spec{
		Name: "messenger",
		Flags: func(fs *flag.FlagSet) func(*config.Config) {
			degraded := fs.Bool("ready-when-degraded", false, "stay ready (/readyz 200) while an integration cannot work, naming it under \"degraded\" (as ready_when_degraded: true)")
			return func(cfg *config.Config) {
				if *degraded {
					cfg.ReadyWhenDegraded = true
				}
			}
		},
		Serve: func(ctx context.Context, r *process.Running) error {
			return r.Rerun(ctx, HealthCheck, func(ctx context.Context, cfg *config.Config, running func()) error {
				return Run(ctx, Options{Config: cfg, NC: r.NC, Log: r.Log, Getenv: r.IO.Getenv, Metrics: r.Process.Metrics, Health: r.Process.Health, HTTP: r.Process.Server, Running: running})
			})
		},
	}
}
