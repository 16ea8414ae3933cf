package reload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/heraldhq/herald/pkg/config"
)

// PollEvery is how often a watched file is looked at.
const PollEvery = time.Second

// Options configure a Watcher.
type Options struct {
	// Path is the herald.yaml the process runs from; "" (the built-in
	// default) has nothing to reload.
	Path string
	// Current is the configuration the process runs now.
	Current *config.Config
	// Prepare applies what the process adds to a loaded file (environment
	// overrides, flags), as at start; nil adds nothing.
	Prepare func(*config.Config)
	// Apply makes the process run on cfg. An error means the process
	// refused it and still runs on the old one; it says why.
	Apply func(ctx context.Context, cfg *config.Config, changes []string) error
	// Audited records an applied reload (audit kind config_reloaded); nil
	// records nothing.
	Audited func(ctx context.Context, changes []string)
	Log     *slog.Logger
}

// Result is the outcome of one reload.
type Result struct {
	// Changes are what the new file changes (nil: nothing, or refused).
	Changes []string `json:"changes,omitempty"`
	// Restart are the changes that wait for the process's next start.
	Restart []string `json:"restart,omitempty"`
	// Applied: the process runs on the new file now.
	Applied bool `json:"applied"`
	// Error says why the file was refused; the old configuration runs on.
	Error string `json:"error,omitempty"`
	// Hash identifies the file's bytes that were read.
	Hash string `json:"hash,omitempty"`
}

// Watcher reloads a process's configuration; one reload runs at a time.
type Watcher struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex // one reload at a time; guards current
	current *config.Config
}

// New is a Watcher of o.Path.
func New(o Options) *Watcher {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	return &Watcher{o: o, log: log, current: o.Current}
}

// Current is the configuration the process runs on now.
func (w *Watcher) Current() *config.Config {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current
}

// Check loads and checks the file as Reload would, without applying it.
func (w *Watcher) Check() (*config.Config, Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.check()
}

func (w *Watcher) check() (*config.Config, Result) {
	if w.o.Path == "" {
		return nil, Result{Error: "this process runs on the built-in configuration, with no file to reload (start it with --config or HERALD_CONFIG)"}
	}
	b, err := os.ReadFile(w.o.Path)
	if err != nil {
		return nil, Result{Error: err.Error()}
	}
	res := Result{Hash: Hash(b)}
	cfg, err := config.Parse(b)
	if err != nil {
		res.Error = fmt.Sprintf("%s: %v", w.o.Path, err)
		return nil, res
	}
	if w.o.Prepare != nil {
		w.o.Prepare(cfg)
	}
	res.Changes = Changes(w.current, cfg)
	res.Restart = Restart(res.Changes)
	return cfg, res
}

// Reload loads the file and, if it is valid and changes anything, applies
// it. why names what asked ("SIGHUP", "the file changed", "herald reload").
// If want is not "", the file must still be the one checked with that
// hash. An invalid file, or one the process refuses, leaves it on the
// configuration it runs, and the Result says why.
func (w *Watcher) Reload(ctx context.Context, why, want string) Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	cfg, res := w.check()
	switch {
	case res.Error != "":
		w.log.Error("configuration not reloaded: the running one is kept", "why", why, "err", res.Error)
		return res
	case want != "" && res.Hash != want:
		res.Error = "the file changed after it was checked; reload again"
		w.log.Error("configuration not reloaded: the running one is kept", "why", why, "err", res.Error)
		return res
	case len(res.Changes) == 0:
		return res
	}
	if err := w.o.Apply(ctx, cfg, res.Changes); err != nil {
		res.Error = err.Error()
		w.log.Error("configuration not reloaded: the running one is kept", "why", why, "changes", res.Changes, "err", err)
		return res
	}
	w.current, res.Applied = cfg, true
	w.log.Info("configuration reloaded", "why", why, "changes", res.Changes)
	if len(res.Restart) > 0 {
		w.log.Warn("some changes take effect only at the next start", "changes", res.Restart)
	}
	if w.o.Audited != nil {
		w.o.Audited(ctx, res.Changes)
	}
	return res
}

// Run reloads on SIGHUP and, if watch, whenever the file's bytes change,
// until ctx ends.
func (w *Watcher) Run(ctx context.Context, watch bool) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var tick <-chan time.Time
	// The first look compares the file with the configuration running, not
	// with the file as Run finds it: a change written while the process
	// started (after it loaded the file, before this goroutine ran) is
	// applied too. An unchanged file changes nothing and says nothing.
	last := ""
	if watch && w.o.Path != "" {
		t := time.NewTicker(PollEvery)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			res := w.Reload(ctx, "SIGHUP", "")
			if res.Hash != "" {
				last = res.Hash
			}
		case <-tick:
			h := w.fileHash()
			if h == "" || h == last {
				continue
			}
			last = h
			w.Reload(ctx, "the file changed", "")
		}
	}
}

// fileHash is the Hash of the file now, "" if it cannot be read (an editor
// replacing it: the next look sees the new one).
func (w *Watcher) fileHash() string {
	if w.o.Path == "" {
		return ""
	}
	b, err := os.ReadFile(w.o.Path)
	if err != nil {
		return ""
	}
	return Hash(b)
}

// Hash identifies a configuration file's bytes.
func Hash(b []byte) string {
	sum := sha256.Sum256(bytes.TrimSpace(b))
	return hex.EncodeToString(sum[:8])
}
