package herald

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
)

const grantsUsage = `Usage:
  herald grants ls [--config FILE] [--json]
  herald grants revoke [--config FILE] ID

A grant lets a butler answer its MCP session's permission requests for one
tool itself, because an approver tapped "Allow for this session"; it lasts
approvals.grant_ttl (8h) at most. ls lists the standing grants (butler,
tool, session, who allowed it, where, until when; with --json one JSON
object per line); revoke ends one at once: the session's next request goes
to the approvers.

Examples:
  herald grants ls
  herald grants revoke g_3f9a1c07e2   # ID as grants ls lists it; an approver's "Allow for this session" makes one
`

// runGrants is `herald grants`.
func runGrants(ctx context.Context, args []string, o IO) error {
	sub, fs, args := subcommandFlags("grants", grantsUsage, args, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), to find NATS")
	asJSON := fs.Bool("json", false, "one JSON object per grant (ls)")
	timeout := timeoutFlag(fs, "then for each of its answers")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := checkSub(fs, "grants", sub, "ls", "revoke"); err != nil {
		return err
	}
	switch {
	case sub == "ls" && len(pos) == 0:
	case sub == "revoke" && len(pos) == 1 && !*asJSON:
	default:
		return badUsage(fs)
	}
	return withFleet(ctx, *path, *timeout, o, func(ctx context.Context, js jetstream.JetStream, _ string) error {
		store, err := approval.Open(ctx, js)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("no approvals bucket yet; start Herald once first")
		}
		if err != nil {
			return err
		}
		if sub == "revoke" {
			g, err := store.Revoke(ctx, pos[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Stdout, "Revoked %s: butler %s's session no longer runs %s without asking.\n", g.ID, g.Butler, g.ToolName)
			return nil
		}
		grants, err := store.Grants(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return listGrantsJSON(grants, o.Stdout)
		}
		return listGrants(grants, o)
	})
}

func listGrants(grants []approval.Grant, o IO) error {
	if len(grants) == 0 {
		fmt.Fprintln(o.Stdout, "No standing grants.")
		return nil
	}
	w := newTable(o.Stdout, "ID\tBUTLER\tTOOL\tSESSION\tBY\tVIA\tUNTIL")
	for _, g := range grants {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Butler, cell(g.ToolName), cell(shortSession(g.Session)), cell(g.GrantedBy), g.Channel, g.ExpiresAt.Local().Format(time.DateTime))
	}
	return w.Flush()
}

// grantJSON is one line of herald grants ls --json.
type grantJSON struct {
	ID        string    `json:"id"`
	Butler    string    `json:"butler"`
	Tool      string    `json:"tool"`
	Session   string    `json:"session"`
	GrantedBy string    `json:"granted_by,omitempty"`
	Channel   string    `json:"channel"`
	Created   time.Time `json:"created,omitzero"`
	Expires   time.Time `json:"expires"`
}

func listGrantsJSON(grants []approval.Grant, out io.Writer) error {
	items := make([]grantJSON, 0, len(grants))
	for _, g := range grants {
		items = append(items, grantJSON{ID: g.ID, Butler: g.Butler, Tool: g.ToolName, Session: g.Session, GrantedBy: g.GrantedBy,
			Channel: g.Channel, Created: utc(g.CreatedAt), Expires: utc(g.ExpiresAt)})
	}
	return jsonLines(out, items)
}

// shortSession is a session id as a table shows it: enough to tell two apart.
func shortSession(s string) string {
	if r := []rune(s); len(r) > 24 {
		return string(r[:24]) + "…"
	}
	return s
}
