// Package butler is the MCP server a model drives (architecture.md §5). Every butler
// has the core `notify` tool: it builds a notify.v1 from the model's
// arguments with the butler's own identity as origin, validates it, hands it
// to the switchboard over JetStream and answers with what happened. A
// butler with a run block also starts Claude Code headless for the
// messages no connected session takes (runner.go, runindex.go, the
// approve tool in tool_approve.go; docs/runner.md).
package butler

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/route"
	"github.com/heraldhq/herald/pkg/token"
)

// Version is reported to MCP clients.
const Version = obs.Version

// MCPPath is where the streamable HTTP transport is served.
const MCPPath = "/mcp"

// Options configure a butler.
type Options struct {
	Name   string
	Config *config.Config
	NC     *nats.Conn
	Log    *slog.Logger
	// Timeout is how long notify waits for the delivery's answer before saying
	// it is queued; 0 takes the config's notify_timeout (default 30s).
	Timeout time.Duration
	// Getenv resolves the butler's mcp_token_env; nil is os.Getenv.
	Getenv config.Getenv
	// Metrics and Health are the process's. With no Health the butler keeps
	// its own (NATS and its inbox), served on its MCP listener's /readyz.
	Metrics *obs.Metrics
	Health  *obs.Health
	// Store is the process's watch of whether NATS can store, which the
	// process runs. With none the butler keeps and runs its own.
	Store *obs.StoreWatch
	// Dir is the working directory files.roots and files.inbox are
	// relative to; "" is the process's.
	Dir string
}

// HealthCheck is the name of butler name's readiness check: its background
// work runs and its inbox consumer answers.
func HealthCheck(name string) string { return "butler." + name }

// Butler is one agent's MCP server.
type Butler struct {
	name string
	// cfg is read through config(), so that SetConfig takes effect at the
	// next read.
	cfg atomic.Pointer[config.Config]
	// retired: a reload removed it from the configuration (SetConfig).
	retired atomic.Bool
	log     *slog.Logger
	nc      *nats.Conn
	client  *route.Client
	mcp     *server.MCPServer
	channel *channelSide
	access  *access
	// runner starts Claude Code for messages no session takes (run:);
	// mcpURL is where a run reaches this butler, once ServeHTTP listens.
	runner *runner
	url    atomic.Pointer[string]

	metrics *obs.Metrics
	health  *obs.Health
	store   *obs.StoreWatch
	audit   *audit.Writer
	// dir: Options.Dir, or the process's working directory at start.
	dir string
	// probes: the butler runs store's probes itself (Options.Store nil).
	probes  bool
	state   *obs.State // ready while Run runs
	lastErr obs.LastError

	// prompts are permission prompts being sent; Run stops and waits for
	// them before it returns.
	prompts     sync.WaitGroup
	promptsCtx  context.Context
	stopPrompts context.CancelFunc

	// runID is drawn at start: the identity of this process's stdio
	// session (tag).
	runID string
}

// New connects a butler to the bus and builds its MCP server.
func New(ctx context.Context, o Options) (*Butler, error) {
	if o.Config.Butler(o.Name) == nil {
		return nil, fmt.Errorf("%w: butler %q is not in the configuration", config.ErrInvalid, o.Name)
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("butler", o.Name)
	// A butler checks no stream by name: its NATS user may not look at
	// streams (that would let it list every butler's keys). It waits for NATS,
	// then for its inbox (newChannelSide), and reads its ledger records by
	// subject.
	js, err := bus.Open(ctx, o.NC, bus.Topology{Replicas: o.Config.NATS.Replicas, FilesMaxBytes: o.Config.NATS.FilesMaxBytes, Uses: &bus.ButlerUses, Log: log}, time.Duration(o.Config.NATS.Wait), log)
	if err != nil {
		return nil, err
	}
	led := ledger.New(bus.NewDirectKV(js, bus.BucketDeliveries))
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = time.Duration(o.Config.NotifyTimeout)
	}
	b := &Butler{
		name:    o.Name,
		log:     log,
		nc:      o.NC,
		client:  &route.Client{NC: o.NC, JS: js, Ledger: led, Timeout: timeout, Log: log},
		metrics: o.Metrics,
		health:  o.Health,
		state:   obs.NewState(),
		runID:   rand.Text(),
	}
	b.runner = newRunner(b)
	b.cfg.Store(o.Config)
	if b.dir = o.Dir; b.dir == "" {
		if b.dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("the working directory, which files.roots and files.inbox start from: %w", err)
		}
	}
	b.promptsCtx, b.stopPrompts = context.WithCancel(context.Background())
	if b.health == nil {
		b.health = obs.NewHealth()
		b.health.Add("nats", obs.NATSCheck(o.NC))
	}
	b.store = o.Store
	if b.store == nil {
		b.store, b.probes = obs.NewStoreWatch(o.NC, bus.ButlerProbeKey(o.Name), o.Metrics, b.health), true
	}
	b.client.Store = b.store
	b.health.Add(HealthCheck(o.Name), b.state.Check)
	if b.channel, err = newChannelSide(ctx, b, js); err != nil {
		return nil, err
	}
	// Its own auto_allowed records only (natsauth).
	b.audit = &audit.Writer{JS: js, Log: log, Butler: o.Name}
	b.health.Add(HealthCheck(o.Name), obs.All(b.state.Check, obs.ConsumerCheck(js, b.inboxConsumer())))
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	b.access = newAccess(o.Name, o.Config.Butler(o.Name), getenv, token.NewVerifier(bus.NewDirectKV(js, bus.BucketTokens), o.Name, TokenCacheFor), log)
	b.mcp = server.NewMCPServer("herald-butler-"+o.Name, Version,
		server.WithToolCapabilities(false),
		server.WithRecovery(),
		server.WithInstructions(instructions(o.Name)),
		server.WithExperimental(experimental()),
		server.WithHooks(b.hooks()),
	)
	b.mcp.AddTool(notifyTool(o.Config, o.Name), b.counted(b.notify))
	b.mcp.AddTool(sendMessageTool(o.Config, o.Name), b.counted(b.sendMessage))
	ask := askTool(o.Config, o.Name)
	alwaysLoad(&ask)
	b.mcp.AddTool(ask, b.counted(b.ask))
	b.addChannelTools()
	b.addHistoryTool()
	b.addEditTool()
	b.addFileTools()
	for _, f := range protocols {
		b.mcp.AddNotificationHandler(f.permissionRequest, b.permissionRequest(f))
	}
	return b, nil
}

