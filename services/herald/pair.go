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
	"github.com/heraldhq/herald/services/switchboard/pairing"
)

const pairUsage = `Usage:
  herald pair list|ls [--config FILE] [--json]
  herald pair approve [--config FILE] CODE
  herald pair revoke [--config FILE] --integration ID SENDER

A stranger who writes to an integration whose inbound dm_policy is pairing
is sent a short code and nothing else; only this command, run by whoever can
reach the fleet's NATS as the operator, lets them in. list shows the pending
codes (who asked, by sender id and by the name their channel gives, on which
integration and chat, until when) and the paired senders, with --json one
JSON object per line; approve lets in the sender who was given CODE, whose
next message goes through; revoke unpairs SENDER on integration ID.

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
	asJSON := fs.Bool("json", false, "one JSON object per code and per paired sender (list)")
	timeout := timeoutFlag(fs, "then for each of its answers")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := checkSub(fs, "pair", sub, "list", "ls", "approve", "revoke"); err != nil {
		return err
	}
	if sub == "ls" {
		sub = "list"
	}
	want := map[string]int{"list": 0, "approve": 1, "revoke": 1}
	if len(pos) != want[sub] || (sub == "revoke" && *integration == "") || (*asJSON && sub != "list") {
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
		if *asJSON {
			return listPairingJSON(ctx, p, o.Stdout)
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

// dialBus connects a command to the NATS cfg names, waiting at most wait to
// reach it: bus.Connect keeps trying in the background, and a command
// wants an answer.
func dialBus(ctx context.Context, cfg *config.Config, wait time.Duration, o IO) (js jetstream.JetStream, url string, closeBus func(), err error) {
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
	reach, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for !nc.IsConnected() {
		select {
		case <-reach.Done():
			closeBus()
			if ctx.Err() != nil {
				return nil, "", nil, ctx.Err()
			}
			return nil, "", nil, fmt.Errorf("cannot reach NATS at %s within %s (is herald dev running? set nats.url or NATS_URL otherwise; --timeout to wait longer)", redactURL(url), shortDuration(wait))
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

// shortDuration is d as a person types it: 2s, 300ms, 2m, 1h30m, to a
// tenth of a second.
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		d = d.Round(100 * time.Millisecond)
	case d >= 10*time.Millisecond:
		d = d.Round(10 * time.Millisecond)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func listPairing(ctx context.Context, p *pairing.Store, out io.Writer) error {
	codes, paired, err := pairingLists(ctx, p)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(codes) == 0 {
		fmt.Fprintln(w, "No pending pairing codes.")
	} else {
		fmt.Fprintln(w, "CODE\tINTEGRATION\tSENDER\tNAME\tCHAT\tEXPIRES")
		for _, c := range codes {
			left := strings.TrimSuffix(time.Until(c.Expires).Round(time.Minute).String(), "0s")
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s (in %s)\n", c.Code, c.Integration, cell(c.Sender), cell(c.Name), cell(c.ChatID), c.Expires.Local().Format(time.DateTime), left)
		}
	}
	if len(paired) > 0 {
		fmt.Fprintln(w, "\nPAIRED\tINTEGRATION\tSENDER\tNAME\tCHAT\tSINCE")
		for _, ps := range paired {
			fmt.Fprintf(w, "\t%s\t%s\t%s\t%s\t%s\n", ps.Integration, cell(ps.Sender), cell(ps.Name), cell(ps.ChatID), ps.Paired.Local().Format(time.DateTime))
		}
	}
	return w.Flush()
}

func pairingLists(ctx context.Context, p *pairing.Store) ([]pairing.Code, []pairing.Sender, error) {
	codes, err := p.Pending(ctx)
	if err != nil {
		return nil, nil, err
	}
	paired, err := p.Paired(ctx)
	return codes, paired, err
}

// pairJSON is one line of herald pair list --json: a pending code (state
// "pending", until expires) or a paired sender (state "paired", since
// paired, by code).
type pairJSON struct {
	State       string    `json:"state"`
	Code        string    `json:"code"`
	Integration string    `json:"integration"`
	Sender      string    `json:"sender"`
	Name        string    `json:"name,omitempty"`
	ChatID      string    `json:"chat_id,omitempty"`
	Created     time.Time `json:"created,omitzero"`
	Expires     time.Time `json:"expires,omitzero"`
	Paired      time.Time `json:"paired,omitzero"`
}

func listPairingJSON(ctx context.Context, p *pairing.Store, out io.Writer) error {
	codes, paired, err := pairingLists(ctx, p)
	if err != nil {
		return err
	}
	items := make([]pairJSON, 0, len(codes)+len(paired))
	for _, c := range codes {
		items = append(items, pairJSON{State: "pending", Code: c.Code, Integration: c.Integration, Sender: c.Sender, Name: c.Name, ChatID: c.ChatID, Created: utc(c.Created), Expires: utc(c.Expires)})
	}
	for _, ps := range paired {
		items = append(items, pairJSON{State: "paired", Code: ps.Code, Integration: ps.Integration, Sender: ps.Sender, Name: ps.Name, ChatID: ps.ChatID, Paired: utc(ps.Paired)})
	}
	return jsonLines(out, items)
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
