// Package herald is the `herald` command: `herald dev` runs the whole fleet in
// one process (embedded NATS, switchboard, messenger, every configured butler),
// and `herald notify` sends a notification through a butler's real MCP tool.
package herald

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/web"
	"github.com/heraldhq/herald/services/process"
	"github.com/heraldhq/herald/services/switchboard"
)

// DevOptions configure `herald dev`.
type DevOptions struct {
	Config *config.Config
	Getenv config.Getenv
	Log    *slog.Logger
	// Out gets the endpoint list once everything listens.
	Out io.Writer
	// Ready, if set, is called with the endpoints once everything listens.
	Ready func(Endpoints)
	// StateFile, if set, is where Dev records ConfigFile (the file Config
	// was read from, "" for the defaults) and the endpoints once everything
	// listens, before printing them, for the commands run next to it
	// (DevStateFile); it removes the record when it stops.
	StateFile, ConfigFile string
}

// Endpoints are what `herald dev` prints.
type Endpoints struct {
	NATS    string
	Store   string
	Butlers map[string]string // name -> MCP URL
	Web     map[string]string // web integration id -> chat page URL
	// Unavailable are the integrations that cannot work, and why (the
	// messenger's status).
	Unavailable map[string]string
	// HTTP is the listener of /healthz, /readyz, /metrics and the pushed
	// channels' endpoints (http_listen).
	HTTP string
}

// Dev runs the fleet until ctx is done.
func Dev(ctx context.Context, o DevOptions) error {
	cfg, log, started := o.Config, o.Log, time.Now()
	if log == nil {
		log = slog.Default()
	}
	defer servePprof(o.Getenv, log)() // only with HERALD_PPROF=host:port (make bench PROFILE=1)
	defer forgetDevState(o.StateFile)
	ep := Endpoints{NATS: cfg.NATS.URL, Butlers: map[string]string{}, Web: map[string]string{}}
	freeDefaults(cfg, o.Out)
	if ep.NATS == "" {
		host, port, err := splitListen(cfg.NATS.Listen)
		if err != nil {
			return err
		}
		srv, err := bus.RunServer(bus.ServerOptions{Host: host, Port: port, StoreDir: cfg.NATS.StoreDir})
		if err != nil {
			return err
		}
		defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
		ep.NATS, ep.Store = srv.ClientURL(), cfg.NATS.StoreDir
	}
	nc, err := bus.Connect(ep.NATS, "herald-dev", cfg.NATS.CredsFile, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := bus.Drain(nc, bus.DrainTimeout); err != nil {
			log.Warn("stopping", "err", err)
		}
	}()
	// herald dev is its own operator: it sets up (and repairs) the whole
	// topology, as `herald setup` does for a fleet.
	if _, err := bus.Open(ctx, nc, bus.Topology{Replicas: cfg.NATS.Replicas, Repair: true, Log: log, Butlers: cfg.ButlerNames()}, time.Duration(cfg.NATS.Wait), log); err != nil {
		return err
	}

	bearers, err := devTokens(cfg)
	if err != nil {
		return err
	}
	// /healthz, /readyz and /metrics of the whole fleet on http_listen.
	proc := process.New(nc, cfg.HTTPListen, bus.ServiceProbeKey("dev"), log)
	proc.Metrics.Init(process.KnownOf(cfg, "dev", ""))
	if err := proc.Listen(); err != nil {
		return err
	}
	ep.HTTP = proc.Server.URL()
	// Each butler checks its part of the bus as it starts: a few at a time,
	// so a fleet of many is up in about the time of its slowest.
	butlers := make([]*butler.Butler, len(cfg.Butlers))
	starting, sctx := errgroup.WithContext(ctx)
	starting.SetLimit(16)
	for i, bc := range cfg.Butlers {
		starting.Go(func() (err error) {
			butlers[i], err = butler.New(sctx, butler.Options{Name: bc.Name, Config: cfg, NC: nc, Log: log, Getenv: o.Getenv, Metrics: proc.Metrics, Health: proc.Health, Store: proc.Store})
			return err
		})
	}
	if err := starting.Wait(); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return proc.Server.Serve(ctx) })
	proc.RunProbes(ctx)
	sb := process.NewRerunner("switchboard", log, func(ctx context.Context, cfg *config.Config, running func()) error {
		return switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: nc, Log: log, Metrics: proc.Metrics, Health: proc.Health, Running: running})
	})
	ms := process.NewRerunner("messenger", log, func(ctx context.Context, cfg *config.Config, running func()) error {
		return messenger.Run(ctx, messenger.Options{Config: cfg, NC: nc, Log: log, Getenv: o.Getenv, Metrics: proc.Metrics, Health: proc.Health, HTTP: proc.Server, Running: running})
	})
	g.Go(func() error { return sb.Run(ctx, cfg) })
	g.Go(func() error { return ms.Run(ctx, cfg) })
	var (
		mu      sync.Mutex
		pending = len(cfg.Butlers)
		running = map[string]*butler.Butler{}
	)
	for i, bc := range cfg.Butlers {
		running[bc.Name] = butlers[i]
		g.Go(func() error {
			return butlers[i].ServeHTTP(ctx, bc.MCPHTTP, func(url string) {
				mu.Lock()
				defer mu.Unlock()
				ep.Butlers[bc.Name] = url
				if pending--; pending == 0 {
					go func() {
						webPages(ctx, nc, cfg, started, ep.Web)
						ep.Unavailable = unavailable(nc)
						recordDevState(o, ep, log)
						printEndpoints(o.Out, cfg, ep, bearers)
						if o.Ready != nil {
							o.Ready(ep)
						}
					}()
				}
			})
		})
	}
	// A reload: the topology for added butlers, the switchboard and the
	// messenger restarted on the new file (each drains first), every
	// butler given it, added ones started, removed ones retired.
	apply := func(ctx context.Context, next *config.Config, _ []string) error {
		if _, err := bus.Open(ctx, nc, bus.Topology{Replicas: next.NATS.Replicas, Repair: true, Log: log, Butlers: next.ButlerNames()}, time.Duration(next.NATS.Wait), log); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		added := map[string]*butler.Butler{}
		for _, bc := range next.Butlers {
			if running[bc.Name] == nil {
				b, err := butler.New(ctx, butler.Options{Name: bc.Name, Config: next, NC: nc, Log: log, Getenv: o.Getenv, Metrics: proc.Metrics, Health: proc.Health, Store: proc.Store})
				if err != nil {
					return fmt.Errorf("butler %s: %w", bc.Name, err)
				}
				added[bc.Name] = b
			}
		}
		if err := sb.Apply(ctx, next); err != nil {
			return err
		}
		if err := ms.Apply(ctx, next); err != nil {
			return fmt.Errorf("%w (the switchboard already runs on the new configuration: fix the file and reload again)", err)
		}
		for _, b := range running {
			b.SetConfig(next)
		}
		for _, bc := range next.Butlers {
			b := added[bc.Name]
			if b == nil {
				continue
			}
			running[bc.Name] = b
			g.Go(func() error {
				return b.ServeHTTP(ctx, bc.MCPHTTP, func(url string) {
					log.Info("butler added", "butler", bc.Name, "mcp", url)
					if o.Out != nil {
						fmt.Fprintf(o.Out, "Claude:   claude mcp add --transport http %s %s --header \"Authorization: Bearer %s\"\n", bc.Name, url, bearerShown(&bc))
					}
				})
			})
		}
		return nil
	}
	if err := process.StartReloads(ctx, process.ReloadOptions{NC: nc, Process: "herald dev", Path: o.ConfigFile, Current: cfg, Getenv: o.Getenv, Log: log, Audit: true, Watch: true, Apply: apply,
		Prepare: func(next *config.Config) {
			if _, err := devTokens(next); err != nil {
				log.Error("reload: a butler's MCP token", "err", err)
			}
		}}); err != nil {
		return err
	}
	return g.Wait()
}

