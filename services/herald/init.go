package herald

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/natsauth"
)

// runInit is `herald init`: the secrets and the butlers' services of a
// compose fleet, from its herald.yaml. It writes two files beside it:
//
//   - .env (mode 0600): a random MCP bearer token per butler, a random
//     password per NATS user of `herald nats-auth`, and an empty placeholder,
//     with a comment, for every provider secret an integration names. A
//     variable already in the file is never touched, so running it again
//     after adding a butler adds that butler's token and password only.
//   - compose.butlers.yaml: one compose service per butler, which
//     compose.yaml includes. It holds no secret and is rewritten each time.
//
// A herald.yaml with errors writes nothing.
const initUsage = `Usage:
  herald init [--config FILE] [--env-file FILE] [--compose-file FILE]

Writes what a compose fleet needs beside its herald.yaml: .env (mode 0600),
with a random MCP bearer token per butler, a random password per NATS user
of herald nats-auth and an empty placeholder for each provider secret an
integration names; and compose.butlers.yaml, one compose service per
butler. A variable already in .env is never changed, so running it again
after adding a butler adds that butler's only; a herald.yaml with errors
writes nothing.

Example:
  herald init --config deploy/herald.yaml   # needs a fleet's herald.yaml: this repository's deploy/ has one
`

func runInit(_ context.Context, args []string, o IO) error {
	fs := commandFlags("init", initUsage, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG, else deploy/herald.yaml or ./herald.yaml)")
	envPath := fs.String("env-file", "", "the secrets file (default .env beside the configuration)")
	composePath := fs.String("compose-file", "", "the butlers' compose services (default compose.butlers.yaml beside the configuration)")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	if *path == "" {
		*path = o.Getenv("HERALD_CONFIG")
	}
	if *path == "" {
		for _, p := range []string{filepath.Join("deploy", "herald.yaml"), "herald.yaml"} {
			if _, err := os.Stat(p); err == nil {
				*path = p
				break
			}
		}
	}
	if *path == "" {
		return fmt.Errorf("%w: no herald.yaml here or in deploy/; name it with --config FILE", config.ErrInvalid)
	}
	// Only the file: the environment's overrides (NATS_URL, ...) are the
	// containers' business, not what init generates.
	cfg, err := config.Load(*path)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return fmt.Errorf("%s: %w\nnothing was written; fix the file and run herald init again", *path, err)
	}
	dir := filepath.Dir(*path)
	if *envPath == "" {
		*envPath = filepath.Join(dir, ".env")
	}
	if *composePath == "" {
		*composePath = filepath.Join(dir, "compose.butlers.yaml")
	}
	// Everything is worked out before anything is written.
	compose, warnings := renderButlersCompose(cfg, filepath.Base(*path))
	raw, err := os.ReadFile(*path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	added, err := writeEnv(*envPath, initSecrets(cfg), hex.EncodeToString(sum[:6]))
	if err != nil {
		return err
	}
	if err := os.WriteFile(*composePath, compose, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", *composePath, err)
	}
	for _, w := range warnings {
		fmt.Fprintf(o.Stderr, "herald init: %s\n", w)
	}
	if len(added) == 0 {
		fmt.Fprintf(o.Stdout, "%s: every secret was already there; nothing added.\n", *envPath)
	} else {
		fmt.Fprintf(o.Stdout, "%s: added %s.\n", *envPath, strings.Join(added, ", "))
	}
	fmt.Fprintf(o.Stdout, "%s: %d butler services (%s).\n", *composePath, len(cfg.Butlers), strings.Join(cfg.ButlerNames(), ", "))
	fmt.Fprintf(o.Stdout, "After adding or removing a butler, also run: herald nats-auth --config %s > %s\n", *path, filepath.Join(dir, "nats-secure.conf"))
	return nil
}

// secret is one variable of .env. An empty value with a comment is a
// placeholder the operator fills in.
type secret struct {
	name    string
	value   string
	comment string
	section string
}

// Sections of .env, in the order they are written.
const (
	sectionTokens    = "MCP bearer tokens, one per butler. Claude Code sends one as\n# claude mcp add --transport http <butler> http://127.0.0.1:<port>/mcp --header \"Authorization: Bearer <token>\""
	sectionNATS      = "NATS passwords, one per user of nats-secure.conf (herald nats-auth): the\n# nats service reads them all, each Herald service its own, in NATS_URL."
	sectionProviders = "Provider secrets, for the messenger. Fill them in; an empty one\n# leaves its integration unavailable (the messenger says so, the rest works).\n# Single-quote a value with $, # or spaces in it."
)

