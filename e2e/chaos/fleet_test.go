//go:build chaos

package chaos

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// Names the harness relies on: streams and buckets of architecture.md §4, and the
// butler every scenario sends through.
const (
	butlerName     = "health"
	chatID         = "12345"
	streamRoute    = "HERALD_ROUTE"
	streamDeliver  = "HERALD_DELIVER"
	streamAudit    = "HERALD_AUDIT"
	streamLedger   = "KV_herald_deliveries"
	notifyTimeout  = 5 * time.Second
	serviceStartup = 30 * time.Second
)

// natsNode is one nats-server process: a file store of its own, random
// loopback ports kept across restarts, and routes to its peers in a cluster.
type natsNode struct {
	*proc
	serverName  string
	port        int
	httpPort    int // monitoring: /healthz, as compose's health check asks it
	clusterPort int
	store       string
	confDir     string // its copies of the deploy/ configuration
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// fleet is one scenario's Herald: NATS, switchboard, messenger and butler as
// separate processes, the Telegram fake in this process, and a NATS
// connection of the harness's own for stream info and the audit log.
type fleet struct {
	t     *testing.T
	sc    *scenario
	dir   string
	nodes []*natsNode
	tg    *telegramtest.Server
	cfg   string // herald.yaml
	mcp   string // the butler's MCP endpoint
	// mcpAddr is where the butler listens (mcp_http).
	mcpAddr string
	// mcpToken is the butler's static bearer token (mcp_token_env).
	mcpToken string
	svc      map[string]*proc
	// heldTag is the message accepted while NATS was stopped (ledger-write-fails).
	heldTag atomic.Value
	nc      *nats.Conn
	js      jetstream.JetStream
	res     *result
	// out is every notify's fate, as the tally found it.
	out outcome
	// mounts are the tmpfs stores to unmount once NATS is gone.
	mounts []string
	// cut is when a node was stopped and resumed (cluster-node-stopped),
	// and how many messages had been accepted at each.
	cut struct {
		from, to               time.Time
		acceptedAt, acceptedBy int
	}

	mu sync.Mutex
	// hooks run after the load noted a message the fake accepted
	// (onAccept); struck are the messages a fault hit, in order.
	hooks  []func(telegramtest.Call)
	struck []string
}

// newFleet starts NATS (one server, or three in a cluster) and the Telegram
// fake and writes herald.yaml; startServices starts the rest.
func newFleet(t *testing.T, sc *scenario, res *result, root string) *fleet {
	t.Helper()
	dir := filepath.Join(root, sc.name)
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, sc: sc, dir: dir, svc: map[string]*proc{}, res: res, mcpToken: rand.Text()}
	f.tg = telegramtest.NewServer(t)
	// Registered after the fake's, so it runs first: the processes die
	// before the fake closes under them.
	t.Cleanup(f.cleanup)

	size := 1
	if sc.cluster {
		size = 3
	}
	for i := range size {
		f.nodes = append(f.nodes, f.newNode(i+1))
	}
	if sc.storeSize != "" {
		f.mountStore(f.nodes[0], sc.storeSize)
	}
	f.writeNodeConfigs()
	for _, n := range f.nodes {
		if err := n.start(20 * time.Second); err != nil {
			f.fatalf("%v", err)
		}
	}
	f.waitHealthz(30 * time.Second)
	nc, err := nats.Connect(f.natsURL(), nats.Name("chaos-harness"), nats.MaxReconnects(-1),
		nats.ReconnectWait(200*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		f.fatalf("harness connection: %v", err)
	}
	f.nc = nc
	if f.js, err = jetstream.New(nc); err != nil {
		f.fatalf("%v", err)
	}
	f.waitJetStream(30 * time.Second)
	f.writeConfig()
	return f
}

func (f *fleet) newNode(i int) *natsNode {
	var ports [3]int
	for j := range ports {
		p, err := freePort()
		if err != nil {
			f.fatalf("%v", err)
		}
		ports[j] = p
	}
	name := fmt.Sprintf("nats-%d", i)
	n := &natsNode{
		// compose.cluster.yaml's names; nats.conf names a single node herald-nats-1.
		serverName: fmt.Sprintf("herald-nats-%d", i),
		port:       ports[0], httpPort: ports[1], clusterPort: ports[2],
		store: filepath.Join(f.dir, name), confDir: filepath.Join(f.dir, name+".conf.d"),
	}
	conf := "nats.conf"
	if f.sc.cluster {
		conf = "nats-cluster.conf"
	}
	n.proc = &proc{
		name: name, path: f.binary("nats-server"), args: []string{"-c", filepath.Join(n.confDir, conf)},
		env:    []string{"HERALD_NATS_SERVER_NAME=" + n.serverName},
		logDir: filepath.Join(f.dir, "logs"), ready: "Server is ready",
	}
	return n
}

// deployDir holds the compose fleet's files. The servers run from its
// nats.conf and, in a cluster, nats-cluster.conf, as compose.yaml and
// compose.cluster.yaml run them, so a setting that breaks Herald there
// breaks a scenario here.
const deployDir = "../../deploy"

// writeNodeConfigs gives each server its copy of deploy/nats.conf (and
// deploy/nats-cluster.conf, which includes it) with only the addresses
// changed: the container's listeners become loopback ports, /data the
// node's store in the fleet's directory, and the routes to the compose
// services nats, nats-2 and nats-3 routes to the three nodes here. A line
// the rewrite expects and does not find fails the scenario: the deploy file
// changed, and the harness must learn it.
func (f *fleet) writeNodeConfigs() {
	for _, n := range f.nodes {
		if err := os.MkdirAll(n.confDir, 0o755); err != nil {
			f.fatalf("%v", err)
		}
		f.rewriteDeployConf("nats.conf", n.confDir, map[string]string{
			"listen: 0.0.0.0:4222": fmt.Sprintf("listen: 127.0.0.1:%d", n.port),
			"http_port: 8222":      fmt.Sprintf("http: \"127.0.0.1:%d\"", n.httpPort),
			"store_dir: /data":     fmt.Sprintf("store_dir: %q", n.store),
		}, nil)
		if !f.sc.cluster {
			continue
		}
		var routes []string
		for _, peer := range f.nodes {
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", peer.clusterPort))
		}
		f.rewriteDeployConf("nats-cluster.conf", n.confDir, map[string]string{
			"listen: 0.0.0.0:6222": fmt.Sprintf("listen: 127.0.0.1:%d", n.clusterPort),
		}, routes)
	}
}

// rewriteDeployConf copies deploy/<name> into dir, replacing each line in
// lines (compared without indentation; each must occur exactly once) and the
// route lines ("nats-route://...") in order by routes, which must be as many.
func (f *fleet) rewriteDeployConf(name, dir string, lines map[string]string, routes []string) {
	b, err := os.ReadFile(filepath.Join(deployDir, name))
	if err != nil {
		f.fatalf("the deploy configuration the servers run from: %v", err)
	}
	seen := map[string]int{}
	var out []string
	r := 0
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if repl, ok := lines[trimmed]; ok {
			seen[trimmed]++
			line = indent + repl
		} else if routes != nil && strings.HasPrefix(trimmed, "nats-route://") {
			if r < len(routes) {
				line = indent + routes[r]
			}
			r++
		}
		out = append(out, line)
	}
	for want := range lines {
		if seen[want] != 1 {
			f.fatalf("deploy/%s has the line %q %d times, the harness rewrites it for loopback and wants it once", name, want, seen[want])
		}
	}
	if r != len(routes) {
		f.fatalf("deploy/%s lists %d routes, the harness has %d servers", name, r, len(routes))
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(out, "\n")), 0o644); err != nil {
		f.fatalf("%v", err)
	}
}

