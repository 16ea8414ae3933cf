// Package herald is the `herald` command: `herald dev` runs the whole fleet in
// one process (embedded NATS, switchboard, messenger, every configured butler),
// and `herald notify` sends a notification through a butler's real MCP tool.
package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/embedded"
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
	// Unavailable are the integrations that cannot work, and why: what
	// the configuration tells (a secret the environment lacks), and what
	// the messenger's status adds.
	Unavailable map[string]string
	// HTTP is the listener of /healthz, /readyz, /metrics and the pushed
	// channels' endpoints (http_listen).
	HTTP string
}

// Dev runs the fleet until ctx is done.
func Dev(ctx context.Context, o DevOptions) error {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	f := &devFleet{o: o, cfg: o.Config, log: o.Log, started: time.Now(), running: map[string]*butler.Butler{},
		ep: Endpoints{NATS: o.Config.NATS.URL, Butlers: map[string]string{}, Web: map[string]string{}}}
	defer servePprof(o.Getenv, f.log)() // only with HERALD_PPROF=host:port (make bench PROFILE=1)
	defer forgetDevState(o.StateFile)
	fileAddrs := map[string]string{}
	for what, addr := range listeners(f.cfg) {
		fileAddrs[what] = *addr
	}
	freeDefaults(f.cfg, o.Out)
	if err := checkRuns(f.cfg); err != nil {
		return err
	}
	stop, err := f.connect(ctx)
	defer stop()
	if err != nil {
		return err
	}
	if f.bearers, err = devTokens(f.cfg); err != nil {
		return err
	}
	// /healthz, /readyz and /metrics of the whole fleet on http_listen.
	f.proc = process.New(f.nc, f.cfg.HTTPListen, bus.ServiceProbeKey("dev"), f.log)
	f.proc.Metrics.Init(process.KnownOf(f.cfg, "dev", ""))
	if err := f.proc.Listen(); err != nil {
		return err
	}
	f.ep.HTTP = f.proc.Server.URL()
	butlers, err := f.newButlers(ctx)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	f.g = g
	g.Go(func() error { return f.proc.Server.Serve(ctx) })
	f.proc.RunProbes(ctx)
	f.runServices(ctx)
	f.serveButlers(ctx, butlers)
	if err := process.StartReloads(ctx, process.ReloadOptions{NC: f.nc, Process: "herald dev", Path: o.ConfigFile, Current: f.cfg, Getenv: o.Getenv, Log: f.log, Audit: true, Watch: true, Apply: f.apply,
		Prepare: func(next *config.Config) {
			keepListeners(next, fileAddrs, f.cfg)
			if _, err := devTokens(next); err != nil {
				f.log.Error("reload: a butler's MCP token", "err", err)
			}
		}}); err != nil {
		return err
	}
	return g.Wait()
}

// checkRuns refuses a fleet whose butlers' runs cannot start here: their
// command missing, their directory not one (run: starts them here).
func checkRuns(cfg *config.Config) error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range cfg.ButlerNames() {
		if err := cfg.CheckRunHost(name, dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// devFleet is a running herald dev: the whole fleet in one process.
type devFleet struct {
	o       DevOptions
	cfg     *config.Config
	log     *slog.Logger
	started time.Time
	nc      *nats.Conn
	proc    *process.Process
	bearers map[string]string
	g       *errgroup.Group
	// sb and ms are the switchboard and the messenger, which a reload
	// restarts.
	sb, ms *process.Rerunner

	mu      sync.Mutex
	ep      Endpoints
	pending int                       // butlers not yet listening
	running map[string]*butler.Butler // by name
}

// connect starts the embedded NATS server (unless nats.url names one),
// connects to it and sets up (and repairs) the whole topology, as herald
// setup does for a fleet: herald dev is its own operator. stop undoes what
// was done, whatever failed.
func (f *devFleet) connect(ctx context.Context) (stop func(), err error) {
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if f.ep.NATS == "" {
		host, port, err := splitListen(f.cfg.NATS.Listen)
		if err != nil {
			return stop, err
		}
		srv, err := embedded.RunServer(embedded.Options{Host: host, Port: port, StoreDir: f.cfg.NATS.StoreDir, FilesMaxBytes: f.cfg.NATS.FilesMaxBytes})
		if err != nil {
			return stop, err
		}
		undo = append(undo, func() { srv.Shutdown(); srv.WaitForShutdown() })
		f.ep.NATS, f.ep.Store = srv.ClientURL(), f.cfg.NATS.StoreDir
	}
	if f.nc, err = bus.Connect(f.ep.NATS, "herald-dev", f.cfg.NATS.CredsFile, f.log); err != nil {
		return stop, err
	}
	undo = append(undo, func() {
		if err := bus.Drain(f.nc, bus.DrainTimeout); err != nil {
			f.log.Warn("stopping", "err", err)
		}
	})
	_, err = bus.Open(ctx, f.nc, bus.Topology{Replicas: f.cfg.NATS.Replicas, FilesMaxBytes: f.cfg.NATS.FilesMaxBytes, Repair: true, Log: f.log, Butlers: f.cfg.ButlerNames()}, time.Duration(f.cfg.NATS.Wait), f.log)
	return stop, err
}

// newButler is butler name of cfg, its part of the bus checked.
func (f *devFleet) newButler(ctx context.Context, cfg *config.Config, name string) (*butler.Butler, error) {
	return butler.New(ctx, butler.Options{Name: name, Config: cfg, NC: f.nc, Log: f.log, Getenv: f.o.Getenv, Metrics: f.proc.Metrics, Health: f.proc.Health, Store: f.proc.Store})
}

// newButlers makes every butler: a few at a time, so a fleet of many is up
// in about the time of its slowest.
func (f *devFleet) newButlers(ctx context.Context) ([]*butler.Butler, error) {
	butlers := make([]*butler.Butler, len(f.cfg.Butlers))
	starting, sctx := errgroup.WithContext(ctx)
	starting.SetLimit(16)
	for i, bc := range f.cfg.Butlers {
		starting.Go(func() (err error) {
			butlers[i], err = f.newButler(sctx, f.cfg, bc.Name)
			return err
		})
	}
	return butlers, starting.Wait()
}

// runServices runs the switchboard and the messenger.
func (f *devFleet) runServices(ctx context.Context) {
	f.sb = process.NewRerunner("switchboard", f.log, func(ctx context.Context, cfg *config.Config, running func()) error {
		return switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: f.nc, Log: f.log, Metrics: f.proc.Metrics, Health: f.proc.Health, Running: running})
	})
	f.ms = process.NewRerunner("messenger", f.log, func(ctx context.Context, cfg *config.Config, running func()) error {
		return messenger.Run(ctx, messenger.Options{Config: cfg, NC: f.nc, Log: f.log, Getenv: f.o.Getenv, Metrics: f.proc.Metrics, Health: f.proc.Health, HTTP: f.proc.Server, Running: running})
	})
	f.g.Go(func() error { return f.sb.Run(ctx, f.cfg) })
	f.g.Go(func() error { return f.ms.Run(ctx, f.cfg) })
}

