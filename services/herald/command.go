package herald

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/services/process"
)

// commandFlags is the flag set of `herald NAME`: its errors and its usage
// (the command's help, then its flags) go to o.Stderr.
func commandFlags(name, usage string, o IO) *flag.FlagSet {
	fs := flag.NewFlagSet("herald "+name, flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.Usage = process.UsageFunc(fs, usage)
	return fs
}

// subcommandFlags splits `herald NAME SUB ARGS...` into SUB ("" when there is
// none, which the command answers with its usage), the flag set of `herald
// NAME SUB` and ARGS.
func subcommandFlags(name, usage string, args []string, o IO) (sub string, fs *flag.FlagSet, rest []string) {
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	return sub, commandFlags(name+" "+sub, usage, o), args
}

// parseFlagsOnly parses the flags of a command that takes no other argument:
// one is a usage error.
func parseFlagsOnly(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badUsage(fs)
	}
	return nil
}

// badUsage prints fs's usage and returns the error that makes the command exit 2.
func badUsage(fs *flag.FlagSet) error {
	fs.Usage()
	return flag.ErrHelp
}

// checkSub is nil when sub is one of the subcommands of `herald cmd`,
// subs. Else it is the error that makes the command exit 2, having printed
// its usage (no subcommand given) or that sub is not one, with the closest.
func checkSub(fs *flag.FlagSet, cmd, sub string, subs ...string) error {
	switch {
	case slices.Contains(subs, sub):
		return nil
	case sub == "" || strings.HasPrefix(sub, "-"):
		return badUsage(fs)
	}
	unknownSub(fs.Output(), cmd, sub, subs)
	return flag.ErrHelp
}

// timeoutFlag is --timeout of a command that connects to NATS: how long
// it waits to reach it, and (what) for what comes after.
func timeoutFlag(fs *flag.FlagSet, what string) *time.Duration {
	text := "how long to wait to reach NATS"
	if what != "" {
		text += ", and " + what
	}
	return process.DurationFlag(fs, "timeout", reachWait, text)
}

// reachWait is how long a command waits for NATS by default: a fleet that
// runs answers at once, and one that does not is told in seconds.
const reachWait = 2 * time.Second

// withFleet connects to the fleet's NATS within timeout, as connectWithin
// does, and runs fn on it, giving it timeout too; url is the server's, for
// messages (redactURL).
func withFleet(ctx context.Context, path string, timeout time.Duration, o IO, fn func(ctx context.Context, js jetstream.JetStream, url string) error) error {
	js, url, closeBus, err := connectWithin(ctx, path, timeout, o)
	if err != nil {
		return err
	}
	defer closeBus()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(ctx, js, url)
}

// connectWithin connects a command to the fleet's NATS: nats.url (or
// NATS_URL), else the embedded server of a running `herald dev` at
// nats.listen, waiting at most timeout (the command's --timeout) to reach it.
func connectWithin(ctx context.Context, path string, timeout time.Duration, o IO) (js jetstream.JetStream, url string, closeBus func(), err error) {
	cfg, err := LoadConfig(path, o.Getenv)
	if err != nil {
		return nil, "", nil, err
	}
	return dialBus(ctx, cfg, timeout, o)
}

// newTable starts a table on out with its header row (cells separated by
// tabs); Flush writes it.
func newTable(out io.Writer, header string) *tabwriter.Writer {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	return w
}
