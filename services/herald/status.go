package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/heraldhq/herald/services/console"
	"github.com/heraldhq/herald/services/process"
)

const statusUsage = `Usage:
  herald status [--config FILE] [--json] [--watch] [--every D]

The fleet at a glance, like docker compose ps: every process that answers
on NATS (switchboard, messengers, butlers, a herald run's butler with its
runner) with its host, version, uptime and readiness; every integration
with its receiver's state, its last message in and out, and CANNOT WORK with
why when it cannot; what waits (routes, deliveries in flight, dead letters,
notes held for quiet hours, open prompts and questions); and each butler's
MCP sessions. It asks as the operator's NATS user, the way herald log does;
the operations port's GET / shows the same page. Exit 1 if nothing answers.

Examples:
  herald status
  herald status --json
`

// statusEvery is --watch's default refresh.
const statusEvery = 2 * time.Second

// runStatus is `herald status`: one snapshot of the fleet (console.Collect),
// or one every --every with --watch until interrupted.
func runStatus(ctx context.Context, args []string, o IO) error {
	fs := commandFlags("status", statusUsage, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG, else the running herald dev's), to find NATS")
	asJSON := fs.Bool("json", false, "one JSON object per snapshot (docs/operations.md has its fields)")
	watch := fs.Bool("watch", false, "refresh until interrupted (Ctrl-C)")
	every := process.DurationFlag(fs, "every", statusEvery, "how often --watch refreshes")
	timeout := process.DurationFlag(fs, "timeout", 2*time.Second, "how long to wait for NATS")
	wait := process.DurationFlag(fs, "wait", 3*time.Second, "how long the processes have to answer")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if *every <= 0 {
		return fmt.Errorf("--every %s: give a positive duration", *every)
	}
	js, url, closeBus, err := connectWithin(ctx, *path, *timeout, o)
	if err != nil {
		return err
	}
	defer closeBus()
	nc, shown := js.Conn(), redactURL(url)
	clear := *watch && !*asJSON && isTerminal(o.Stdout)
	for {
		f, err := console.Collect(ctx, nc, console.Options{Wait: *wait, URL: shown})
		if errors.Is(err, console.ErrNoFleet) {
			err = fmt.Errorf("%w on NATS at %s within %s: is the fleet running there?", err, shown, *wait)
		}
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if err != nil && !*watch {
			return err
		}
		if clear {
			fmt.Fprint(o.Stdout, "\033[H\033[2J")
		}
		switch {
		case err != nil:
			fmt.Fprintf(o.Stdout, "herald status: %v\n", err)
		case *asJSON:
			if err := json.NewEncoder(o.Stdout).Encode(f); err != nil {
				return err
			}
		default:
			if err := f.Text(o.Stdout); err != nil {
				return err
			}
		}
		if !*watch {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*every):
		}
	}
}

// isTerminal reports whether w is a terminal, where --watch redraws in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
