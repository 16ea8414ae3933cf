package herald

import (
	"context"
	"errors"
	"fmt"
	"io"
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
it without a restart, and says what changed. If a service refuses it (an
invalid file, another file than the others'), none applies it, and this
says which refused and why; a butler that refuses keeps its configuration
alone. Each answer is named by the NATS subject it came on, which only that
process's user may publish to: one whose body names another process is
shown as forged and counts for nothing. Exit 0 when applied (or nothing
changed), 1 otherwise.

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
	rep, err := reload.Fleet(ctx, js.Conn(), *wait)
	printReload(o.Stdout, rep)
	if err != nil {
		// A refusal quotes what the processes answered, from the bus.
		return errors.New(escapeControl(err.Error()))
	}
	if !rep.Asked {
		fmt.Fprintln(o.Stdout, "Nothing to apply: every process runs on the file as it is.")
		if mine := process.FileHash(string(source)); mine != "" && rep.Hash != "" && rep.Hash != mine {
			// Docker binds a single file by its inode: an editor that saves
			// by replacing the file leaves the containers on the old one.
			fmt.Fprintf(o.Stdout, "But the processes read another version of the file than %s here. In containers, save herald.yaml in place (not by replacing it), or recreate them: docker compose up -d.\n", source)
		}
	}
	return nil
}

// printReload prints what each process answered: the applies if the fleet
// was asked to apply, with the checks that did not get that far (refused,
// forged); else the checks. Every name and text came from the bus, so each
// is escaped for the terminal.
func printReload(w io.Writer, rep reload.Report) {
	for _, a := range rep.Checks {
		if !rep.Asked || a.Forged != "" || a.Error != "" {
			printAnswer(w, "would change", "refused", a)
		}
	}
	for _, a := range rep.Applies {
		printAnswer(w, "applied", "apply refused", a)
	}
}

func printAnswer(w io.Writer, did, refused string, a reload.Answer) {
	name := escapeControl(a.Process)
	list := func(s []string) string { return escapeControl(strings.Join(s, "; ")) }
	switch {
	case a.Forged != "":
		fmt.Fprintf(w, "%-28s forged, not counted: %s\n", name, escapeControl(a.Forged))
	case a.Error != "":
		fmt.Fprintf(w, "%-28s %s: %s\n", name, refused, escapeControl(a.Error))
	case len(a.Changes) == 0:
		fmt.Fprintf(w, "%-28s nothing changed\n", name)
	default:
		fmt.Fprintf(w, "%-28s %s: %s\n", name, did, list(a.Changes))
		if len(a.Restart) > 0 {
			fmt.Fprintf(w, "%-28s takes effect at its next start: %s\n", "", list(a.Restart))
		}
	}
}
