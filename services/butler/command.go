package butler

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
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
		Identity: func(*config.Config) (string, string, string, error) {
			if *name == "" {
				return "", "", "", errors.New("--name is required")
			}
			return "butler." + *name, bus.ButlerProbeKey(*name), *name, nil
		},
		Serve: func(ctx context.Context, r *process.Running) error { return serveCommand(ctx, r, *name, *stdio) },
	}
}

// RunCommand is `herald run`: a butler with a run block as a process on
// the machine that holds its project and the claude binary, starting
// Claude Code for the messages no connected session takes. It joins the
// fleet over NATS as that butler (its user from herald nats-auth) and
// serves MCP on loopback only: its runs are its only clients.
func RunCommand() process.Spec {
	var name *string
	return process.Spec{
		Name: "run",
		Flags: func(fs *flag.FlagSet) func(*config.Config) {
			name = fs.String("butler", "", "the butler to run (default: the only butler with a run block)")
			return nil
		},
		Identity: func(cfg *config.Config) (string, string, string, error) {
			n, err := runButler(cfg, *name)
			*name = n
			return "butler." + n, bus.ButlerProbeKey(n), n, err
		},
		Serve: func(ctx context.Context, r *process.Running) error {
			n := *name
			dir, err := os.Getwd()
			if err != nil {
				return err
			}
			if err := r.Config.CheckRunHost(n, dir); err != nil {
				return err
			}
			r.Config.Butler(n).MCPHTTP = "127.0.0.1:0"
			return serveCommand(ctx, r, n, false)
		},
	}
}

// runButler is the butler `herald run --butler name` runs: name, which
// must have a run block, or the only butler that has one.
func runButler(cfg *config.Config, name string) (string, error) {
	var with []string
	for _, b := range cfg.Butlers {
		if b.Run != nil {
			with = append(with, b.Name)
		}
	}
	switch {
	case name != "" && cfg.Butler(name) == nil:
		return "", fmt.Errorf("%w: butler %q is not in the configuration", config.ErrInvalid, name)
	case name != "" && cfg.Butler(name).Run == nil:
		return "", fmt.Errorf("%w: butler %q has no run block; give it one (docs/runner.md)", config.ErrInvalid, name)
	case name != "":
		return name, nil
	case len(with) == 1:
		return with[0], nil
	case len(with) == 0:
		return "", fmt.Errorf("%w: no butler has a run block; give one a run block (docs/runner.md)", config.ErrInvalid)
	}
	return "", fmt.Errorf("%w: butlers %s have run blocks; name one with --butler", config.ErrInvalid, strings.Join(with, ", "))
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
