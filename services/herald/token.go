package herald

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/token"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/process"
)

const tokenUsage = `Usage:
  herald token mint [--config FILE] --butler NAME [--ttl D]
  herald token ls [--config FILE] [--butler NAME] [--json]
  herald token revoke [--config FILE] ID

Bearer tokens for the butlers' MCP endpoints, besides the ones the
configuration names and herald dev's. mint prints a new token for butler
NAME on stdout, once (only its hash is kept, in the NATS bucket
herald_tokens), and its ID on stderr; ls lists the tokens in force by ID,
never the tokens (with --json one JSON object per line); revoke stops one
working within seconds. A token works for the butler it was minted for and
no other.

Examples:
  herald token mint --butler assistant --ttl 720h   # prints the token, once; its ID goes to stderr
  herald token ls
  herald token revoke 9f86d081884c7d65              # ID as mint printed it
`

// runToken is `herald token`: bearer tokens for the butlers' MCP endpoints,
// kept (as hashes) in the fleet's herald_tokens bucket. Whoever can reach the
// fleet's NATS with the operator's rights can mint them.
func runToken(ctx context.Context, args []string, o IO) error {
	sub, fs, args := subcommandFlags("token", tokenUsage, args, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), to find NATS and the butlers")
	name := fs.String("butler", "", "the butler the token is for (mint), or whose tokens to list (ls)")
	ttl := process.DurationFlag(fs, "ttl", 0, "how long the token works, e.g. 30d or 12h (default: until revoked)")
	asJSON := fs.Bool("json", false, "one JSON object per token (ls)")
	timeout := timeoutFlag(fs, "then for each of its answers")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := checkSub(fs, "token", sub, "mint", "ls", "revoke"); err != nil {
		return err
	}
	want := map[string]int{"mint": 0, "revoke": 1, "ls": 0}
	if len(pos) != want[sub] || (sub == "mint" && *name == "") || (*asJSON && sub != "ls") {
		return badUsage(fs)
	}
	if *ttl < 0 {
		return fmt.Errorf("--ttl %s is negative", *ttl)
	}
	cfg, err := LoadConfig(*path, o.Getenv)
	if err != nil {
		return err
	}
	if sub == "mint" && cfg.Butler(*name) == nil {
		return fmt.Errorf("no butler %q in the configuration", *name)
	}
	return withFleet(ctx, *path, *timeout, o, func(ctx context.Context, js jetstream.JetStream, url string) error {
		store, err := token.Open(ctx, js)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("NATS at %s has no %s bucket yet; start Herald once first (or run herald setup)", redactURL(url), "herald_tokens")
		}
		if err != nil {
			return err
		}
		if *asJSON {
			recs, err := store.List(ctx, *name)
			if err != nil {
				return err
			}
			return listTokensJSON(o.Stdout, recs)
		}
		return tokenCommand(ctx, store, sub, *name, *ttl, pos, o)
	})
}

// tokenCommand carries out `herald token SUB` on the fleet's store.
func tokenCommand(ctx context.Context, store *token.Store, sub, name string, ttl time.Duration, pos []string, o IO) error {
	switch sub {
	case "mint":
		tok, rec, err := store.Mint(ctx, name, ttl)
		if err != nil {
			return err
		}
		// stdout gets the token alone, so TOKEN=$(herald token mint ...) works;
		// it is shown this once and kept nowhere.
		fmt.Fprintln(o.Stdout, tok)
		fmt.Fprintf(o.Stderr, "Token %s for butler %s, %s. Send it as Authorization: Bearer <token>; revoke it with: herald token revoke %s\n",
			rec.ID, rec.Butler, expiry(rec), rec.ID)
	case "revoke":
		rec, err := store.Revoke(ctx, pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Stdout, "Revoked token %s of butler %s; it stops working within %s.\n", rec.ID, rec.Butler, butler.TokenCacheFor)
	case "ls":
		recs, err := store.List(ctx, name)
		if err != nil {
			return err
		}
		return listTokens(o.Stdout, recs)
	}
	return nil
}

