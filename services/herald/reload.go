package herald

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/reload"
	"github.com/heraldhq/herald/services/process"
)

const reloadUsage = `Usage:
  herald reload [--config FILE] [--wait D]

Every running Herald process (switchboard, messenger, butlers, herald dev)
checks the herald.yaml it runs from; if every one can take it, each applies
it without a restart, and says what changed. If one refuses it (an invalid
file, another file than the others'), none applies it, and this says which
refused and why. Exit 0 when applied (or nothing changed), 1 otherwise.

Example:
  herald reload   # needs herald dev started with --config FILE: the built-in configuration has no file to reload
`

// runReload is `herald reload`.
func runReload(ctx context.Context, args []string, o IO) error {
	fs := commandFlags("reload", reloadUsage, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), to find NATS")
	wait := process.DurationFlag(fs, "wait", 3*time.Second, "how long the processes have to answer the check")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	// The file may be the broken one the processes are to refuse: then
	// NATS is found from the environment (NATS_URL) and the defaults.
	cfg, source, err := loadConfig(*path, o.Getenv)
	if err != nil {
		fmt.Fprintf(o.Stderr, "herald reload: the file does not load here either (%v); asking the running processes anyway\n", err)
		cfg = config.Default()
		cfg.ApplyEnv(o.Getenv)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	js, _, closeBus, err := connectBus(cctx, cfg, o)
	cancel()
	if err != nil {
		return err
	}
	defer closeBus()
	checks, applies, err := reload.Fleet(ctx, js.Conn(), *wait)
	print := func(what string, as []reload.Answer) {
		for _, a := range as {
			switch {
			case a.Error != "":
				fmt.Fprintf(o.Stdout, "%-28s %s: %s\n", a.Process, what+" refused", a.Error)
			case len(a.Changes) == 0:
				fmt.Fprintf(o.Stdout, "%-28s nothing changed\n", a.Process)
			default:
				fmt.Fprintf(o.Stdout, "%-28s %s: %s\n", a.Process, what, strings.Join(a.Changes, "; "))
				if len(a.Restart) > 0 {
					fmt.Fprintf(o.Stdout, "%-28s takes effect at its next start: %s\n", "", strings.Join(a.Restart, "; "))
				}
			}
		}
	}
	if applies != nil {
		print("applied", applies)
	} else {
		print("would change", checks)
	}
	var refused *reload.RefusedError
	if errors.As(err, &refused) {
		return err
	}
	if err != nil {
		return err
	}
	if applies == nil {
		fmt.Fprintln(o.Stdout, "Nothing to apply: every process runs on the file as it is.")
		if mine := process.FileHash(string(source)); mine != "" && len(checks) > 0 && checks[0].Hash != mine {
			// Docker binds a single file by its inode: an editor that saves
			// by replacing the file leaves the containers on the old one.
			fmt.Fprintf(o.Stdout, "But the processes read another version of the file than %s here. In containers, save herald.yaml in place (not by replacing it), or recreate them: docker compose up -d.\n", source)
		}
	}
	return nil
}