// devTokens gives every butler without a static MCP token one, kept in
// DevTokenFile (created on the first start, reused after), and returns what
// the banner shows as each butler's bearer token: the token itself for those,
// a shell expression reading it for tokens the configuration names.
func devTokens(cfg *config.Config) (map[string]string, error) {
	show := map[string]string{}
	for i := range cfg.Butlers {
		bc := &cfg.Butlers[i]
		if bc.MCPTokenEnv == "" && bc.MCPTokenFile == "" {
			path := DevTokenFile(cfg, bc.Name)
			tok, err := devToken(path)
			if err != nil {
				return nil, fmt.Errorf("butler %s: %w", bc.Name, err)
			}
			bc.MCPTokenFile = path
			show[bc.Name] = tok
			continue
		}
		show[bc.Name] = bearerShown(bc)
	}
	return show, nil
}

// bearerShown is how the banner shows a configured token: a shell
// expression that reads it.
func bearerShown(bc *config.Butler) string {
	if bc.MCPTokenEnv != "" {
		return "$" + bc.MCPTokenEnv
	}
	return "$(cat " + bc.MCPTokenFile + ")"
}

func splitListen(listen string) (string, int, error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("%w: nats.listen %q is not host:port", config.ErrInvalid, listen)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("%w: nats.listen %q has no numeric port", config.ErrInvalid, listen)
	}
	if port == 0 {
		port = -1 // nats-server's "any free port"
	}
	return host, port, nil
}