func expiry(rec token.Record) string {
	if rec.Expires.IsZero() {
		return "good until revoked"
	}
	return "expires " + rec.Expires.Local().Format(time.DateTime)
}

func listTokens(out io.Writer, recs []token.Record) error {
	if len(recs) == 0 {
		fmt.Fprintln(out, "No minted tokens.")
		return nil
	}
	w := newTable(out, "ID\tBUTLER\tCREATED\tEXPIRES")
	now := time.Now()
	for _, r := range recs {
		exp := "never"
		if !r.Expires.IsZero() {
			exp = r.Expires.Local().Format(time.DateTime)
			if r.Expired(now) {
				exp += " (expired)"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.ID, r.Butler, r.Created.Local().Format(time.DateTime), exp)
	}
	return w.Flush()
}

// tokenJSON is one line of herald token ls --json: a token by its ID,
// never the token.
type tokenJSON struct {
	ID      string    `json:"id"`
	Butler  string    `json:"butler"`
	Created time.Time `json:"created"`
	// Expires is when it stops working; none: when it is revoked.
	Expires time.Time `json:"expires,omitzero"`
	Expired bool      `json:"expired"`
}

func listTokensJSON(out io.Writer, recs []token.Record) error {
	now := time.Now()
	items := make([]tokenJSON, 0, len(recs))
	for _, r := range recs {
		items = append(items, tokenJSON{ID: r.ID, Butler: r.Butler, Created: utc(r.Created), Expires: utc(r.Expires), Expired: r.Expired(now)})
	}
	return jsonLines(out, items)
}

// DevTokenFile is where `herald dev` keeps the token of a butler that has no
// mcp_token_env or mcp_token_file: next to the embedded NATS data
// (.herald/tokens/<butler>.token by default), where `herald notify` finds it.
func DevTokenFile(cfg *config.Config, butlerName string) string {
	return filepath.Join(filepath.Dir(cfg.NATS.StoreDir), "tokens", butlerName+".token")
}

// devToken returns the token in path, creating it (0600, in a 0700
// directory) on first use.
func devToken(path string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("keeping MCP tokens: %w", err)
	}
	// The directory holds secrets; a wider one from elsewhere is narrowed.
	if err := os.Chmod(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("keeping MCP tokens: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("reading the MCP token: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("the MCP token file %s is empty; delete it and start again for a new one", path)
		}
		return tok, os.Chmod(path, 0o600)
	}
	if err != nil {
		return "", fmt.Errorf("keeping MCP tokens: %w", err)
	}
	tok := token.NewStatic()
	if _, err := io.WriteString(f, tok+"\n"); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return tok, f.Close()
}

// EnvMCPToken, when set, is the token `herald notify` sends (a minted one,
// say), instead of the butler's configured or herald dev's token.
const EnvMCPToken = "HERALD_MCP_TOKEN"

// notifyToken finds the token `herald notify` sends to butler b, without a
// flag: HERALD_MCP_TOKEN, else the butler's mcp_token_env / mcp_token_file,
// else the token `herald dev` keeps for it. "" when there is none.
func notifyToken(cfg *config.Config, b *config.Butler, getenv config.Getenv) (string, error) {
	if tok := strings.TrimSpace(getenv(EnvMCPToken)); tok != "" {
		return tok, nil
	}
	if cfg == nil || b == nil {
		return "", nil
	}
	if b.MCPTokenEnv != "" || b.MCPTokenFile != "" {
		tok, err := config.Secret(getenv, b.MCPTokenEnv, b.MCPTokenFile)
		if err != nil {
			return "", fmt.Errorf("butler %s's MCP token: %w", b.Name, err)
		}
		return tok, nil
	}
	tok, err := os.ReadFile(DevTokenFile(cfg, b.Name))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("butler %s's MCP token: %w", b.Name, err)
	}
	return strings.TrimSpace(string(tok)), nil
}
