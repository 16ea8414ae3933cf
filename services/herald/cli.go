package herald

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
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
  herald dead [ls|replay ID|replay --all]  messages Herald gave up on, and replaying them
  herald init [--config FILE]          write deploy/.env (tokens, NATS passwords) and the butlers' compose services
  herald setup [--config FILE]         create and repair streams and buckets (privileged NATS user)
  herald nats-auth [--config FILE]     print the NATS server authorization: one least-privilege user per service and butler
  herald token [mint|revoke|ls]        bearer tokens for the butlers' MCP endpoints
  herald log [filters] [--follow]      the audit log: what was routed, delivered, failed or refused, and why
  herald reload [--config FILE]        every running process applies the changed herald.yaml, without a restart
  herald grants [ls|revoke ID]         the sessions approvers allowed a tool ("Allow for this session")
  herald healthcheck [URL]             exit 0 if URL (default this host's /readyz) answers 2xx, for images with no shell
  herald version                       the version (also --version; switchboard, messenger and butler take --version too)

Every command takes --help. Configuration: --config FILE, or HERALD_CONFIG; else the
commands use the one the herald dev started in this directory runs with (it records it
in .herald/dev.json); none at all is the butler "assistant" with the log channel.
`

// Main runs `herald ARGS...` and returns the process exit code.
func Main(ctx context.Context, args []string, o IO) int {
	if len(args) == 0 {
		fmt.Fprint(o.Stderr, usage)
		return 2
	}
	var run func(context.Context, []string, IO) error
	switch args[0] {
	case "dev":
		run = runDev
	case "notify":
		run = runNotify
	case "pair":
		run = runPair
	case "dead":
		run = runDead
	case "init":
		run = runInit
	case "setup":
		run = runSetup
	case "nats-auth":
		run = runNATSAuth
	case "token":
		run = runToken
	case "log":
		run = runLog
	case "healthcheck":
		run = runHealthcheck
	case "reload":
		run = runReload
	case "grants":
		run = runGrants
	case "version", "--version", "-version":
		fmt.Fprintln(o.Stdout, "herald", butler.Version)
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(o.Stdout, usage)
		return 0
	default:
		fmt.Fprintf(o.Stderr, "herald: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	err := answerHelp(args[1:], o, func(o IO) error { return run(ctx, args[1:], o) })
	switch {
	case err == nil:
		return 0
	case isUsageError(err):
		return 2 // the flag package or the command printed the usage
	case errors.Is(err, ErrNotifyFailed):
		return 1
	}
	fmt.Fprintf(o.Stderr, "herald %s: %v\n", args[0], err)
	return 1
}

// answerHelp runs cmd. When args ask for help (-h, -help or --help before
// any "--"), what cmd writes to stderr is held back: if cmd then answers
// flag.ErrHelp, that is the usage asked for, and it goes to stdout with a nil
// error (exit 0); anything else goes to stderr as it would have. Without a
// request for help, flag.ErrHelp stays a usage error (exit 2).
func answerHelp(args []string, o IO, cmd func(IO) error) error {
	if !asksHelp(args) {
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

// isUsageError reports whether err is a bad command line: flag.ErrHelp from
// a command that printed its usage, or an error of flag.FlagSet.Parse, which
// has printed the error and the usage itself. The flag package has no type
// for those, so they are told by the beginnings of its messages.
func isUsageError(err error) bool {
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

func asksHelp(args []string) bool {
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

// usageFunc prints a command's synopsis and its flags to fs's output.
func usageFunc(fs *flag.FlagSet, synopsis string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
}

// LoadConfig is the configuration of a command run next to a fleet: the
// file --config names (path), else HERALD_CONFIG, else the one the herald dev
// running in this directory records in DevStateFile (pointed at where that
// fleet listens), else the defaults; with the environment overrides applied.
func LoadConfig(path string, getenv config.Getenv) (*config.Config, error) {
	cfg, _, err := loadConfig(path, getenv)
	return cfg, err
}

// devGCPercent is herald dev's GOGC unless the environment sets one.
const devGCPercent = 50

func runDev(ctx context.Context, args []string, o IO) error {
	fs := flag.NewFlagSet("herald dev", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.Usage = usageFunc(fs, "herald dev [--config FILE]      NATS, switchboard, messenger and every butler in one process")
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG, or a log-only assistant)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	// Never the state of an earlier herald dev: no file is the defaults.
	if *path == "" {
		*path = o.Getenv("HERALD_CONFIG")
	}
	cfg, err := loadConfigFile(*path, o.Getenv)
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

func runNotify(ctx context.Context, args []string, o IO) error {
	fs := flag.NewFlagSet("herald notify", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.Usage = usageFunc(fs, "herald notify [flags] MESSAGE      send MESSAGE (markdown) through a butler's notify tool")
	var a NotifyArgs
	path := fs.String("config", "", "herald.yaml, to find the butler's MCP endpoint (default $HERALD_CONFIG, else the running herald dev's)")
	name := fs.String("butler", "", "the butler to notify through (default: the first configured)")
	fs.StringVar(&a.URL, "url", "", "the butler's MCP endpoint, instead of looking it up in the config")
	fs.StringVar(&a.Channel, "channel", "", "telegram, email, log, ... or type:integration_id")
	fs.StringVar(&a.Intent, "intent", "", "send (default), reply or react")
	fs.StringVar(&a.RequestContext, "request-context", "", "request_context JSON, for reply and react")
	fs.StringVar(&a.Emoji, "emoji", "", "emoji, for react")
	fs.StringVar(&a.Subject, "subject", "", "subject (email)")
	fs.StringVar(&a.Urgency, "urgency", "", "low, normal or high")
	fs.StringVar(&a.Recipient, "recipient", "", "the channel's address (chat id, email)")
	timeout := durationFlag(fs, "timeout", 2*time.Minute, "how long to wait for the butler")
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

// RunService runs one service of a compose fleet (switchboard, messenger,
// butler) as its own process, logging JSON to stderr.
func RunService(ctx context.Context, service string, args []string, o IO) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Fprintln(o.Stdout, service, butler.Version)
		return 0
	}
	if err := answerHelp(args, o, func(o IO) error { return runService(ctx, service, args, o) }); err != nil {
		if isUsageError(err) {
			return 2 // the flag package or the command printed the usage
		}
		fmt.Fprintf(o.Stderr, "%s: %v\n", service, err)
		return 1
	}
	return 0
}

func runService(ctx context.Context, service string, args []string, o IO) error {
	fs := flag.NewFlagSet(service, flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	synopsis := service + " [--config FILE]      Herald's " + service + ", one process of a fleet (NATS from nats.url or NATS_URL)"
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG)")
	httpListen := fs.String("http-listen", "", "host:port of /healthz, /readyz and /metrics (default http_listen, or $HERALD_HTTP_LISTEN, else 127.0.0.1:8791 for the switchboard, 127.0.0.1:8792 for the messenger, and for a butler none: its MCP listener serves /healthz and /readyz)")
	var name *string
	var stdio *bool
	readyDegraded := new(bool)
	if service == "messenger" {
		readyDegraded = fs.Bool("ready-when-degraded", false, "stay ready (/readyz 200) while an integration cannot work, naming it under \"degraded\" (as ready_when_degraded: true)")
	}
	if service == "butler" {
		synopsis = "butler --name NAME [--stdio] [--config FILE]      one butler's MCP server, over HTTP (mcp_http) or stdio (NATS from nats.url or NATS_URL)"
		name = fs.String("name", "", "the butler's name, as in the configuration (required)")
		stdio = fs.Bool("stdio", false, "speak MCP on stdin/stdout (for .mcp.json) instead of HTTP")
	}
	fs.Usage = usageFunc(fs, synopsis)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	// A service reads its configuration only from where it is told to, never
	// from the state of a herald dev that happens to run nearby.
	if *path == "" {
		*path = o.Getenv("HERALD_CONFIG")
	}
	cfg, err := loadConfigFile(*path, o.Getenv)
	if err != nil {
		return err
	}
	if cfg.NATS.URL == "" {
		return fmt.Errorf("%w: set nats.url or NATS_URL (only herald dev embeds NATS)", config.ErrInvalid)
	}
	// switchboard.Run and messenger.Run name themselves in their log lines.
	log := slog.New(obs.TraceLog(slog.NewJSONHandler(o.Stderr, nil)))
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
	defer func() {
		if err := bus.Drain(nc, bus.DrainTimeout); err != nil {
			log.Warn("stopping", "err", err)
		}
	}()
	listenGiven := *httpListen != "" || o.Getenv("HERALD_HTTP_LISTEN") != ""
	// What the flags set, at start and at each reload (which reads the file
	// as at start: the environment's overrides, then the flags).
	prepare := func(cfg *config.Config) {
		if *httpListen != "" {
			cfg.HTTPListen = *httpListen
		}
		if *readyDegraded {
			cfg.ReadyWhenDegraded = true
		}
	}
	prepare(cfg)
	probe := bus.ServiceProbeKey(service)
	if service == "butler" {
		probe = bus.ButlerProbeKey(*name)
	}
	listen := cfg.HTTPListenFor(service)
	p := newProcess(nc, listen, probe, log)
	butlerName := ""
	if name != nil {
		butlerName = *name
	}
	p.Metrics.Init(knownOf(cfg, service, butlerName))
	p.runProbes(ctx)
	reloads := reloadOptions{NC: nc, Process: service, Path: *path, Current: cfg, Getenv: o.Getenv, Log: log, Audit: true, Prepare: prepare}
	switch service {
	case "switchboard", "messenger":
		svc := newRerunner(service, log, func(ctx context.Context, cfg *config.Config, running func()) error {
			if service == "switchboard" {
				return switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: nc, Log: log, Metrics: p.Metrics, Health: p.Health, Running: running})
			}
			return messenger.Run(ctx, messenger.Options{Config: cfg, NC: nc, Log: log, Getenv: o.Getenv, Metrics: p.Metrics, Health: p.Health, HTTP: p.Server, Running: running})
		})
		reloads.Apply = func(ctx context.Context, cfg *config.Config, _ []string) error { return svc.Apply(ctx, cfg) }
		if err := startReloads(ctx, reloads); err != nil {
			return err
		}
		return p.run(ctx, func(ctx context.Context) error { return svc.Run(ctx, cfg) })
	case "butler":
		log := log.With("service", "butler")
		serve := func(ctx context.Context) error {
			b, err := butler.New(ctx, butler.Options{Name: *name, Config: cfg, NC: nc, Log: log, Metrics: p.Metrics, Health: p.Health, Store: p.Store})
			if err != nil {
				return err
			}
			// A butler may not write to the audit log: it logs its reloads.
			reloads.Process, reloads.Audit, reloads.Log = "butler "+*name, false, log
			reloads.Apply = func(_ context.Context, cfg *config.Config, _ []string) error { b.SetConfig(cfg); return nil }
			if err := startReloads(ctx, reloads); err != nil {
				return err
			}
			if *stdio {
				return b.ServeStdio(ctx, o.Stdin, o.Stdout)
			}
			return b.ServeHTTP(ctx, cfg.Butler(*name).MCPHTTP, func(url string) { log.Info("MCP endpoint", "url", url) })
		}
		// A --stdio butler is launched by an MCP client, maybe beside other
		// butlers: it listens only where it was asked to. An HTTP butler
		// with no http_listen serves /healthz and /readyz on its MCP
		// listener, each butler on its own.
		if (*stdio && !listenGiven) || listen == "" {
			if !*stdio {
				log.Info("no http_listen: /healthz and /readyz are on the MCP listener; /metrics needs --http-listen or HERALD_HTTP_LISTEN")
			}
			return serve(ctx)
		}
		return p.run(ctx, serve)
	}
	return fmt.Errorf("unknown service %q", service)
}

// durationFlag defines a duration flag that takes what the configuration
// takes (config.ParseDuration: 30s, 2m, 8h, 7d).
func durationFlag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var(config.DurationFlag{D: &d}, name, usage)
	return &d
}
