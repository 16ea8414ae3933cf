package process

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
)

// Spec is one kind of fleet process (the switchboard, the messenger, a
// butler) as its own binary: its name, its own flags, and what it runs.
// Main does the rest, the same for each: the common flags, the
// configuration, NATS, the HTTP listener, the metrics and the reloads. Each
// service package has its own Spec, so each binary links only its service.
type Spec struct {
	// Name is the process's kind, as ServiceUsage and
	// config.Config.HTTPListenFor know it.
	Name string
	// Flags defines the service's own flags on fs and returns what they
	// set in a configuration, applied at start and at each reload (nil:
	// nothing).
	Flags func(fs *flag.FlagSet) (prepare func(*config.Config))
	// Identity is, once the flags are parsed and the configuration read,
	// the process's NATS connection name, its store probe's key and the
	// butler it is ("" for the others), or why they do not say; nil: Name
	// and its service probe key.
	Identity func(cfg *config.Config) (conn, probe, butler string, err error)
	// Serve runs the service until ctx ends.
	Serve func(ctx context.Context, r *Running) error
}

// Running is what Main set up for a Spec's Serve.
type Running struct {
	Config  *config.Config
	NC      *nats.Conn
	Log     *slog.Logger
	Process *Process
	// Reloads are the process's reload options but for Apply, which Serve
	// sets before it calls StartReloads (Rerun does both).
	Reloads ReloadOptions
	IO      IO
	// Listen is where the process listener serves ("" none: a butler's MCP
	// listener serves its health); ListenGiven, whether --http-listen or
	// HERALD_HTTP_LISTEN asked for one.
	Listen      string
	ListenGiven bool
}

// Rerun runs a service a reload restarts (the switchboard, the messenger)
// beside the process listener, until ctx ends. Its readiness check, check,
// fails as starting until the service registers its own: /readyz never
// says ready while the service is still opening the bus.
func (r *Running) Rerun(ctx context.Context, check string, run func(ctx context.Context, cfg *config.Config, running func()) error) error {
	r.Process.Health.Add(check, obs.NewState().Check)
	svc := NewRerunner(r.Reloads.Process, r.Log, run)
	r.Reloads.Apply = func(ctx context.Context, cfg *config.Config, _ []string) error { return svc.Apply(ctx, cfg) }
	if err := StartReloads(ctx, r.Reloads); err != nil {
		return err
	}
	return r.Process.Run(ctx, func(ctx context.Context) error { return svc.Run(ctx, r.Config) })
}

// Main runs the process spec describes with args, logging JSON to
// stderr, and returns its exit code: 0, 1 for an error, 2 for a bad
// command line.
func Main(ctx context.Context, spec Spec, args []string, o IO) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Fprintln(o.Stdout, spec.Name, obs.Version)
		return 0
	}
	if err := AnswerHelp(args, o, func(o IO) error { return run(ctx, spec, args, o) }); err != nil {
		if IsUsageError(err) {
			return 2 // the flag package or the command printed the usage
		}
		fmt.Fprintf(o.Stderr, "%s: %v\n", spec.Name, err)
		return 1
	}
	return 0
}

func run(ctx context.Context, spec Spec, args []string, o IO) error {
	fs := flag.NewFlagSet(spec.Name, flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG)")
	httpListen := fs.String("http-listen", "", "host:port of /healthz, /readyz and /metrics (default http_listen, or $HERALD_HTTP_LISTEN, else 127.0.0.1:8791 for the switchboard, 127.0.0.1:8792 for the messenger, and for a butler none: its MCP listener serves /healthz and /readyz)")
	var own func(*config.Config)
	if spec.Flags != nil {
		own = spec.Flags(fs)
	}
	fs.Usage = UsageFunc(fs, ServiceUsage[spec.Name])
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
	cfg, err := LoadConfigFile(*path, o.Getenv)
	if err != nil {
		return err
	}
	if cfg.NATS.URL == "" {
		return fmt.Errorf("%w: set nats.url or NATS_URL (only herald dev embeds NATS)", config.ErrInvalid)
	}
	conn, probe, butler := spec.Name, bus.ServiceProbeKey(spec.Name), ""
	if spec.Identity != nil {
		if conn, probe, butler, err = spec.Identity(cfg); err != nil {
			return err
		}
	}
	// The services name themselves in their log lines.
	log := slog.New(obs.TraceLog(slog.NewJSONHandler(o.Stderr, nil)))
	nc, err := bus.Connect(cfg.NATS.URL, conn, cfg.NATS.CredsFile, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := bus.Drain(nc, bus.DrainTimeout); err != nil {
			log.Warn("stopping", "err", err)
		}
	}()
	// What the flags set, at start and at each reload (which reads the file
	// as at start: the environment's overrides, then the flags).
	prepare := func(cfg *config.Config) {
		if *httpListen != "" {
			cfg.HTTPListen = *httpListen
		}
		if own != nil {
			own(cfg)
		}
	}
	prepare(cfg)
	listen := cfg.HTTPListenFor(spec.Name)
	p := New(nc, listen, probe, log)
	p.Metrics.Init(KnownOf(cfg, spec.Name, butler))
	p.RunProbes(ctx)
	return spec.Serve(ctx, &Running{Config: cfg, NC: nc, Log: log, Process: p, IO: o, Listen: listen,
		ListenGiven: *httpListen != "" || o.Getenv("HERALD_HTTP_LISTEN") != "",
		Reloads:     ReloadOptions{NC: nc, Process: spec.Name, Path: *path, Current: cfg, Getenv: o.Getenv, Log: log, Audit: true, Prepare: prepare}})
}

// Exec is a service binary's main: it runs spec with the program's
// arguments until SIGINT or SIGTERM, and exits with Main's code.
func Exec(spec Spec) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, spec, os.Args[1:], IO{Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
