package herald

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/reload"
)

// rerunner runs a service (the switchboard, the messenger) on a
// configuration and, when a reload applies a new one, stops it, which
// drains its work in flight (bus.Worker: what it took is finished and
// acked, what it had not taken stays queued), and runs it again on the new
// one. If the service does not start on the new configuration, it runs on
// the old one again and the reload is refused.
type rerunner struct {
	name string
	run  func(ctx context.Context, cfg *config.Config, running func()) error
	log  *slog.Logger
	swap chan swapRequest
}

type swapRequest struct {
	cfg  *config.Config
	done chan error
}

func newRerunner(name string, log *slog.Logger, run func(ctx context.Context, cfg *config.Config, running func()) error) *rerunner {
	return &rerunner{name: name, run: run, log: log, swap: make(chan swapRequest)}
}

// Run runs the service on cfg, and on each configuration Apply hands it,
// until ctx is done or the service fails.
func (r *rerunner) Run(ctx context.Context, cfg *config.Config) error {
	var (
		old     *config.Config
		pending *swapRequest // an Apply waiting for the service to run on its cfg
	)
next:
	for {
		runCtx, stop := context.WithCancel(ctx)
		running := make(chan struct{})
		var once sync.Once
		exited := make(chan error, 1)
		go func(cfg *config.Config) {
			exited <- r.run(runCtx, cfg, func() { once.Do(func() { close(running) }) })
		}(cfg)
		for {
			select {
			case <-running:
				if pending != nil {
					pending.done <- nil
					pending, old = nil, nil
				}
				running = nil // said once
			case err := <-exited:
				stop()
				if pending != nil && ctx.Err() == nil {
					pending.done <- fmt.Errorf("%s did not start on the new configuration (%v); it runs on the one before again", r.name, err)
					cfg, pending, old = old, nil, nil
					continue next
				}
				if pending != nil {
					pending.done <- ctx.Err()
				}
				return err
			case req := <-r.swap:
				r.log.Info("restarting on the new configuration: finishing the work in flight first", "service", r.name)
				stop()
				if err := <-exited; err != nil {
					r.log.Warn("stopping for a reload", "service", r.name, "err", err)
				}
				if pending != nil {
					pending.done <- errors.New("a newer configuration came first")
				} else {
					old = cfg
				}
				cfg, pending = req.cfg, &req
				continue next
			}
		}
	}
}

// Apply makes the service run on cfg; it returns once it does, or with
// why not (it then runs on the configuration before).
func (r *rerunner) Apply(ctx context.Context, cfg *config.Config) error {
	req := swapRequest{cfg: cfg, done: make(chan error, 1)}
	select {
	case r.swap <- req:
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", r.name, ctx.Err())
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s did not say within the reload's time whether it runs on the new configuration: %w", r.name, ctx.Err())
	}
}

// reloadOptions set up a process's reloads.
type reloadOptions struct {
	NC *nats.Conn
	// Process names the process in `herald reload`'s answers and the audit
	// record ("switchboard", "butler garden", "herald dev"); its host is
	// added.
	Process string
	// Path is the file the process runs from ("" has nothing to reload).
	Path    string
	Current *config.Config
	Getenv  config.Getenv
	// Prepare adds what the process added at start besides the
	// environment's overrides (flags); nil adds nothing.
	Prepare func(*config.Config)
	Apply   func(ctx context.Context, cfg *config.Config, changes []string) error
	// Audit: the process may write to the audit log (a butler may not).
	Audit bool
	// Watch is watch_config's default for the process.
	Watch bool
	Log   *slog.Logger
}

// startReloads makes the process reload on SIGHUP, on `herald reload`, and
// (watch_config) when the file changes, until ctx ends.
func startReloads(ctx context.Context, o reloadOptions) error {
	process := o.Process
	if host, err := os.Hostname(); err == nil && host != "" {
		process += "@" + host
	}
	var audited func(context.Context, []string)
	if o.Audit {
		js, err := jetstream.New(o.NC)
		if err != nil {
			return err
		}
		w := &audit.Writer{JS: js, Log: o.Log}
		audited = func(ctx context.Context, changes []string) {
			w.Write(ctx, audit.Record{Kind: audit.ConfigReloaded, Process: process, Changes: changes})
		}
	}
	w := reload.New(reload.Options{
		Path: o.Path, Current: o.Current, Log: o.Log, Apply: o.Apply, Audited: audited,
		Prepare: func(cfg *config.Config) {
			cfg.ApplyEnv(o.Getenv)
			if o.Prepare != nil {
				o.Prepare(cfg)
			}
		},
	})
	stop, err := reload.Serve(o.NC, process, w)
	if err != nil {
		return fmt.Errorf("answering herald reload: %w", err)
	}
	watch := o.Current.WatchesConfig(o.Watch) && o.Path != ""
	go func() {
		defer stop()
		w.Run(ctx, watch)
	}()
	if watch {
		o.Log.Info("watching the configuration file: a change is applied without a restart", "file", o.Path)
	}
	return nil
}

const reloadUsage = `herald reload [--config FILE] [--wait 3s]

Every running Herald process (switchboard, messenger, butlers, herald dev)
checks the herald.yaml it runs from; if every one can take it, each applies
it without a restart, and says what changed. If one refuses it (an invalid
file, another file than the others'), none applies it, and this says which
refused and why. Exit 0 when applied (or nothing changed), 1 otherwise.
`

// runReload is `herald reload`.
func runReload(ctx context.Context, args []string, o IO) error {
	fs := flag.NewFlagSet("herald reload", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.Usage = func() { fmt.Fprint(o.Stderr, reloadUsage) }
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), to find NATS")
	wait := durationFlag(fs, "wait", 3*time.Second, "how long the processes have to answer the check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return flag.ErrHelp
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
		if mine := fileHash(string(source)); mine != "" && len(checks) > 0 && checks[0].Hash != mine {
			// Docker binds a single file by its inode: an editor that saves
			// by replacing the file leaves the containers on the old one.
			fmt.Fprintf(o.Stdout, "But the processes read another version of the file than %s here. In containers, save herald.yaml in place (not by replacing it), or recreate them: docker compose up -d.\n", source)
		}
	}
	return nil
}

// fileHash is reload.Hash of the file at path, "" if it cannot be read.
func fileHash(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return reload.Hash(b)
}