// initSecrets are the variables cfg's fleet needs, in .env's order.
func initSecrets(cfg *config.Config) []secret {
	var out []secret
	for _, b := range cfg.Butlers {
		if b.MCPTokenEnv != "" {
			out = append(out, secret{name: b.MCPTokenEnv, value: randomHex(32), comment: "butler " + b.Name, section: sectionTokens})
		}
	}
	for _, u := range natsauth.Users(cfg) {
		out = append(out, secret{name: u.PasswordEnv, value: randomHex(24), comment: "NATS user " + u.Name, section: sectionNATS})
	}
	for _, in := range cfg.Integrations {
		if in.Disabled {
			continue
		}
		for _, k := range secretKeys(in.Settings) {
			out = append(out, secret{name: k.env, comment: fmt.Sprintf("integration %s (%s), %s: %s", in.ID, in.Type, k.key, providerHint(in.Type, k.key)), section: sectionProviders})
		}
	}
	return out
}

// envKey is a key of a channel's settings that names an environment
// variable (its yaml name ends in _env), and the variable it names.
type envKey struct{ key, env string }

// secretKeys finds the *_env keys of a channel's settings, nested blocks
// included (config.EnvKeys), so a new channel's secrets need nothing here;
// each by its own name (auth_env, not inbound.auth_env).
func secretKeys(settings config.ChannelSettings) []envKey {
	var out []envKey
	if settings == nil {
		return nil
	}
	config.EnvKeys(settings, func(path, env string) {
		if env != "" {
			out = append(out, envKey{key: path[strings.LastIndex(path, ".")+1:], env: env})
		}
	})
	return out
}

// providerHint says what goes into a provider secret.
func providerHint(typ, key string) string {
	switch typ + " " + key {
	case "telegram token_env":
		return "the bot token from @BotFather (123456:ABC...)"
	case "email smtp_url_env":
		return "smtp://user:pass@host:587 (STARTTLS) or smtps://user:pass@host:465, special characters percent-encoded"
	case "email auth_env":
		return `"user:password" senders must give the inbound SMTP listener (AUTH PLAIN)`
	case "slack token_env":
		return "the Slack app's bot token (xoxb-...)"
	case "slack signing_secret_env":
		return "the Slack app's signing secret"
	case "webhook secret_env":
		return `the Standard Webhooks secret, "whsec_" + base64`
	case "discord token_env":
		return "the Discord bot token"
	}
	return "the secret this key names"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// writeEnv adds to the file at path the secrets it does not define yet and
// returns their names, and sets HERALD_CONFIG_REVISION to revision. The file
// is replaced as a whole (a temporary file renamed over it) with mode 0600:
// it holds every secret of the fleet.
func writeEnv(path string, secrets []secret, revision string) ([]string, error) {
	existing, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	have := envNames(existing)
	var b bytes.Buffer
	if len(existing) == 0 {
		b.WriteString(envHeader)
	}
	// The one value init changes: not a secret, the fingerprint of
	// herald.yaml that makes `docker compose up -d` recreate the services.
	revLine := envRevision + "=" + revision
	for line := range strings.Lines(string(existing)) {
		if strings.HasPrefix(strings.TrimSpace(line), envRevision+"=") {
			line = revLine + "\n"
		}
		b.WriteString(line)
	}
	if len(existing) > 0 && !bytes.HasSuffix(existing, []byte("\n")) {
		b.WriteString("\n")
	}
	if !have[envRevision] {
		fmt.Fprintf(&b, "\n# The fingerprint of herald.yaml, set by herald init: when it changes,\n# docker compose up -d recreates the Herald services, which read the new file.\n%s\n", revLine)
	}
	var added []string
	section := ""
	for _, s := range secrets {
		if have[s.name] {
			continue
		}
		have[s.name] = true
		if s.section != section {
			section = s.section
			fmt.Fprintf(&b, "\n# %s\n", section)
		}
		fmt.Fprintf(&b, "# %s\n%s=%s\n", s.comment, s.name, s.value)
		added = append(added, s.name)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".env.herald-init-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up after a failure
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return nil, err
	}
	if _, err := tmp.Write(b.Bytes()); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	return added, nil
}

// envRevision is the variable holding herald.yaml's fingerprint.
const envRevision = "HERALD_CONFIG_REVISION"

const envHeader = `# Secrets of the Herald fleet, written by herald init (mode 0600). Never
# commit it (.gitignore keeps it out). herald init adds what is missing and
# never changes a value here: edit a value, or delete its line and run
# herald init again for a new random one. docker compose reads this file
# (compose.yaml's ${...}); the nats and messenger services get all of it.
`

// envNames are the variables a .env file defines.
func envNames(b []byte) map[string]bool {
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		if name, _, ok := strings.Cut(line, "="); ok {
			names[strings.TrimSpace(name)] = true
		}
	}
	return names
}

