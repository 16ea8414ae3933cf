package herald

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/natsauth"
)

// runSetup is `herald setup`: creates every stream and bucket the fleet
// needs and repairs any that was changed. It needs NATS credentials that may
// (the user setup of `herald nats-auth`); the services' users may not, so
// they only check.
func runSetup(ctx context.Context, args []string, o IO) error {
	fs := flag.NewFlagSet("herald setup", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.Usage = usageFunc(fs, "herald setup [--config FILE]      create and repair Herald's streams and buckets (as NATS's privileged user)")
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), for nats.url and nats.replicas")
	timeout := durationFlag(fs, "timeout", 2*time.Minute, "how long to wait for NATS and JetStream")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("herald setup takes no arguments, got %q", fs.Args())
	}
	cfg, err := LoadConfig(*path, o.Getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	js, url, closeBus, err := connectCLI(ctx, *path, o)
	if err != nil {
		return err
	}
	defer closeBus()
	log := slog.New(slog.NewTextHandler(o.Stderr, nil))
	if _, err := bus.Open(ctx, js.Conn(), bus.Topology{Replicas: cfg.NATS.Replicas, Repair: true, Log: log, Butlers: cfg.ButlerNames()}, *timeout, log); err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "Herald's streams and buckets are in place on %s (replicas %d).\n", redactURL(url), cfg.NATS.Replicas)
	return nil
}

// runNATSAuth is `herald nats-auth`: prints the NATS server authorization for
// the fleet of herald.yaml, one least-privilege user per service and butler.
func runNATSAuth(_ context.Context, args []string, o IO) error {
	fs := flag.NewFlagSet("herald nats-auth", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.Usage = usageFunc(fs, "herald nats-auth [--config FILE]      print the NATS authorization block: one least-privilege user per service and butler")
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := LoadConfig(*path, o.Getenv)
	if err != nil {
		return err
	}
	_, err = o.Stdout.Write(natsauth.Render(cfg))
	return err
}