// config is the butler's configuration as it stands now.
func (b *Butler) config() *config.Config { return b.cfg.Load() }

// SetConfig replaces the butler's configuration, for a reload. What is read
// as it is used follows at once: whether channel notifications are pushed
// (channels.enabled), the approvers a permission prompt goes to, what
// channel_list and channel_status report. What was built from the old one at
// start stays until a restart: the tools' descriptions, the MCP token and
// the session bounds. cfg must be valid.
//
// A cfg without this butler retires it: it keeps running on its last
// configuration, but its tools refuse new work (Retired) and nothing more of
// its inbox is pushed; its calls in flight finish, and what waits in its
// inbox stays there for when it is configured again.
func (b *Butler) SetConfig(cfg *config.Config) {
	if cfg.Butler(b.name) == nil {
		if !b.retired.Swap(true) {
			b.log.Warn("this butler was removed from the configuration: it takes no new work; stop its process (its inbox is kept)")
		}
		b.channel.poke()
		return
	}
	if b.retired.Swap(false) {
		b.log.Info("this butler is in the configuration again: it takes work")
	}
	b.cfg.Store(cfg)
	b.channel.poke()
}

// Retired reports whether a reload removed the butler (SetConfig).
func (b *Butler) Retired() bool { return b.retired.Load() }

// retiredAnswer is a retired butler's answer to a tool call.
func (b *Butler) retiredAnswer() *mcp.CallToolResult {
	return mcp.NewToolResultError("Butler \"" + b.name + "\" was removed from Herald's configuration (herald.yaml): it takes no new work, and nothing was sent. Ask the operator to add it back.")
}

// hooks are the channel side's session tracking and the refusal of MCP
// revisions the butler does not serve (ServedProtocolVersions).
func (b *Butler) hooks() *server.Hooks {
	h := b.channel.hooks()
	h.AddOnRequestInitialization(refuseUnservedRevision)
	return h
}

func instructions(name string) string {
	return "You are the butler \"" + name + "\", connected to your human through Herald.\n" +
		"Messages from your human arrive as channel notifications (<channel source=\"<this server's name>\" source_channel=\"telegram\" user=\"...\" request_id=\"...\" thread=\"...\">text</channel>): " +
		"source_channel is where it came from (telegram, email, slack, discord, web, webhook), user who wrote it, request_id which message it is, thread the conversation. " +
		"A message that came with files has attachments (each file's name, type and size) and attachment_count; download_attachment { request_id, index } saves one and answers its path (an image you also see). " +
		"A message that answers another also has reply_to_text (what that one said) and reply_to_from (who wrote it; \"you\" for your own). " +
		"Answer a message with the reply tool (request_id, message); react to it with the react tool (request_id, emoji). " +
		"Your answer goes back to the same chat, threaded; you cannot aim it elsewhere. " +
		"edit (delivery_id, message) rewrites a message you sent; ask puts a question to your human; history (request_id) shows the conversation so far.\n" +
		"To start a conversation yourself, use notify (intent send; omit channel for your default), or send_message (text, channel) if your client knows that name. " +
		"If your client does not show channel notifications, call inbox to take waiting messages. " +
		"channel_list and channel_status tell you which channels you have and whether they work.\n" +
		"If notify says a notification is queued, it is safe: Herald will deliver it, so do not send it again. " +
		"If it says not confirmed, read what it says about calling again."
}

