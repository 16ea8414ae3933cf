package herald

import (
	"context"
	"flag"
	"fmt"
	"io"
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

// withFleet connects to the fleet's NATS as connectCLI does and runs fn on
// it, both within timeout; url is the server's, for messages (redactURL).
func withFleet(ctx context.Context, path string, timeout time.Duration, o IO, fn func(ctx context.Context, js jetstream.JetStream, url string) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	js, url, closeBus, err := connectCLI(ctx, path, o)
	if err != nil {
		return err
	}
	defer closeBus()
	return fn(ctx, js, url)
}

// newTable starts a table on out with its header row (cells separated by
// tabs); Flush writes it.
func newTable(out io.Writer, header string) *tabwriter.Writer {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	return w
}