// renderButlersCompose is compose.butlers.yaml for cfg: a service
// butler-<name> per butler, as compose.yaml's Herald services are set up,
// with its NATS user, its token and its MCP port. configName is the file
// the services mount (herald.yaml). The warnings say what keeps a butler
// from being reached.
func renderButlersCompose(cfg *config.Config, configName string) ([]byte, []string) {
	var b strings.Builder
	var warnings []string
	b.WriteString(composeButlersHeader)
	b.WriteString("services:\n")
	for _, bt := range cfg.Butlers {
		svc := "butler-" + bt.Name
		user := natsauth.Butler(bt.Name)
		fmt.Fprintf(&b, "  %s:\n", svc)
		b.WriteString("    image: herald:local\n    build:\n      context: ..\n      dockerfile: deploy/Dockerfile\n      target: herald\n")
		fmt.Fprintf(&b, "    command: [\"butler\", \"--name\", %q]\n", bt.Name)
		b.WriteString("    restart: unless-stopped\n    environment:\n")
		b.WriteString("      HERALD_CONFIG: /etc/herald/herald.yaml\n      HERALD_CONFIG_REVISION: ${HERALD_CONFIG_REVISION:-}\n      HERALD_HTTP_LISTEN: 0.0.0.0:8790\n")
		fmt.Fprintf(&b, "      NATS_URL: nats://%s:${%s:?run herald init}@nats:4222\n", user.Name, natsauth.PasswordEnv(user.Name))
		if bt.MCPTokenEnv != "" {
			fmt.Fprintf(&b, "      %s: ${%s:?run herald init}\n", bt.MCPTokenEnv, bt.MCPTokenEnv)
		} else if bt.MCPTokenFile == "" && bt.MCPHTTP != "" {
			warnings = append(warnings, fmt.Sprintf("butler %s has no mcp_token_env: only tokens minted with `herald token mint --butler %s` open its MCP endpoint; add mcp_token_env: %s_MCP_TOKEN and run herald init again for a static one",
				bt.Name, bt.Name, strings.ToUpper(strings.ReplaceAll(bt.Name, "-", "_"))))
		}
		fmt.Fprintf(&b, "    volumes:\n      - ./%s:/etc/herald/herald.yaml:ro\n", configName)
		if host, port, err := net.SplitHostPort(bt.MCPHTTP); err == nil {
			fmt.Fprintf(&b, "    ports:\n      - \"${HERALD_BIND:-127.0.0.1}:%s:%s\"   # MCP at http://127.0.0.1:%s/mcp\n", port, port, port)
			if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
				warnings = append(warnings, fmt.Sprintf("butler %s listens on %s, loopback inside its container, which Docker's published port cannot reach: use mcp_http: 0.0.0.0:%s", bt.Name, bt.MCPHTTP, port))
			}
			if !slices.Contains(bt.AllowedHosts, svc) {
				warnings = append(warnings, fmt.Sprintf("butler %s: add %s to its allowed_hosts if other containers call it by its service name", bt.Name, svc))
			}
		}
		b.WriteString(composeButlerTail)
	}
	if len(cfg.Butlers) == 0 {
		b.WriteString("  {}\n")
	}
	return []byte(b.String()), warnings
}

const composeButlersHeader = `# Generated by ` + "`herald init`" + ` from herald.yaml: do not edit; run it again
# after adding or removing a butler. compose.yaml includes this file: one
# service per butler, set up as compose.yaml's other Herald services, with its
# own NATS user and MCP token from .env and its MCP port published on
# HERALD_BIND (127.0.0.1 unless .env says otherwise).

`

const composeButlerTail = `    depends_on:
      setup:
        condition: service_completed_successfully
    healthcheck:
      test: ["CMD", "/usr/local/bin/herald", "healthcheck", "http://127.0.0.1:8790/readyz"]
      interval: 5s
      timeout: 3s
      retries: 3
      start_period: 2m
    read_only: true
    cap_drop: [ALL]
    security_opt: [no-new-privileges:true]
    stop_grace_period: 20s
`