// printEndpoints prints the banner. It is the one place a token created for
// herald dev is shown (stdout, never the log): the Claude lines are meant to
// be copied whole.
func printEndpoints(w io.Writer, cfg *config.Config, ep Endpoints, bearers map[string]string) {
	if w == nil {
		return
	}
	fmt.Fprintf(w, "\nHerald dev is running.\n\n")
	fmt.Fprintf(w, "  NATS            %s", redactURL(ep.NATS))
	if ep.Store != "" {
		fmt.Fprintf(w, "   (embedded, JetStream data in %s)", ep.Store)
	}
	fmt.Fprintln(w)
	for _, b := range cfg.Butlers {
		fmt.Fprintf(w, "  butler %-8s MCP %s   (default channel %s)\n", b.Name, ep.Butlers[b.Name], b.DefaultChannel)
	}
	for _, in := range cfg.Integrations {
		state := ""
		switch {
		case in.Disabled:
			state = "   (disabled)"
		case ep.Web[in.ID] != "":
			state = "   chat page " + ep.Web[in.ID]
		case ep.Unavailable[in.ID] != "":
			state = "   CANNOT WORK: " + ep.Unavailable[in.ID]
		case in.Type == "web":
			state = "   (chat page not up: see the log)"
		}
		fmt.Fprintf(w, "  channel         %s%s\n", in.Channel(), state)
	}
	if ep.HTTP != "" {
		fmt.Fprintf(w, "  operations      %s/metrics   %s/readyz\n", ep.HTTP, ep.HTTP)
	}
	first := cfg.Butlers[0]
	fmt.Fprintf(w, "\nTry it:   bin/herald notify --butler %s \"Hello from Herald\"\n", first.Name)
	for _, b := range cfg.Butlers {
		fmt.Fprintf(w, "Claude:   claude mcp add --transport http %s %s --header \"Authorization: Bearer %s\"\n", b.Name, ep.Butlers[b.Name], bearers[b.Name])
	}
	for _, in := range cfg.Integrations {
		if page := ep.Web[in.ID]; page != "" {
			fmt.Fprintf(w, "Chat:     %s   (what you write there reaches the butler's model)\n", page)
			break
		}
	}
	fmt.Fprintf(w, "Stop:     Ctrl-C\n\n")
}

// freeDefaults moves each listen address cfg leaves at its default (NATS,
// the butlers' MCP, http_listen, the web chat) that another process holds
// to a free port, and says so on out: a second herald dev on one machine
// starts. An address the file sets is kept, and a clash with it fails at
// start naming it.
func freeDefaults(cfg *config.Config, out io.Writer) {
	move := func(what string, addr *string, def string) {
		if *addr != def {
			return
		}
		ln, err := net.Listen("tcp", def)
		if err == nil {
			ln.Close()
			return
		}
		host, _, _ := net.SplitHostPort(def)
		*addr = net.JoinHostPort(host, "0")
		if out != nil {
			fmt.Fprintf(out, "%s: %s is taken (another herald dev?); using a free port, shown below\n", what, def)
		}
	}
	if cfg.NATS.URL == "" {
		move("nats.listen", &cfg.NATS.Listen, config.DefaultNATSListen)
	}
	for i := range cfg.Butlers {
		move("butler "+cfg.Butlers[i].Name+" mcp_http", &cfg.Butlers[i].MCPHTTP, config.DefaultMCPHTTP)
	}
	cfg.HTTPListen = cfg.HTTPListenFor("dev")
	move("http_listen", &cfg.HTTPListen, config.DefaultHTTPListen)
	for i := range cfg.Integrations {
		if w, ok := cfg.Integrations[i].Settings.(*web.Config); ok && !cfg.Integrations[i].Disabled {
			move("web "+cfg.Integrations[i].ID+" listen", &w.Listen, web.DefaultListen)
		}
	}
}

// unavailable asks the messenger which integrations it could not set up,
// and why; nil if it does not answer.
func unavailable(nc *nats.Conn) map[string]string {
	msg, err := nc.Request(obs.StatusSubject(obs.ServiceMessenger), nil, 2*time.Second)
	if err != nil {
		return nil
	}
	var st messenger.Status
	if json.Unmarshal(msg.Data, &st) != nil {
		return nil
	}
	return st.Unavailable
}

// redactURL hides the password of a URL like nats://user:pass@host.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// webPages waits (briefly) for each web chat to report where it listens.
func webPages(ctx context.Context, nc *nats.Conn, cfg *config.Config, since time.Time, out map[string]string) {
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	kv, err := js.KeyValue(ctx, bus.BucketStatus)
	if err != nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, in := range cfg.Integrations {
		if in.Type != "web" || in.Disabled {
			continue
		}
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if e, err := kv.Get(ctx, in.ID); err == nil {
				var st deliver.Status
				if json.Unmarshal(e.Value(), &st) == nil && st.UpdatedAt.After(since) && st.State == deliver.StateRunning && strings.HasPrefix(st.Detail, "http") {
					out[in.ID] = st.Detail
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
