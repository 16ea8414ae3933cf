package herald

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/process"
)

// IO is what a command reads and writes.
type IO = process.IO

const usage = `herald — the messaging fabric of a fleet of AI butlers

Usage:
  herald dev [--config FILE]             run NATS, the switchboard, the messenger and every butler in one process
  herald status [--json] [--watch]       the fleet at a glance: processes, integrations, queues, sessions
  herald config check [FILE]             check a herald.yaml without starting anything: problems, secrets needed
  herald notify [flags] MESSAGE          send a notification through a butler's notify tool
  herald pair list|approve|revoke ...    let in people who were sent a pairing code
  herald dead ls|replay ...              messages Herald gave up on, and replaying them
  herald init [--config FILE]            write a compose fleet's .env (tokens, NATS passwords) and butler services
  herald setup [--config FILE]           create and repair streams and buckets (privileged NATS user)
  herald nats-auth [--config FILE]       print the NATS authorization: one least-privilege user per service and butler
  herald token mint|ls|revoke ...        bearer tokens for the butlers' MCP endpoints
  herald log [flags]                     the audit log: what was routed, delivered, failed or refused, and why
  herald reload [--config FILE]          every running process applies the changed herald.yaml, without a restart
  herald grants ls|revoke ...            the sessions approvers allowed a tool ("Allow for this session")
  herald run [--butler NAME]             start Claude Code for the messages no session takes (a butler's run block)
  herald healthcheck [URL]               exit 0 if URL (default this host's /readyz) answers 2xx, for images with no shell
  herald version                         the version (also --version; switchboard, messenger and butler take it too)
  herald completion bash|zsh|fish        a completion script for the shell: commands, subcommands and their flags

Every command takes --help (herald help COMMAND prints the same): what it
does, its flags, and examples that work as printed in the directory of a
running herald dev. The commands that list take --json: one JSON object per
line (docs/operations.md, "Scripting the commands"). Configuration: --config
FILE, or HERALD_CONFIG; else the commands use the one the herald dev started
in this directory runs with (it records it in .herald/dev.json); none at all
is the butler "assistant" with the log channel and a web chat.

Examples:
  herald dev                               # the whole fleet in one process; Ctrl-C stops it
  herald notify "Hello from **Herald**"    # in a second terminal, in the same directory
  herald log --limit 5
`

// command is one of herald's commands: its name, and what runs it on the
// arguments after the name, returning the exit code.
type command struct {
	name string
	main func(ctx context.Context, args []string, o IO) int
}

// commands are herald's commands, in the order of its usage. What names
// them (an unknown command's "did you mean", herald help, herald
// completion) reads them here; what each takes is in its own --help.
func commands() []command {
	return []command{
		{"dev", runs("dev", runDev)},
		{"status", runs("status", runStatus)},
		{"config", runs("config", runConfig)},
		{"notify", runs("notify", runNotify)},
		{"pair", runs("pair", runPair)},
		{"dead", runs("dead", runDead)},
		{"init", runs("init", runInit)},
		{"setup", runs("setup", runSetup)},
		{"nats-auth", runs("nats-auth", runNATSAuth)},
		{"token", runs("token", runToken)},
		{"log", runs("log", runLog)},
		{"reload", runs("reload", runReload)},
		{"grants", runs("grants", runGrants)},
		{"run", func(ctx context.Context, args []string, o IO) int {
			return process.Main(ctx, butler.RunCommand(), args, o)
		}},
		{"healthcheck", runs("healthcheck", runHealthcheck)},
		{"version", mainVersion},
		{"help", mainHelp},
		{"completion", runs("completion", runCompletion)},
	}
}

// findCommand is the command called name, if there is one.
func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// Main runs `herald ARGS...` and returns the process exit code.
func Main(ctx context.Context, args []string, o IO) int {
	if len(args) == 0 {
		fmt.Fprint(o.Stderr, usage)
		return 2
	}
	name := args[0]
	switch name {
	case "--version", "-version":
		name = "version"
	case "-h", "-help", "--help":
		name = "help"
	}
	c, ok := findCommand(name)
	if !ok {
		return unknownCommand(o, name)
	}
	return c.main(ctx, args[1:], o)
}

// runs is the main of command name, which run carries out: --help is
// answered on stdout, a bad command line exits 2, an error is printed as
// "herald NAME: ..." and exits 1.
func runs(name string, run func(context.Context, []string, IO) error) func(context.Context, []string, IO) int {
	return func(ctx context.Context, args []string, o IO) int {
		err := process.AnswerHelp(args, o, func(o IO) error { return run(ctx, args, o) })
		switch {
		case err == nil:
			return 0
		case process.IsUsageError(err):
			return 2 // the flag package or the command printed the usage
		case errors.Is(err, ErrNotifyFailed):
			return 1
		}
		fmt.Fprintf(o.Stderr, "herald %s: %v\n", name, err)
		return 1
	}
}

func mainVersion(_ context.Context, args []string, o IO) int {
	if process.AsksHelp(args) {
		fmt.Fprint(o.Stdout, versionUsage)
		return 0
	}
	fmt.Fprintln(o.Stdout, "herald", butler.Version)
	return 0
}