// Run does the butler's background work, delivering inbound messages to
// connected clients, and answers discovery as herald-butler-<name> until ctx
// is done; it is ready (HealthCheck) meanwhile. ServeHTTP and ServeStdio run it.
func (b *Butler) Run(ctx context.Context) error {
	svc, err := obs.AddService(b.nc, obs.ServiceButler(b.name), Version, b.status)
	if err != nil {
		return err
	}
	svc.SetHealth(b.health)
	defer func() { _ = svc.Stop() }()
	defer b.metrics.WatchConsumers(b.channel.js, b.inboxConsumer())()
	if b.probes {
		probes, stop := context.WithCancel(ctx)
		defer stop()
		go b.store.Run(probes)
	}
	b.state.Set(nil)
	defer b.state.Set(obs.ErrStopped)
	runs := make(chan struct{})
	go func() { defer close(runs); b.runner.loop(ctx) }()
	defer func() { <-runs }()
	err = b.channel.run(ctx)
	b.stopPrompts()
	b.prompts.Wait()
	return err
}

// runInBackground runs Run until ctx ends; the channel closes when it has.
func (b *Butler) runInBackground(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := b.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			b.log.Error("butler background work stopped", "err", err)
		}
	}()
	return done
}

// MCPServer is the butler's MCP server, for in-process clients.
func (b *Butler) MCPServer() *server.MCPServer { return b.mcp }

// Handler serves the streamable HTTP transport at /mcp. Server-pushed
// notifications reach a client on its GET stream. Every request to /mcp needs
// a bearer token (the butler's static one or one minted for it), a loopback
// or allowed_hosts Host, no foreign Origin, and a body of at most
// MaxRequestBody. /healthz (alive) and /readyz (the butler's readiness
// checks, or the process's) are open and say nothing else.
//
// The MCP sessions it serves are bounded by the butler's max_sessions and
// session_idle_timeout (see sessions).
func (b *Butler) Handler() http.Handler {
	h, _ := b.handler("")
	return h
}

func (b *Butler) handler(bound string) (http.Handler, *sessions) {
	ss := newSessions(b.name, b.config().Butler(b.name), b.log)
	mcpHTTP := server.NewStreamableHTTPServer(b.mcp,
		server.WithEndpointPath(MCPPath),
		server.WithHeartbeatInterval(25*time.Second),
		// The guard checks Host wherever the butler listens, allowed_hosts
		// included; the library's own check knows only loopback names.
		server.WithDisableLocalhostProtection(true),
		server.WithStreamableHTTPProtocolVersions(ServedProtocolVersions...),
		server.WithSessionIdManagerResolver(ss),
	)
	ss.transport = mcpHTTP
	mux := http.NewServeMux()
	mux.Handle(MCPPath, b.access.guard(bound, ss.wrap(b.channel.trackStreams(mcpHTTP))))
	mux.Handle("GET /healthz", b.access.hostOnly(bound, b.health.LiveHandler()))
	mux.Handle("GET /readyz", b.access.hostOnly(bound, b.health.ReadyHandler()))
	return mux, ss
}

// ServeHTTP serves MCP over streamable HTTP on addr until ctx is done. ready,
// if set, gets the endpoint URL once the listener is open.
func (b *Butler) ServeHTTP(ctx context.Context, addr string, ready func(url string)) error {
	if err := b.access.staticErr; err != nil {
		return err
	}
	b.access.warnIfNoStaticToken()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("butler %s: listening on %s: %w", b.name, addr, err)
	}
	srv := b.httpServer(addr)
	if ready != nil {
		ready("http://" + ln.Addr().String() + MCPPath)
	}
	b.url.Store(new(runURL(ln.Addr().String())))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := b.runInBackground(ctx)
	defer func() { stop(); <-ran }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		// Open GET streams do not end by themselves; close them.
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// mcpURL is where a run reaches the butler's MCP endpoint: "" until
// ServeHTTP listens.
func (b *Butler) mcpURL() string {
	if u := b.url.Load(); u != nil {
		return *u
	}
	return ""
}

// runURL is the endpoint at listener address addr, by loopback when it
// listens on every interface.
func runURL(addr string) string {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	return "http://" + addr + MCPPath
}

// httpServer is the server ServeHTTP runs on addr.
func (b *Butler) httpServer(addr string) *http.Server {
	h, ss := b.handler(addr)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(b.log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(ss.stop)
	return srv
}

// ServeStdio speaks MCP over in/out (for .mcp.json) until ctx is done or in
// closes. Nothing else may write to out.
func (b *Butler) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, stop := context.WithCancel(ctx)
	ran := b.runInBackground(ctx)
	defer func() { stop(); <-ran }()
	s := server.NewStdioServer(b.mcp)
	s.SetErrorLogger(slog.NewLogLogger(b.log.Handler(), slog.LevelError))
	s.SetContextFunc(protocolVersionsContext)
	err := s.Listen(ctx, in, out)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