// waitHealthz waits until every server's /healthz answers 200, the health
// check compose waits for before `herald setup` runs: in a cluster, a meta
// leader known and every node current with it.
func (f *fleet) waitHealthz(within time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	c := &http.Client{Timeout: 2 * time.Second}
	for _, n := range f.nodes {
		url := fmt.Sprintf("http://127.0.0.1:%d/healthz", n.httpPort)
		for {
			resp, err := c.Get(url)
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = fmt.Errorf("%s", resp.Status)
			}
			if time.Now().After(deadline) {
				f.fatalf("%s: %s not healthy after %s: %v", n.name, url, within, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// natsURL lists every server, comma-separated, as NATS_URL takes it.
func (f *fleet) natsURL() string {
	var urls []string
	for _, n := range f.nodes {
		urls = append(urls, n.url())
	}
	return strings.Join(urls, ",")
}

// waitJetStream waits until JetStream answers (a cluster has elected its
// meta leader).
func (f *fleet) waitJetStream(within time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := f.js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			f.fatalf("JetStream not available after %s: %v", within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeConfig writes herald.yaml. Horizons are shortened so a scenario takes
// seconds: notify_timeout, delivery.retry_for, and rate_limit_out lifting
// Telegram's 1/s per-chat limit (per bot stays Telegram's 30/s) so one chat
// can take a burst; the butler wants a bearer token (mcp_token_env).
// CHAOS_LEGACY_CONFIG=1 leaves out the keys of the reliability and security
// work (delivery, on_uncertain, rate_limit_out, mcp_token_env), for code
// that does not know them yet.
func (f *fleet) writeConfig() {
	port, err := freePort()
	if err != nil {
		f.fatalf("%v", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	f.mcpAddr, f.mcp = addr, "http://"+addr+"/mcp"
	replicas := len(f.nodes)
	var b strings.Builder
	fmt.Fprintf(&b, "nats: { replicas: %d }\n", replicas)
	fmt.Fprintf(&b, "default_butler: %s\n", butlerName)
	fmt.Fprintf(&b, "notify_timeout: %s\n", notifyTimeout)
	if !legacyConfig() {
		fmt.Fprintf(&b, "delivery: { retry_for: %s }\n", f.sc.retryFor)
	}
	fmt.Fprintf(&b, "butlers:\n  - { name: %s, default_channel: telegram, mcp_http: %q", butlerName, addr)
	if !legacyConfig() {
		b.WriteString(", mcp_token_env: CHAOS_MCP_TOKEN")
	}
	b.WriteString(" }\n")
	b.WriteString("integrations:\n  - id: tg_main\n    type: telegram\n    token_env: TG_TOKEN\n")
	fmt.Fprintf(&b, "    default_chat: %q\n    grants: all\n", chatID)
	if !legacyConfig() {
		fmt.Fprintf(&b, "    on_uncertain: %s\n", f.sc.onUncertain)
		b.WriteString("    rate_limit_out: { per_chat: 30/s, per_bot: 30/s }\n")
	}
	f.cfg = filepath.Join(f.dir, "herald.yaml")
	if err := os.WriteFile(f.cfg, []byte(b.String()), 0o644); err != nil {
		f.fatalf("%v", err)
	}
}

// legacyConfig: CHAOS_LEGACY_CONFIG=1 drops the keys the services may not
// know yet (and the butler's bearer token, mcp_token_env).
func legacyConfig() bool { return os.Getenv("CHAOS_LEGACY_CONFIG") == "1" }

// binary is the path of a binary in HERALD_BIN (default ../../bin).
func (f *fleet) binary(name string) string {
	dir := os.Getenv("HERALD_BIN")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		f.fatalf("%v", err)
	}
	if _, err := os.Stat(p); err != nil {
		f.fatalf("%s: %v; build the binaries first (make chaos does), or set HERALD_BIN", p, err)
	}
	return p
}

// setup runs herald setup with the config file cfg.
func (f *fleet) setup(cfg string) {
	f.t.Helper()
	setup := exec.Command(f.binary("herald"), "setup", "--config", cfg)
	setup.Env = append(os.Environ(), "HERALD_CONFIG="+cfg, "NATS_URL="+f.natsURL())
	if out, err := setup.CombinedOutput(); err != nil {
		f.fatalf("herald setup: %v\n%s", err, out)
	}
}

// checkReplicas fails unless every stream, the buckets' included, has n
// replicas.
func (f *fleet) checkReplicas(n int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := f.js.StreamNames(ctx)
	count := 0
	for name := range names.Name() {
		s, err := f.js.Stream(ctx, name)
		if err != nil {
			f.fatalf("stream %s: %v", name, err)
		}
		if r := s.CachedInfo().Config.Replicas; r != n {
			f.fatalf("stream %s has %d replicas after herald setup with replicas %d", name, r, n)
		}
		count++
	}
	if err := names.Err(); err != nil {
		f.fatalf("listing streams: %v", err)
	}
	f.t.Logf("all %d streams and buckets have %d replicas", count, n)
}

// startServices starts switchboard, messenger and the butler, each as its
// own process, and waits until the butler serves MCP.
func (f *fleet) startServices() {
	f.t.Helper()
	// As an operator does: herald setup makes the topology, then the
	// services start and only check it. On a cluster, as an operator who
	// outgrew one node does: setup ran once with replicas 1, and runs again
	// with replicas 3, which must move every stream and bucket to 3.
	if len(f.nodes) > 1 && !legacyConfig() {
		one := filepath.Join(f.dir, "herald.one-node.yaml")
		b, err := os.ReadFile(f.cfg)
		if err != nil {
			f.fatalf("%v", err)
		}
		if err := os.WriteFile(one, []byte(strings.Replace(string(b), fmt.Sprintf("replicas: %d", len(f.nodes)), "replicas: 1", 1)), 0o644); err != nil {
			f.fatalf("%v", err)
		}
		f.setup(one)
	}
	f.setup(f.cfg)
	if len(f.nodes) > 1 && !legacyConfig() {
		f.checkReplicas(len(f.nodes))
	}
	for _, s := range []struct{ name, ready string }{
		{"switchboard", "switchboard running"},
		{"messenger", "messenger running"},
		{"butler", "MCP endpoint"},
	} {
		httpPort, err := freePort()
		if err != nil {
			f.fatalf("%v", err)
		}
		args := []string{"--config", f.cfg}
		if s.name == "butler" {
			args = append(args, "--name", butlerName)
		}
		httpAddr := fmt.Sprintf("127.0.0.1:%d", httpPort)
		p := &proc{
			name: s.name, path: f.binary(s.name), args: args, logDir: filepath.Join(f.dir, "logs"), ready: s.ready, httpAddr: httpAddr,
			env: []string{
				"HERALD_CONFIG=" + f.cfg,
				"NATS_URL=" + f.natsURL(),
				"TELEGRAM_API_URL=" + f.tg.URL(),
				"TG_TOKEN=" + f.tg.Token(),
				"CHAOS_MCP_TOKEN=" + f.mcpToken,
				// Each service's own health listener, where the binary has one.
				"HERALD_HTTP_LISTEN=" + httpAddr,
			},
		}
		f.svc[s.name] = p
		if err := f.restart(p); err != nil {
			f.fatalf("%v", err)
		}
	}
	if err := waitTCP(f.mcpAddr, 10*time.Second); err != nil {
		f.fatalf("butler: %v", err)
	}
}

// restart starts p (again); a process that runs but did not log its ready
// line in time is noted and used anyway.
func (f *fleet) restart(p *proc) error {
	err := p.start(serviceStartup)
	if errors.Is(err, errNotReady) {
		f.note("%v", err)
		return nil
	}
	return err
}

// kill9 kills a service or NATS node with SIGKILL.
func (f *fleet) kill9(p *proc) error {
	if err := p.kill9(); err != nil {
		return err
	}
	f.note("kill -9 %s at %d accepted", p.name, f.accepted())
	return nil
}

// leaders returns the server name leading each stream.
func (f *fleet) leaders(streams ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range streams {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		s, err := f.js.Stream(ctx, name) // $JS.API.STREAM.INFO.<name>
		cancel()
		if err != nil {
			return nil, fmt.Errorf("stream info %s: %w", name, err)
		}
		info := s.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return nil, fmt.Errorf("stream %s has no leader now", name)
		}
		out[name] = info.Cluster.Leader
	}
	return out, nil
}

// workPending is how many messages wait in work-queue streams (a route, a
// delivery, a result not yet acked), and where ("HERALD_ROUTE 3"); ok is
// false if NATS did not say.
func (f *fleet) workPending() (n uint64, where string, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l := f.js.ListStreams(ctx)
	var streams []string
	for info := range l.Info() {
		if info.Config.Retention == jetstream.WorkQueuePolicy && info.State.Msgs > 0 {
			n += info.State.Msgs
			streams = append(streams, fmt.Sprintf("%s %d", info.Config.Name, info.State.Msgs))
		}
	}
	slices.Sort(streams)
	return n, strings.Join(streams, ", "), l.Err() == nil
}

// nodeOf is the server the client connection named conn is on, as the
// servers' monitoring (/connz) lists their clients.
func (f *fleet) nodeOf(conn string) (*natsNode, error) {
	for _, n := range f.nodes {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/connz?limit=4096", n.httpPort))
		if err != nil {
			return nil, fmt.Errorf("%s /connz: %w", n.name, err)
		}
		var connz struct {
			Connections []struct {
				Name string `json:"name"`
			} `json:"connections"`
		}
		err = json.NewDecoder(resp.Body).Decode(&connz)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s /connz: %w", n.name, err)
		}
		for _, c := range connz.Connections {
			if c.Name == conn {
				return n, nil
			}
		}
	}
	return nil, fmt.Errorf("no server lists a connection named %s", conn)
}

// stopNATS is SIGSTOP (or SIGCONT) of every NATS server.
func (f *fleet) pauseNATS(pause bool) error {
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	for _, n := range f.nodes {
		if err := n.signal(sig); err != nil {
			return err
		}
	}
	return nil
}

// cleanup kills every process: services first, then NATS.
func (f *fleet) cleanup() {
	for _, p := range f.svc {
		p.cleanup()
	}
	if f.nc != nil {
		f.nc.Close()
	}
	for _, n := range f.nodes {
		n.cleanup()
	}
	for _, dir := range f.mounts {
		f.unmount(dir)
	}
	if f.t.Failed() {
		f.t.Logf("logs of %s: %s", f.sc.name, filepath.Join(f.dir, "logs"))
	}
}

// onAccept adds fn to what runs each time the fake accepts a sendMessage,
// after the load noted it: faults compose with the harness's own hook
// instead of replacing it.
func (f *fleet) onAccept(fn func(telegramtest.Call)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hooks = append(f.hooks, fn)
}

// accept runs the hooks onAccept added.
func (f *fleet) accept(c telegramtest.Call) {
	f.mu.Lock()
	hooks := slices.Clone(f.hooks)
	f.mu.Unlock()
	for _, fn := range hooks {
		fn(c)
	}
}

// strike records the message a fault hit.
func (f *fleet) strike(text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.struck = append(f.struck, text)
}

// struckTexts are the messages a fault hit, in order.
func (f *fleet) struckTexts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.struck)
}

// note logs something that happened, as evidence for the scenario's numbers.
func (f *fleet) note(format string, a ...any) {
	f.t.Logf(format, a...)
}

// fatalf ends the scenario: it could not run as designed.
func (f *fleet) fatalf(format string, a ...any) {
	f.t.Helper()
	msg := fmt.Sprintf(format, a...)
	f.res.setAborted(msg)
	f.t.Fatal(msg)
}

// writeCalls writes every call the fake received to telegram-calls.tsv in
// the scenario's directory: the timeline behind the scenario's numbers.
func (f *fleet) writeCalls() {
	calls := f.tg.Calls("")
	if len(calls) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("arrived_ms\tanswered_ms\tmethod\tcode\tretry_after\tchat_id\ttext\n")
	t0 := calls[0].Arrived
	ms := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(t.Sub(t0).Microseconds())/1000)
	}
	for _, c := range calls {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", ms(c.Arrived), ms(c.Answered), c.Method, c.ErrorCode, c.RetryAfter, c.Params["chat_id"], firstLine(c.Params["text"]))
	}
	if err := os.WriteFile(filepath.Join(f.dir, "telegram-calls.tsv"), []byte(b.String()), 0o644); err != nil {
		f.t.Log(err)
	}
}

// accepted is how many sendMessage calls the fake has accepted so far.
func (f *fleet) accepted() int {
	n := 0
	for _, c := range f.tg.Calls("sendMessage") {
		if c.OK() {
			n++
		}
	}
	return n
}

// noteStuck notes what still waits in a work queue once the load settled:
// which notifies, what their callers were told and where they are, and
// how far the stream's consumers got.
func (f *fleet) noteStuck(l *load) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	streams := f.js.ListStreams(ctx)
	for info := range streams.Info() {
		if info.Config.Retention != jetstream.WorkQueuePolicy || info.State.Msgs == 0 {
			continue
		}
		s, err := f.js.Stream(ctx, info.Config.Name)
		if err != nil {
			f.note("still in %s: %d messages (%v)", info.Config.Name, info.State.Msgs, err)
			continue
		}
		var msgs []string
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && len(msgs) < 5; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				continue // acked and gone
			}
			desc := fmt.Sprintf("seq %d on %s", seq, m.Subject)
			if i := l.index(string(m.Data)); i >= 0 {
				desc += fmt.Sprintf(": #%04d, answered %s, at Telegram %d time(s)", i, l.answers[i].kind, f.out.fates[i].copies)
			}
			msgs = append(msgs, desc)
		}
		var consumers []string
		cons := s.ListConsumers(ctx)
		for c := range cons.Info() {
			consumers = append(consumers, fmt.Sprintf("%s delivered %d, ack floor %d, pending %d, ack pending %d, redelivered %d",
				c.Name, c.Delivered.Stream, c.AckFloor.Stream, c.NumPending, c.NumAckPending, c.NumRedelivered))
		}
		f.note("still in %s: %d messages (%s); consumers: %s", info.Config.Name, info.State.Msgs, strings.Join(msgs, "; "), strings.Join(consumers, "; "))
	}
}
