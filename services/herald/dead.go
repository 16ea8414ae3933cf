package herald

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/services/process"
)

const deadUsage = `Usage:
  herald dead ls [--config FILE]
  herald dead replay [--config FILE] ID|--all

Lists the messages Herald gave up on (a permanent error, or retries past
delivery.retry_for) with when, where from, how many tries and why; once the
cause is fixed, replay puts one (ID as ls lists it), or all of them, back on
their queue. A replay keeps the idempotency key, so what did get out is not
sent again.

Examples:
  herald dead ls
  herald dead replay 1      # ID as dead ls lists it
  herald dead replay --all
`

// runDead is `herald dead`: what the worker gave up on (a permanent error, or
// retries past delivery.retry_for), and replaying it once the cause is fixed.
// A replay keeps the idempotency key, so what did get out is not sent again.
func runDead(ctx context.Context, args []string, o IO) error {
	sub, fs, args := subcommandFlags("dead", deadUsage, args, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), to find NATS")
	all := fs.Bool("all", false, "replay every dead letter (replay)")
	timeout := process.DurationFlag(fs, "timeout", 10*time.Second, "how long to wait for NATS")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case sub == "ls" && len(pos) == 0 && !*all:
	case sub == "replay" && (len(pos) == 1) != *all:
	default:
		return badUsage(fs)
	}
	return withFleet(ctx, *path, *timeout, o, func(ctx context.Context, js jetstream.JetStream, _ string) error {
		dead, err := bus.DeadLetters(ctx, js)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("no dead-letter stream yet; start Herald once first")
		}
		if err != nil {
			return err
		}
		if sub == "ls" {
			return listDead(dead, o)
		}
		return replayDead(ctx, js, dead, pos, *all, o)
	})
}

// replayDead puts back on their queues the dead letter pos names (one ID),
// or all of them.
func replayDead(ctx context.Context, js jetstream.JetStream, dead []bus.DeadLetter, pos []string, all bool, o IO) error {
	ids := make([]uint64, 0, len(dead))
	if all {
		for _, d := range dead {
			ids = append(ids, d.ID)
		}
	} else {
		id, err := strconv.ParseUint(strings.TrimPrefix(pos[0], "#"), 10, 64)
		if err != nil || id == 0 {
			return fmt.Errorf("%q is not a dead letter ID; `herald dead ls` lists them", pos[0])
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		if err := bus.Replay(ctx, js, id); err != nil {
			return err
		}
		fmt.Fprintf(o.Stdout, "Replayed %d.\n", id)
	}
	if len(ids) == 0 {
		fmt.Fprintln(o.Stdout, "No dead letters.")
	}
	return nil
}

func listDead(dead []bus.DeadLetter, o IO) error {
	if len(dead) == 0 {
		fmt.Fprintln(o.Stdout, "No dead letters.")
		return nil
	}
	w := newTable(o.Stdout, "ID\tWHEN\tFROM\tREQUEST\tTRIES\tCLASS\tWHY")
	for _, d := range dead {
		why := d.Error
		if len(why) > 120 {
			why = why[:117] + "..."
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.Time.Local().Format(time.DateTime), d.Subject, dash(d.RequestID), d.Tries, dash(d.Class), why)
	}
	return w.Flush()
}
