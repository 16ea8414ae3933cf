package herald

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/process"
	"github.com/heraldhq/herald/services/switchboard/pairing"
)

const pairUsage = `Usage:
  herald pair list [--config FILE]
  herald pair approve [--config FILE] CODE
  herald pair revoke [--config FILE] --integration ID SENDER

A stranger who writes to an integration whose inbound dm_policy is pairing
is sent a short code and nothing else; only this command, run by whoever can
reach the fleet's NATS as the operator, lets them in. list shows the pending
codes (who asked, on which integration and chat, until when) and the paired
senders; approve lets in the sender who was given CODE, whose next message
goes through; revoke unpairs SENDER on integration ID.

Examples:
  herald pair list
  herald pair approve K7P2QX                       # CODE as pair list shows it; needs an integration with dm_policy: pairing (tg_main here)
  herald pair revoke --integration tg_main 12345   # SENDER as pair list shows it
`

// runPair is `herald pair`: the operator's side of pairing. A stranger who
// writes to an integration with dm_policy pairing is sent a code; only this
// command, run by whoever can reach the fleet's NATS, lets them in.
func runPair(ctx context.Context, args []string, o IO) error {
	sub, fs, args := subcommandFlags("pair", pairUsage, args, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), to find NATS")
	integration := fs.String("integration", "", "the integration the sender is paired on (revoke)")
	timeout := process.DurationFlag(fs, "timeout", 10*time.Second, "how long to wait for NATS")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	want := map[string]int{"list": 0, "approve": 1, "revoke": 1}
	n, ok := want[sub]
	if !ok || len(pos) != n || (sub == "revoke" && *integration == "") {
		return badUsage(fs)
	}
	return withFleet(ctx, *path, *timeout, o, func(ctx context.Context, js jetstream.JetStream, url string) error {
		p, err := pairing.Open(ctx, js)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("NATS at %s has no pairing bucket yet; start Herald once first", redactURL(url))
		}
		if err != nil {
			return err
		}
		return pairCommand(ctx, p, sub, *integration, pos, o)
	})
}

// pairCommand carries out `herald pair SUB` on the fleet's registry.
func pairCommand(ctx context.Context, p *pairing.Store, sub, integration string, pos []string, o IO) error {
	switch sub {
	case "list":
		return listPairing(ctx, p, o.Stdout)
	case "approve":
		ps, err := p.Approve(ctx, pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Stdout, "Paired %s on %s; their next message goes through.\n", ps.Sender, ps.Integration)
	case "revoke":
		if err := p.Revoke(ctx, integration, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(o.Stdout, "Unpaired %s on %s.\n", pos[0], integration)
	}
	return nil
}

// connectCLI connects a command to the fleet's NATS: nats.url (or NATS_URL),
// else the embedded server of a running `herald dev` at nats.listen.
func connectCLI(ctx context.Context, path string, o IO) (js jetstream.JetStream, url string, closeBus func(), err error) {
	cfg, err := LoadConfig(path, o.Getenv)
	if err != nil {
		return nil, "", nil, err
	}
	return connectBus(ctx, cfg, o)
}

// connectBus connects a command to the NATS cfg names.
func connectBus(ctx context.Context, cfg *config.Config, o IO) (js jetstream.JetStream, url string, closeBus func(), err error) {
	url = cfg.NATS.URL
	if url == "" {
		url = "nats://" + cfg.NATS.Listen
	}
	log := slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	nc, err := bus.Connect(url, "herald-cli", cfg.NATS.CredsFile, log)
	if err != nil {
		return nil, "", nil, err
	}
	closeBus = func() { nc.Close() }
	// bus.Connect keeps trying in the background; a CLI wants an answer.
	for !nc.IsConnected() {
		select {
		case <-ctx.Done():
			closeBus()
			return nil, "", nil, fmt.Errorf("cannot reach NATS at %s (is herald dev running? set nats.url or NATS_URL otherwise)", redactURL(url))
		case <-time.After(20 * time.Millisecond):
		}
	}
	js, err = jetstream.New(nc)
	if err != nil {
		closeBus()
		return nil, "", nil, err
	}
	return js, url, closeBus, nil
}

func listPairing(ctx context.Context, p *pairing.Store, out io.Writer) error {
	codes, err := p.Pending(ctx)
	if err != nil {
		return err
	}
	paired, err := p.Paired(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(codes) == 0 {
		fmt.Fprintln(w, "No pending pairing codes.")
	} else {
		fmt.Fprintln(w, "CODE\tINTEGRATION\tSENDER\tCHAT\tEXPIRES")
		for _, c := range codes {
			left := strings.TrimSuffix(time.Until(c.Expires).Round(time.Minute).String(), "0s")
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s (in %s)\n", c.Code, c.Integration, c.Sender, dash(c.ChatID), c.Expires.Local().Format(time.DateTime), left)
		}
	}
	if len(paired) > 0 {
		fmt.Fprintln(w, "\nPAIRED\tINTEGRATION\tSENDER\tCHAT\tSINCE")
		for _, ps := range paired {
			fmt.Fprintf(w, "\t%s\t%s\t%s\t%s\n", ps.Integration, ps.Sender, dash(ps.ChatID), ps.Paired.Local().Format(time.DateTime))
		}
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseInterleaved parses a subcommand's flags wherever they stand among its
// positional arguments ("approve K7P2QX --config f"), and returns the latter.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for rest := args; ; rest = fs.Args()[1:] {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
	}
}
