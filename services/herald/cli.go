package herald

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/switchboard"
)

// IO is what a command reads and writes.
type IO struct {
	Getenv config.Getenv
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

const usage = `herald — the messaging fabric of a fleet of AI butlers

Usage:
  herald dev [--config FILE]           run NATS, switchboard, messenger and every butler in one process
  herald notify [flags] MESSAGE        send a notification through a butler's notify tool
  herald pair [list|approve|revoke]    let in people who were sent a pairing code
  herald dead [ls|replay ID|--all]     messages Herald gave up on, and replaying them
  herald setup [--config FILE]         create and repair streams and buckets (privileged NATS user)
  herald nats-auth [--config FILE]     print the NATS server authorization: one least-privilege user per service and butler
  herald token [mint|revoke|ls]        bearer tokens for the butlers' MCP endpoints
  herald version

Configuration: --config FILE, or HERALD_CONFIG; none runs the butler "assistant" with the log channel.
`

// Main runs `herald ARGS...` and returns the process exit code.
func Main(ctx context.Context, args []string, o IO) int {
	if len(args) == 0 {
		fmt.Fprint(o.Stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "dev":
		err = runDev(ctx, args[1:], o)
	case "notify":
		err = runNotify(ctx, args[1:], o)
	case "pair":
		err = runPair(ctx, args[1:], o)
	case "dead":
		err = runDead(ctx, args[1:], o)
	case "setup":
		err = runSetup(ctx, args[1:], o)
	case "nats-auth":
		err = runNATSAuth(ctx, args[1:], o)
	case "token":
		err = runToken(ctx, args[1:], o)
	case "version":
		fmt.Fprintln(o.Stdout, "herald", butler.Version)
	case "help", "-h", "--help":
		fmt.Fprint(o.Stdout, usage)
	default:
		fmt.Fprintf(o.Stderr, "herald: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 2
	case errors.Is(err, ErrNotifyFailed):
		return 1
	}
	fmt.Fprintf(o.Stderr, "herald %s: %v\n", args[0], err)
	return 1
}

// LoadConfig reads --config (or HERALD_CONFIG, or none for the defaults) and
// applies the environment overrides.
func LoadConfig(path string, getenv config.Getenv) (*config.Config, error) {
	if path == "" {
		path = getenv("HERALD_CONFIG")
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	cfg.ApplyEnv(getenv)
	return cfg, cfg.Validate()
}

func runDev(ctx context.Context, args []string, o IO) error {
	fs := flag.NewFlagSet("herald dev", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG, or a log-only assistant)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := LoadConfig(*path, o.Getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	err = Dev(ctx, DevOptions{Config: cfg, Getenv: o.Getenv, Log: log, Out: o.Stdout})
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

func runNotify(ctx context.Context, args []string, o IO) error {
	fs := flag.NewFlagSet("herald notify", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	var a NotifyArgs
	path := fs.String("config", "", "herald.yaml, to find the butler's MCP endpoint")
	name := fs.String("butler", "", "the butler to notify through (default: the first configured)")
	fs.StringVar(&a.URL, "url", "", "the butler's MCP endpoint, instead of looking it up in the config")
	fs.StringVar(&a.Channel, "channel", "", "telegram, email, log, ... or type:integration_id")
	fs.StringVar(&a.Intent, "intent", "", "send (default), reply or react")
	fs.StringVar(&a.RequestContext, "request-context", "", "request_context JSON, for reply and react")
	fs.StringVar(&a.Emoji, "emoji", "", "emoji, for react")
	fs.StringVar(&a.Subject, "subject", "", "subject (email)")
	fs.StringVar(&a.Urgency, "urgency", "", "low, normal or high")
	fs.StringVar(&a.Recipient, "recipient", "", "the channel's address (chat id, email)")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the butler")
	if err := fs.Parse(args); err != nil {
		return err
	}
	a.Message = strings.Join(fs.Args(), " ")
	// The config names the butler's endpoint and where its token is; with
	// --url it is needed for the token only.
	cfg, err := LoadConfig(*path, o.Getenv)
	if err != nil && a.URL == "" {
		return err
	}
	var b *config.Butler
	if err == nil {
		b = &cfg.Butlers[0]
		if *name != "" {
			if b = cfg.Butler(*name); b == nil && a.URL == "" {
				return fmt.Errorf("no butler %q in the configuration", *name)
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

// RunService runs one service of a compose fleet (switchboard, messenger,
// butler) as its own process, logging JSON to stderr.
func RunService(ctx context.Context, service string, args []string, o IO) int {
	if err := runService(ctx, service, args, o); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(o.Stderr, "%s: %v\n", service, err)
		return 1
	}
	return 0
}

func runService(ctx context.Context, service string, args []string, o IO) error {
	fs := flag.NewFlagSet(service, flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG)")
	var name *string
	var stdio *bool
	if service == "butler" {
		name = fs.String("name", "", "the butler's name, as in the configuration (required)")
		stdio = fs.Bool("stdio", false, "speak MCP on stdin/stdout (for .mcp.json) instead of HTTP")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := LoadConfig(*path, o.Getenv)
	if err != nil {
		return err
	}
	if cfg.NATS.URL == "" {
		return fmt.Errorf("%w: set nats.url or NATS_URL (only herald dev embeds NATS)", config.ErrInvalid)
	}
	// switchboard.Run and messenger.Run name themselves in their log lines.
	log := slog.New(slog.NewJSONHandler(o.Stderr, nil))
	conn := service
	if service == "butler" {
		if *name == "" {
			return fmt.Errorf("--name is required")
		}
		conn = "butler." + *name
	}
	nc, err := bus.Connect(cfg.NATS.URL, conn, cfg.NATS.CredsFile, log)
	if err != nil {
		return err
	}
	defer func() { _ = nc.Drain() }()
	switch service {
	case "switchboard":
		return switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: nc, Log: log})
	case "messenger":
		return messenger.Run(ctx, messenger.Options{Config: cfg, NC: nc, Log: log, Getenv: o.Getenv})
	case "butler":
		log := log.With("service", "butler")
		b, err := butler.New(ctx, butler.Options{Name: *name, Config: cfg, NC: nc, Log: log})
		if err != nil {
			return err
		}
		if *stdio {
			return b.ServeStdio(ctx, o.Stdin, o.Stdout)
		}
		return b.ServeHTTP(ctx, cfg.Butler(*name).MCPHTTP, func(url string) { log.Info("MCP endpoint", "url", url) })
	}
	return fmt.Errorf("unknown service %q", service)
}
