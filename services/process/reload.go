package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/reload"
)

// Rerunner runs a service (the switchboard, the messenger) on a
// configuration and, when a reload applies a new one, stops it, which
// drains its work in flight (bus.Worker: what it took is finished and
// acked, what it had not taken stays queued), and runs it again on the new
// one. If the service does not start on the new configuration, it runs on
// the old one again and the reload is refused.
type Rerunner struct {
	name string
	run  func(ctx context.Context, cfg *config.Config, running func()) error
	log  *slog.Logger
	swap chan swapRequest
}

type swapRequest struct {
	cfg  *config.Config
	done chan error
}

func NewRerunner(name string, log *slog.Logger, run func(ctx context.Context, cfg *config.Config, running func()) error) *Rerunner {
	return &Rerunner{name: name, run: run, log: log, swap: make(chan swapRequest)}
}

// Run runs the service on cfg, and on each configuration Apply hands it,
// until ctx is done or the service fails.
func (r *Rerunner) Run(ctx context.Context, cfg *config.Config) error {
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
func (r *Rerunner) Apply(ctx context.Context, cfg *config.Config) error {
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

// ReloadOptions set up a process's reloads.
type ReloadOptions struct {
	// NC's connection name ("switchboard", "butler.garden", "herald-dev")
	// is who the process answers `herald reload` as, and names it in the
	// audit record, with its instance (host, pid, a random tag):
	// reload.Self.
	NC *nats.Conn
	// Process names the service in its log lines ("switchboard").
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

// StartReloads makes the process reload on SIGHUP, on `herald reload`, and
// (watch_config) when the file changes, until ctx ends.
func StartReloads(ctx context.Context, o ReloadOptions) error {
	// The answers go on a subject naming the connection, which the
	// generated permissions let only this process's NATS user publish
	// (they tie its inbox, _INBOX.<connection>, to it the same way), and
	// this process's instance, which tells it from others of its name.
	id := reload.Self(o.NC.Opts.Name)
	process := id.Name()
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
	stop, err := reload.Serve(o.NC, id, w)
	if err != nil {
		return fmt.Errorf("answering herald reload: %w", err)
	}
	// `herald reload` names the process so: this line tells which one it is.
	o.Log.Info("answering herald reload", "process", process)
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

// FileHash is reload.Hash of the file at path, "" if it cannot be read.
func FileHash(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return reload.Hash(b)
}
