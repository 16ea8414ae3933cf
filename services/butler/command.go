package butler

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"syscall"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/services/process"
)

// Command is one butler as a process of its own (cmd/butler): its MCP
// server over HTTP, or over stdin and stdout with --stdio. A reload gives
// it the new configuration without a restart.
func Command() process.Spec {
	var name *string
	var stdio *bool
	return process.Spec{
		Name: "butler",
		Flags: func(fs *flag.FlagSet) func(*config.Config) {
			name = fs.String("name", "", "the butler's name, as in the configuration (required)")
			stdio = fs.Bool("stdio", false, "speak MCP on stdin/stdout (for .mcp.json) instead of HTTP")
			return nil
		},
		Identity: func() (string, string, string, error) {
			if *name == "" {
				return "", "", "", errors.New("--name is required")
			}
			return "butler." + *name, bus.ButlerProbeKey(*name), *name, nil
		},
		Serve: func(ctx context.Context, r *process.Running) error { return serveCommand(ctx, r, *name, *stdio) },
	}
}

// serveCommand runs butler name in r until ctx ends.
func serveCommand(ctx context.Context, r *process.Running, name string, stdio bool) error {
	log := r.Log.With("service", "butler")
	serve := func(ctx context.Context) error {
		b, err := New(ctx, Options{Name: name, Config: r.Config, NC: r.NC, Log: log, Metrics: r.Process.Metrics, Health: r.Process.Health, Store: r.Process.Store})
		if err != nil {
			return err
		}
		// A butler may not write to the audit log: it logs its reloads.
		reloads := r.Reloads
		reloads.Process, reloads.Audit, reloads.Log = "butler "+name, false, log
		reloads.Apply = func(_ context.Context, cfg *config.Config, _ []string) error { b.SetConfig(cfg); return nil }
		if err := process.StartReloads(ctx, reloads); err != nil {
			return err
		}
		if stdio {
			return b.ServeStdio(ctx, r.IO.Stdin, r.IO.Stdout)
		}
		return serveMCPHTTP(ctx, b, r.Config.Butler(name), log)
	}
	// A --stdio butler is launched by an MCP client, maybe beside other
	// butlers: it listens only where it was asked to. An HTTP butler with
	// no http_listen serves /healthz and /readyz on its MCP listener, each
	// butler on its own.
	if (stdio && !r.ListenGiven) || r.Listen == "" {
		if !stdio {
			log.Info("no http_listen: /healthz and /readyz are on the MCP listener; /metrics needs --http-listen or HERALD_HTTP_LISTEN")
		}
		return serve(ctx)
	}
	// Starting until New registers the butler's own check: /readyz is not
	// ready before the butler listens and runs.
	r.Process.Health.Add(HealthCheck(name), obs.NewState().Check)
	return r.Process.Run(ctx, serve)
}

// serveMCPHTTP serves b's MCP endpoint where bc says. A default address
// (the file sets no mcp_http) that another process holds is an error
// saying so: clients know the butler by that address, so a butler binary
// never moves it elsewhere, as herald dev does.
func serveMCPHTTP(ctx context.Context, b *Butler, bc *config.Butler, log *slog.Logger) error {
	err := b.ServeHTTP(ctx, bc.MCPHTTP, func(url string) { log.Info("MCP endpoint", "url", url) })
	if def := bc.MCPHTTPDefault(); def != "" && def == bc.MCPHTTP && errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: %s is the butler's default MCP address (the file sets no mcp_http: 127.0.0.1, port %d upward in the order of the butlers) and another process holds it; set mcp_http to a free address",
			err, def, config.DefaultMCPPort)
	}
	return err
}
