package herald

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/natsauth"
	"github.com/heraldhq/herald/services/process"
)

// runSetup is `herald setup`: creates every stream and bucket the fleet
// needs and repairs any that was changed. It needs NATS credentials that may
// (the user setup of `herald nats-auth`); the services' users may not, so
// they only check.
const setupUsage = `Usage:
  herald setup [--config FILE] [--timeout D] [--wait D]

Creates every stream, bucket and consumer the fleet needs on its NATS, with
nats.replicas copies each, and repairs any that was changed. A fleet runs it
once, as its privileged NATS user setup (herald nats-auth), before the
services start: their own users may only check. Run beside herald dev, it
does the same to the embedded server.

Example:
  herald setup   # herald dev's NATS; a fleet's: NATS_URL as its user setup and --config its herald.yaml
`

func runSetup(ctx context.Context, args []string, o IO) error {
	fs := commandFlags("setup", setupUsage, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), for nats.url and nats.replicas")
	timeout := timeoutFlag(fs, "")
	wait := process.DurationFlag(fs, "wait", setupWait, "how long JetStream has to be ready once NATS answers (a cluster electing its leaders), and to make each stream and bucket")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	cfg, err := LoadConfig(*path, o.Getenv)
	if err != nil {
		return err
	}
	js, url, closeBus, err := dialBus(ctx, cfg, *timeout, o)
	if err != nil {
		return err
	}
	defer closeBus()
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	log := slog.New(slog.NewTextHandler(o.Stderr, nil))
	if _, err := bus.Open(ctx, js.Conn(), bus.Topology{Replicas: cfg.NATS.Replicas, FilesMaxBytes: cfg.NATS.FilesMaxBytes, Repair: true, Log: log, Butlers: cfg.ButlerNames()}, *wait, log); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "Herald's streams and buckets are in place on %s (replicas %d).\n", redactURL(url), cfg.NATS.Replicas)
	return nil
}

// setupWait is how long herald setup waits for JetStream by default: a
// cluster just started may take a minute to elect its leaders.
const setupWait = 2 * time.Minute

// runNATSAuth is `herald nats-auth`: prints the NATS server authorization for
// the fleet of herald.yaml, one least-privilege user per service and butler.
const natsAuthUsage = `Usage:
  herald nats-auth [--config FILE]

Prints the NATS server's authorization for the fleet of the configuration:
one user per service and per butler, each allowed only the subjects its job
needs (docs/security.md), with passwords from the environment variables
herald init puts in .env. Run it again after adding a butler.

Examples:
  herald nats-auth                                                        # herald dev's fleet: the butler "assistant"
  herald nats-auth --config deploy/herald.yaml > deploy/nats-secure.conf  # what deploy/compose.yaml's NATS server reads
`

func runNATSAuth(_ context.Context, args []string, o IO) error {
	fs := commandFlags("nats-auth", natsAuthUsage, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG)")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	cfg, err := LoadConfig(*path, o.Getenv)
	if err != nil {
		return err
	}
	_, err = o.Stdout.Write(natsauth.Render(cfg))
	return err
}
