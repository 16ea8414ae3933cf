package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/reload"
	"github.com/heraldhq/herald/services/process"
)

const reloadUsage = `Usage:
  herald reload [--config FILE] [--wait D] [--timeout D] [--json]

Every running Herald process (switchboard, messenger, butlers, herald dev)
checks the herald.yaml it runs from; if every one can take it, each applies
it without a restart, and says what changed. If a service refuses it (an
invalid file, another file than the others'), none applies it, and this
says which refused and why; a butler that refuses keeps its configuration
alone. Each process is named <service>@<host>-<pid>-<tag>, its own while it
runs (its log says "answering herald reload" with it), so two messengers
are two names. Each answer is named by the NATS subject it came on, which
only that process's user may publish to: one whose body names another
process is shown as forged and counts for nothing. A process applying the
file says so every second; one silent for 3 s (killed, or cut off from
NATS) is named as having stopped answering, and for 5 s more this looks for
what runs in its place (itself again, or one of its service started since)
and says whether that runs the new file, so the answer comes within 10 s of
a death mid-apply. Exit 0 when applied (or nothing changed, or a process
that stopped answering was replaced by one on the new file), 1 otherwise.
--json prints it all as one JSON object.

Example:
  herald reload   # needs herald dev started with --config FILE: the built-in configuration has no file to reload
`

// runReload is `herald reload`.
func runReload(ctx context.Context, args []string, o IO) error {
	fs := commandFlags("reload", reloadUsage, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), to find NATS")
	wait := process.DurationFlag(fs, "wait", 3*time.Second, "how long the processes have to answer the check")
	asJSON := fs.Bool("json", false, "print the answers as one JSON object")
	timeout := timeoutFlag(fs, "")
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
	js, _, closeBus, err := dialBus(ctx, cfg, *timeout, o)
	if err != nil {
		return err
	}
	defer closeBus()
	rep, err := reload.Fleet(ctx, js.Conn(), *wait)
	if *asJSON {
		return printReloadJSON(o.Stdout, rep, err)
	}
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
	width := 28
	for _, a := range slices.Concat(rep.Checks, rep.Applies) {
		width = max(width, len(escapeControl(a.Process)))
	}
	for _, l := range rep.Lost {
		width = max(width, len(escapeControl(l.Process)))
	}
	for _, a := range rep.Checks {
		if !rep.Asked || a.Forged != "" || a.Error != "" {
			printAnswer(w, width, "would change", "refused", a)
		}
	}
	for _, a := range rep.Applies {
		printAnswer(w, width, "applied", "apply refused", a)
	}
	for _, l := range rep.Lost {
		fmt.Fprintf(w, "%-*s %s\n", width, escapeControl(l.Process), escapeControl(l.What()))
	}
}

func printAnswer(w io.Writer, width int, did, refused string, a reload.Answer) {
	name := escapeControl(a.Process)
	list := func(s []string) string { return escapeControl(strings.Join(s, "; ")) }
	switch {
	case a.Forged != "":
		fmt.Fprintf(w, "%-*s forged, not counted: %s\n", width, name, escapeControl(a.Forged))
	case a.Error != "":
		fmt.Fprintf(w, "%-*s %s: %s\n", width, name, refused, escapeControl(a.Error))
	case len(a.Changes) == 0:
		fmt.Fprintf(w, "%-*s nothing changed\n", width, name)
	default:
		fmt.Fprintf(w, "%-*s %s: %s\n", width, name, did, list(a.Changes))
		if len(a.Restart) > 0 {
			fmt.Fprintf(w, "%-*s takes effect at its next start: %s\n", width, "", list(a.Restart))
		}
	}
}

// reloadAnswerJSON is one answer in --json: what it said, or why it is
// forged (then nothing it said).
type reloadAnswerJSON struct {
	Process string   `json:"process"`
	Forged  string   `json:"forged,omitempty"`
	Error   string   `json:"error,omitempty"`
	Changes []string `json:"changes,omitempty"`
	Restart []string `json:"restart,omitempty"`
	Applied bool     `json:"applied"`
	Hash    string   `json:"hash,omitempty"`
}

func answerJSON(a reload.Answer) reloadAnswerJSON {
	return reloadAnswerJSON{Process: a.Process, Forged: a.Forged, Error: a.Error, Changes: a.Changes, Restart: a.Restart, Applied: a.Applied, Hash: a.Hash}
}

// printReloadJSON prints rep and err as one JSON object (which escapes
// what came from the bus), and returns err for the exit code.
func printReloadJSON(w io.Writer, rep reload.Report, err error) error {
	type lost struct {
		Process  string            `json:"process"`
		Applying bool              `json:"applying"`
		Silent   string            `json:"silent"`
		Now      *reloadAnswerJSON `json:"now,omitempty"`
		RunsNew  bool              `json:"runs_new"`
		What     string            `json:"what"`
	}
	out := struct {
		Hash    string             `json:"hash,omitempty"`
		Asked   bool               `json:"asked"`
		Checks  []reloadAnswerJSON `json:"checks"`
		Applies []reloadAnswerJSON `json:"applies"`
		Lost    []lost             `json:"lost"`
		Error   string             `json:"error,omitempty"`
	}{Hash: rep.Hash, Asked: rep.Asked, Checks: []reloadAnswerJSON{}, Applies: []reloadAnswerJSON{}, Lost: []lost{}}
	for _, a := range rep.Checks {
		out.Checks = append(out.Checks, answerJSON(a))
	}
	for _, a := range rep.Applies {
		out.Applies = append(out.Applies, answerJSON(a))
	}
	for _, l := range rep.Lost {
		j := lost{Process: l.Process, Applying: l.Applying, Silent: l.Silent.Round(time.Millisecond).String(), RunsNew: l.RunsNew, What: l.What()}
		if l.Now != nil {
			now := answerJSON(*l.Now)
			j.Now = &now
		}
		out.Lost = append(out.Lost, j)
	}
	if err != nil {
		out.Error = err.Error()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if werr := enc.Encode(out); werr != nil {
		return werr
	}
	if err != nil {
		return errors.New(escapeControl(err.Error()))
	}
	return nil
}