// LoadConfig is the configuration of a command run next to a fleet: the
// file --config names (path), else HERALD_CONFIG, else the one the herald dev
// running in this directory records in DevStateFile, else the defaults; with
// the environment overrides applied. The file herald dev runs with, however
// it is named, is pointed at where that fleet listens (a port 0 in it is
// the port it got).
func LoadConfig(path string, getenv config.Getenv) (*config.Config, error) {
	cfg, _, err := loadConfig(path, getenv)
	return cfg, err
}

// devGCPercent is herald dev's GOGC unless the environment sets one.
const devGCPercent = 50

const devUsage = `Usage:
  herald dev [--config FILE]

Runs a whole fleet in one process, for development: an embedded NATS server
(JetStream data in .herald/nats), the switchboard, the messenger and every
butler; then prints where each listens, a notify to try and each butler's
claude mcp add line. It records in .herald/dev.json what it runs with, so
that herald notify, log, pair, dead, token and grants find it when run in
this directory, and swaps a default port another process holds for a free
one. Ctrl-C stops it; what is queued is kept for its next start.

Example:
  herald dev   # the butler "assistant", the log channel and a web chat; Ctrl-C stops it
`

func runDev(ctx context.Context, args []string, o IO) error {
	fs := commandFlags("dev", devUsage, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG; none: the butler \"assistant\", the log channel and a web chat)")
	if err := parseFlagsOnly(fs, args); err != nil {
		return err
	}
	// Never the state of an earlier herald dev: no file is the defaults.
	if *path == "" {
		*path = o.Getenv("HERALD_CONFIG")
	}
	cfg, err := process.LoadConfigFile(*path, o.Getenv)
	if err != nil {
		return err
	}
	if o.Getenv("GOGC") == "" {
		// One process holds the NATS server and every service: its heap may
		// grow to 1.5× what is live rather than Go's 2×. At 1,000 notify/s
		// that keeps it about a fifth smaller, at no cost in throughput or
		// latency `make bench` could tell from noise (docs/performance.md).
		// GOGC in the environment wins.
		debug.SetGCPercent(devGCPercent)
	}
	log := slog.New(obs.TraceLog(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	err = Dev(ctx, DevOptions{Config: cfg, Getenv: o.Getenv, Log: log, Out: o.Stdout, ConfigFile: *path, StateFile: DevStateFile})
	if err == nil || errors.Is(err, context.Canceled) {
		if cfg.NATS.URL == "" {
			log.Info("herald dev stopped; queued messages are kept in " + cfg.NATS.StoreDir)
		} else {
			log.Info("herald dev stopped")
		}
		return nil
	}
	return err
}

const notifyUsage = `Usage:
  herald notify [flags] MESSAGE

Sends MESSAGE (markdown) through a butler's notify tool over MCP, exactly as
a model calls it, and prints the tool's answer: the channel it went out on,
its delivery_id and request_id (herald log --request-id shows its trail).
The butler's endpoint comes from the configuration, its bearer token from
HERALD_MCP_TOKEN, else the butler's mcp_token_env or mcp_token_file, else
herald dev's. Exit 1 if the notification failed.

Examples:
  herald notify "Hello from **Herald**"
  herald notify --butler assistant --channel log --urgency high "Backup failed on nas"
  herald notify --channel web "Shown to everyone with the chat page open"
`

func runNotify(ctx context.Context, args []string, o IO) error {
	fs := commandFlags("notify", notifyUsage, o)
	var a NotifyArgs
	path := fs.String("config", "", "herald.yaml, to find the butler's MCP endpoint (default $HERALD_CONFIG, else the running herald dev's)")
	name := fs.String("butler", "", "the butler to notify through (default: the first configured)")
	fs.StringVar(&a.URL, "url", "", "the butler's MCP endpoint, instead of looking it up in the configuration")
	fs.StringVar(&a.Channel, "channel", "", "a channel type (telegram, email, log, web, ...) or type:integration_id (default: the butler's default_channel)")
	fs.StringVar(&a.Intent, "intent", "", "send (default), reply or react")
	fs.StringVar(&a.RequestContext, "request-context", "", "the request_context of the message answered, as the butler gave it (reply, react)")
	fs.StringVar(&a.Emoji, "emoji", "", "the emoji to react with (react)")
	fs.StringVar(&a.Subject, "subject", "", "the subject (email)")
	fs.StringVar(&a.Urgency, "urgency", "", "low, normal or high")
	fs.StringVar(&a.Recipient, "recipient", "", "the channel's address (chat id, email address, ...) instead of its default")
	timeout := process.DurationFlag(fs, "timeout", 2*time.Minute, "how long to wait for the butler")
	if err := fs.Parse(args); err != nil {
		return err
	}
	a.Message = strings.Join(fs.Args(), " ")
	// The config names the butler's endpoint and where its token is; with
	// --url it is needed for the token only.
	cfg, source, err := loadConfig(*path, o.Getenv)
	if err != nil && a.URL == "" {
		return err
	}
	var b *config.Butler
	if err == nil {
		b = &cfg.Butlers[0]
		if *name != "" {
			if b = cfg.Butler(*name); b == nil && a.URL == "" {
				return fmt.Errorf("no butler %q in %s; its butlers: %s", *name, source, butlerNames(cfg))
			}
		}
	}
	if a.URL == "" {
		a.URL = "http://" + b.MCPHTTP + butler.MCPPath
	}
	if a.Token, err = notifyToken(cfg, b, o.Getenv); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return Notify(ctx, a, o.Stdout)
}