// serveButlers serves each butler's MCP endpoint; once the last listens,
// the banner is printed.
func (f *devFleet) serveButlers(ctx context.Context, butlers []*butler.Butler) {
	f.pending = len(f.cfg.Butlers)
	for i, bc := range f.cfg.Butlers {
		f.running[bc.Name] = butlers[i]
		f.g.Go(func() error {
			return butlers[i].ServeHTTP(ctx, bc.MCPHTTP, func(url string) {
				f.mu.Lock()
				defer f.mu.Unlock()
				f.ep.Butlers[bc.Name] = url
				if f.pending--; f.pending == 0 {
					f.g.Go(func() error { f.announce(ctx); return nil })
				}
			})
		})
	}
}

// announce prints the banner and records the fleet for the other commands,
// once every butler listens.
func (f *devFleet) announce(ctx context.Context) {
	f.mu.Lock()
	ep := f.ep
	f.mu.Unlock()
	webPages(ctx, f.nc, f.cfg, f.started, ep.Web)
	ep.Unavailable = cannotWork(f.cfg, f.o.Getenv, unavailable(f.nc))
	recordDevState(f.o, ep, f.log)
	printEndpoints(f.o.Out, f.cfg, ep, f.bearers, f.o.ConfigFile)
	if f.o.Ready != nil {
		f.o.Ready(ep)
	}
}

// apply is a reload: the topology for added butlers, the switchboard and
// the messenger restarted on the new file (each drains first), every
// butler given it, added ones started, removed ones retired.
func (f *devFleet) apply(ctx context.Context, next *config.Config, _ []string) error {
	if _, err := bus.Open(ctx, f.nc, bus.Topology{Replicas: next.NATS.Replicas, FilesMaxBytes: next.NATS.FilesMaxBytes, Repair: true, Log: f.log, Butlers: next.ButlerNames()}, time.Duration(next.NATS.Wait), f.log); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	added := map[string]*butler.Butler{}
	for _, bc := range next.Butlers {
		if f.running[bc.Name] == nil {
			b, err := f.newButler(ctx, next, bc.Name)
			if err != nil {
				return fmt.Errorf("butler %s: %w", bc.Name, err)
			}
			added[bc.Name] = b
		}
	}
	if err := f.sb.Apply(ctx, next); err != nil {
		return err
	}
	if err := f.ms.Apply(ctx, next); err != nil {
		return fmt.Errorf("%w (the switchboard already runs on the new configuration: fix the file and reload again)", err)
	}
	for _, b := range f.running {
		b.SetConfig(next)
	}
	for _, bc := range next.Butlers {
		if b := added[bc.Name]; b != nil {
			f.running[bc.Name] = b
			f.serveAdded(ctx, b, bc)
		}
	}
	return nil
}

