package process

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/pkg/config"
)

// IO is what a command reads and writes.
type IO struct {
	Getenv config.Getenv
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// AnswerHelp runs cmd. When args ask for help (-h, -help or --help before
// any "--"), what cmd writes to stderr is held back: if cmd then answers
// flag.ErrHelp, that is the usage asked for, and it goes to stdout with a nil
// error (exit 0); anything else goes to stderr as it would have. Without a
// request for help, flag.ErrHelp stays a usage error (exit 2).
func AnswerHelp(args []string, o IO, cmd func(IO) error) error {
	if !AsksHelp(args) {
		return cmd(o)
	}
	held := &lockedBuffer{}
	inner := o
	inner.Stderr = held
	err := cmd(inner)
	if errors.Is(err, flag.ErrHelp) {
		_, err = o.Stdout.Write(held.Bytes())
		return err
	}
	_, _ = o.Stderr.Write(held.Bytes())
	return err
}

// IsUsageError reports whether err is a bad command line: flag.ErrHelp from
// a command that printed its usage, or an error of flag.FlagSet.Parse, which
// has printed the error and the usage itself. The flag package has no type
// for those, so they are told by the beginnings of its messages.
func IsUsageError(err error) bool {
	if errors.Is(err, flag.ErrHelp) {
		return true
	}
	msg := err.Error()
	for _, prefix := range []string{"flag provided but not defined: -", "bad flag syntax: ", "flag needs an argument: -", "invalid boolean flag "} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return (strings.HasPrefix(msg, "invalid value ") && strings.Contains(msg, " for flag -")) ||
		(strings.HasPrefix(msg, "invalid boolean value ") && strings.Contains(msg, " for -"))
}

// AsksHelp reports whether args ask for help (-h, -help or --help
// before any "--").
func AsksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// lockedBuffer is a bytes.Buffer that goroutines may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
}

// LoadConfigFile reads path (none: the defaults) and applies the
// environment overrides.
func LoadConfigFile(path string, getenv config.Getenv) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	cfg.ApplyEnv(getenv)
	return cfg, cfg.Validate()
}

// DurationFlag defines a duration flag that takes what the configuration
// takes (config.ParseDuration: 30s, 2m, 8h, 7d).
func DurationFlag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var(config.DurationFlag{D: &d}, name, usage)
	return &d
}