// serveAdded serves a butler a reload added, and prints its claude mcp add
// line.
func (f *devFleet) serveAdded(ctx context.Context, b *butler.Butler, bc config.Butler) {
	addr := bc.MCPHTTP
	// A default port counts from the butler's place in the file, which a
	// reload can give to a butler still running: a free port instead.
	if def := bc.MCPHTTPDefault(); def != "" && addr == def && taken(def) {
		f.log.Info("butler added: its default MCP port is taken; it listens on a free one", "butler", bc.Name, "mcp_http", def)
		addr = "127.0.0.1:0"
	}
	f.g.Go(func() error {
		return b.ServeHTTP(ctx, addr, func(url string) {
			f.log.Info("butler added", "butler", bc.Name, "mcp", url)
			if f.o.Out != nil {
				fmt.Fprintf(f.o.Out, "Claude:   claude mcp add --transport http %s %s --header \"Authorization: Bearer %s\"\n", bc.Name, url, bearerShown(&bc))
			}
		})
	})
}

// taken reports whether something listens on addr already.
func taken(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return true
	}
	ln.Close()
	return false
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
// be copied whole, and so is the Stdio line, README.md's .mcp.json recipe
// for reaching the fleet's NATS, printed when that is not where the README
// says (configFile: the file herald dev runs with, "" for none).
func printEndpoints(w io.Writer, cfg *config.Config, ep Endpoints, bearers map[string]string, configFile string) {
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
	if nats := redactURL(ep.NATS); nats != readmeNATS {
		fmt.Fprintf(w, "Stdio:    %s   (in .mcp.json)\n", stdioRecipe(first.Name, nats, ep.Store != "", configFile))
	}
	for _, in := range cfg.Integrations {
		if page := ep.Web[in.ID]; page != "" {
			fmt.Fprintf(w, "Chat:     %s   (what you write there reaches the butler's model)\n", page)
			break
		}
	}
	fmt.Fprintf(w, "Stop:     Ctrl-C\n\n")
}

// listeners are cfg's listen addresses that herald dev may choose itself
// (freeDefaults), by what they are.
func listeners(cfg *config.Config) map[string]*string {
	out := map[string]*string{"nats.listen": &cfg.NATS.Listen, "http_listen": &cfg.HTTPListen}
	for i := range cfg.Butlers {
		out["butler "+cfg.Butlers[i].Name] = &cfg.Butlers[i].MCPHTTP
	}
	for i := range cfg.Integrations {
		if w, ok := cfg.Integrations[i].Settings.(*web.Config); ok {
			out["web "+cfg.Integrations[i].ID] = &w.Listen
		}
	}
	return out
}

// keepListeners gives next, a reloaded file, the addresses herald dev
// listens on where next says what the file said at start (file): the ports
// it chose are its own, and a reload that changed none of them reports
// none changed.
func keepListeners(next *config.Config, file map[string]string, running *config.Config) {
	now := listeners(running)
	for what, addr := range listeners(next) {
		if was, ok := file[what]; ok && *addr == was && now[what] != nil {
			*addr = *now[what]
		}
	}
}

// readmeNATS is the NATS URL of README.md's .mcp.json recipe: herald
// dev's embedded server on its default port.
const readmeNATS = "nats://" + config.DefaultNATSListen

// stdioRecipe is README.md's .mcp.json for running butler over stdio,
// reaching the fleet's NATS at nats (embedded: herald dev's own server)
// and reading configFile, if herald dev runs with one. A NATS of the
// file's own is the file's to name: its URL may hold a password.
func stdioRecipe(butler, nats string, embedded bool, configFile string) string {
	type server struct {
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	env := map[string]string{}
	if embedded || configFile == "" {
		env["NATS_URL"] = nats
	}
	if configFile != "" {
		env["HERALD_CONFIG"] = configFile
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]map[string]server{"mcpServers": {"herald": {Command: "bin/butler", Args: []string{"--name", butler, "--stdio"}, Env: env}}})
	return strings.TrimSuffix(b.String(), "\n")
}

// cannotWork are the integrations of cfg that cannot work, and why: what
// the configuration tells with the environment getenv (a secret it lacks:
// config.Unworkable), which is known before the messenger has tried and so
// is the same every start, and what the messenger reported besides.
func cannotWork(cfg *config.Config, getenv config.Getenv, reported map[string]string) map[string]string {
	if getenv == nil {
		getenv = os.Getenv
	}
	out := cfg.Unworkable(getenv)
	for id, why := range reported {
		if out[id] == "" {
			out[id] = why
		}
	}
	return out
}

// freeDefaults moves each listen address cfg leaves at its default (NATS,
// the butlers' MCP, http_listen, the web chat) that another process holds
// to a free port, and says so on out: a second herald dev on one machine
// starts. An address the file sets is kept, and a clash with it fails at
// start naming it.
func freeDefaults(cfg *config.Config, out io.Writer) {
	move := func(what string, addr *string, def string) {
		if *addr != def || !taken(def) {
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
		move("butler "+cfg.Butlers[i].Name+" mcp_http", &cfg.Butlers[i].MCPHTTP, cfg.Butlers[i].MCPHTTPDefault())
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
