package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/pkg/route"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/pkg/token"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/email/smtptest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
	"github.com/heraldhq/herald/services/switchboard"
	"github.com/heraldhq/herald/services/switchboard/core"
)

const chatID = "12345"

// fleet is a whole Herald over a real embedded NATS server, with the
// third-party services faked at their wire protocols: Telegram's Bot API over
// HTTP and an SMTP server.
type fleet struct {
	t    *testing.T
	bus  *bustest.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	cfg  *config.Config
	env  map[string]string
	tg   *telegramtest.Server
	smtp *smtptest.Server
	logs *testkit.Buffer // everything the services logged, JSON lines
	// butlerProc is the butler process startProcesses started.
	butlerProc *serviceProc

	mu       sync.Mutex
	services map[string]func() // running service -> stop (waits until stopped)
	butlers  map[string]*butler.Butler
	timeout  time.Duration
	// dir is the in-process butlers' working directory (files.inbox).
	dir string
}

// newFleet starts the bus and the fakes and writes the configuration; the
// services start with start(...).
func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{t: t, bus: bustest.RunServer(t), logs: &testkit.Buffer{}, services: map[string]func(){}, butlers: map[string]*butler.Butler{}, timeout: 20 * time.Second, dir: t.TempDir()}
	f.nc, f.js = f.bus.Connect()
	f.tg = telegramtest.NewServer(t)
	f.smtp = smtptest.NewServer(t, smtptest.WithAuth("herald", "s3cret"), smtptest.WithSTARTTLS())
	f.env = map[string]string{
		"TG_TOKEN":         f.tg.Token(),
		"TELEGRAM_API_URL": f.tg.URL(),
		"SMTP_URL":         f.smtp.URL(),
	}
	yaml := fmt.Sprintf(`
default_butler: health
butlers:
  - { name: health, default_channel: telegram }
  - { name: finance, default_channel: email }
integrations:
  - id: tg_main
    type: telegram
    token_env: TG_TOKEN
    default_chat: %q
    grants: all
    inbound: { dm_policy: pairing, allow_from: [%q], approvers: [%q] }
    # Bursts of tests go to one chat; TestTelegramLimits turns them back on.
    rate_limit_out: { disabled: true }
  - id: mail
    type: email
    smtp_url_env: SMTP_URL
    from: herald@example.com
    default_to: me@example.com
    ca_file: %q
    grants: [health, finance]
    # The tests' mail comes "through" mx.example.com, whose verdict is trusted.
    inbound: { listen: 127.0.0.1:0, domains: [example.com], allow_from: [alice@example.com], trusted_relays: [mx.example.com] }
  - { id: web, type: web, listen: 127.0.0.1:0, grants: all, inbound: { allow_from: ["*"] } }
  - { id: audit_log, type: log, grants: all }
  - { id: tg_broken, type: telegram, token_env: UNSET_TOKEN_VARIABLE, default_chat: %q, grants: [health] }
bindings:
  - { integration: mail, butler: finance }
`, chatID, chatID, chatID, f.smtp.WriteCertFile(t), chatID)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ApplyEnv(f.getenv)
	cfg.NATS.URL = f.bus.URL()
	// Every MCP HTTP request needs a bearer token: the butlers take this one.
	f.env["HERALD_E2E_MCP_TOKEN"] = token.NewStatic()
	for i := range cfg.Butlers {
		cfg.Butlers[i].MCPTokenEnv = "HERALD_E2E_MCP_TOKEN"
	}
	f.cfg = cfg
	t.Cleanup(f.stopAll)
	return f
}

func (f *fleet) getenv(k string) string { return f.env[k] }

// bearer is the Authorization header of the fleet's MCP clients.
func (f *fleet) bearer() transport.StreamableHTTPCOption {
	return transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + f.env["HERALD_E2E_MCP_TOKEN"]})
}

func (f *fleet) logger() *slog.Logger {
	return slog.New(obs.TraceLog(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// start runs services ("switchboard", "messenger") until stopped.
func (f *fleet) start(services ...string) {
	f.t.Helper()
	for _, s := range services {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		switch s {
		case "switchboard":
			go func() { done <- switchboard.Run(ctx, switchboard.Options{Config: f.cfg, NC: f.nc, Log: f.logger()}) }()
		case "messenger":
			go func() {
				done <- messenger.Run(ctx, messenger.Options{Config: f.cfg, NC: f.nc, Log: f.logger(), Getenv: f.getenv})
			}()
		default:
			f.t.Fatalf("unknown service %s", s)
		}
		f.mu.Lock()
		f.services[s] = func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				f.t.Errorf("%s: %v", s, err)
			}
		}
		f.mu.Unlock()
	}
	f.waitConsumers(services...)
}

// waitConsumers waits until the services' durable consumers exist, so a test
// does not race their start.
func (f *fleet) waitConsumers(services ...string) {
	f.t.Helper()
	for _, s := range services {
		stream, durable := bus.StreamRoute, bus.ConsumerSwitchboard
		if s == "messenger" {
			stream, durable = bus.StreamDeliver, bus.ConsumerMessenger
		}
		testkit.Eventually(f.t, 10*time.Second, func() bool {
			_, err := f.js.Consumer(context.Background(), stream, durable)
			return err == nil
		}, "consumer "+durable)
	}
}

// stop stops a service and waits until it has drained.
func (f *fleet) stop(service string) {
	f.mu.Lock()
	stop := f.services[service]
	delete(f.services, service)
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (f *fleet) stopAll() {
	for _, s := range []string{"switchboard", "messenger"} {
		f.stop(s)
	}
}

// butler returns the named butler, connected to the bus.
func (f *fleet) butler(name string) *butler.Butler {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if b := f.butlers[name]; b != nil {
		return b
	}
	b, err := butler.New(context.Background(), butler.Options{Name: name, Config: f.cfg, NC: f.nc, Log: f.logger(), Timeout: f.timeout, Getenv: f.getenv, Dir: f.dir})
	if err != nil {
		f.t.Fatal(err)
	}
	f.butlers[name] = b
	return b
}

// mcp connects an MCP client to the butler over streamable HTTP, speaking
// protocolVersion ("" for the library's latest).
func (f *fleet) mcp(name, protocolVersion string) *client.Client {
	f.t.Helper()
	srv := httptest.NewServer(f.butler(name).Handler())
	f.t.Cleanup(srv.Close)
	return f.connect(srv.URL+butler.MCPPath, protocolVersion)
}

// connect opens an MCP session on url with the fleet's bearer token,
// speaking protocolVersion ("" for the library's latest).
func (f *fleet) connect(url, protocolVersion string) *client.Client {
	f.t.Helper()
	c, err := client.NewStreamableHttpClient(url, f.bearer())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = c.Close() })
	ctx := f.t.Context()
	if err := c.Start(ctx); err != nil {
		f.t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	if protocolVersion == "" {
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	}
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		f.t.Fatalf("initialize (%s): %v", protocolVersion, err)
	}
	if protocolVersion != "" && res.ProtocolVersion != protocolVersion {
		f.t.Fatalf("negotiated protocol %s, want %s", res.ProtocolVersion, protocolVersion)
	}
	return c
}

// notify calls the butler's notify tool through a fresh MCP client.
func (f *fleet) notify(name string, args map[string]any) *mcp.CallToolResult {
	f.t.Helper()
	return callNotify(f.t, f.mcp(name, ""), args)
}

func callNotify(t *testing.T, c *client.Client, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = "notify"
	req.Params.Arguments = args
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("notify: %v", err)
	}
	return res
}

// given records an inbound message as routed to butler, as the switchboard
// does when it passes one on, and returns its request_context as the model
// is given it: replies and reactions may answer only such messages.
func (f *fleet) given(butler, integration, channel, endpoint, sender, thread string) map[string]any {
	f.t.Helper()
	in := envelope.NewIngress(integration, channel, endpoint, sender, thread, "a message", "given:"+envelope.NewRequestID(), nil)
	kv, err := f.js.KeyValue(f.t.Context(), bus.BucketRequests)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := core.RecordRouted(f.t.Context(), kv, butler, in); err != nil {
		f.t.Fatal(err)
	}
	rc := in.RequestContext
	return map[string]any{"request_id": rc.RequestID, "source_channel": rc.SourceChannel, "source_endpoint_identity": rc.SourceEndpointIdentity,
		"source_sender_identity": rc.SourceSenderIdentity, "source_thread_identity": rc.SourceThreadIdentity}
}

// routeClient is what a butler uses under its tool, for tests that publish
// routes directly.
func (f *fleet) routeClient() *route.Client {
	led, err := ledger.Open(context.Background(), f.js)
	if err != nil {
		f.t.Fatal(err)
	}
	return &route.Client{NC: f.nc, JS: f.js, Ledger: led, Timeout: f.timeout}
}

// publishRaw publishes data on herald.route.<butler> as a misbehaving butler
// might, and returns the answer on the reply subject of requestID.
func (f *fleet) publishRaw(butler, requestID string, data []byte) *envelope.RouteResponse {
	f.t.Helper()
	sub, err := f.nc.SubscribeSync(bus.ReplySubject(butler, requestID))
	if err != nil {
		f.t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if _, err := f.js.Publish(f.t.Context(), bus.RouteSubject(butler), data); err != nil {
		f.t.Fatal(err)
	}
	m, err := sub.NextMsg(f.timeout)
	if err != nil {
		f.t.Fatalf("no answer to a raw publish on %s: %v", bus.RouteSubject(butler), err)
	}
	_ = m.Respond(nil) // taken, as a butler confirms
	var resp envelope.RouteResponse
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		f.t.Fatal(err)
	}
	return &resp
}

// auditN returns the audit records of kind once there are at least n (or
// after 5s, whatever there are then): services publish them without waiting
// for JetStream, so a record is stored a moment after its message is handled.
// A test that wants exactly n checks the length itself.
func (f *fleet) auditN(kind string, n int) []map[string]any {
	f.t.Helper()
	var recs []map[string]any
	testkit.Poll(5*time.Second, testkit.Interval, func() bool { recs = f.audit(kind); return len(recs) >= n })
	return recs
}

// audit returns every audit record written so far.
func (f *fleet) audit(kind string) []map[string]any {
	f.t.Helper()
	return streamJSON(f.t, f.js, bus.StreamAudit, bus.AuditSubject(kind, ">"))
}

func streamJSON(t *testing.T, js jetstream.JetStream, stream, subject string) []map[string]any {
	t.Helper()
	ctx := t.Context()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for range info.NumPending {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// An audit message may hold several records, one per line; the
		// other streams' messages are one JSON document each.
		for _, line := range audit.Lines(m.Data()) {
			var rec map[string]any
			_ = json.Unmarshal(line, &rec)
			out = append(out, rec)
		}
	}
	return out
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// saysInStructured fails unless the tool's structured content carries its
// text as "summary": Claude Code gives the model the structured content in
// place of the text, so the sentence (queued, do not resend; possibly twice;
// retrying will not help) must be there too.
func saysInStructured(t *testing.T, res *mcp.CallToolResult) {
	t.Helper()
	got := structured[struct {
		Summary string `json:"summary"`
	}](t, res)
	if got.Summary == "" || got.Summary != text(res) {
		t.Fatalf("structured content's summary %q is not the answer's text %q", got.Summary, text(res))
	}
}

// structured decodes the tool's structured content.
func structured[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var v T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return v
}

// quiet is a logger for benchmarks: warnings and errors only.
func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// statusDetail waits until integration id's receiver reports running, and
// returns its detail (the web page's URL, the SMTP listener's address).
func (f *fleet) statusDetail(id string) string {
	f.t.Helper()
	kv, err := f.js.KeyValue(context.Background(), bus.BucketStatus)
	if err != nil {
		f.t.Fatal(err)
	}
	var st deliver.Status
	testkit.Eventually(f.t, 15*time.Second, func() bool {
		e, err := kv.Get(context.Background(), id)
		return err == nil && json.Unmarshal(e.Value(), &st) == nil && st.State == deliver.StateRunning
	}, "the receiver of "+id)
	return st.Detail
}

// listen connects to the butler as Claude Code does, ready for channel
// notifications, with the butler's background work running.
func (f *fleet) listen(name string) *butlertest.Client {
	f.t.Helper()
	c, _ := f.listenAt(name)
	return c
}

// listenAt is listen, and the MCP endpoint's URL.
func (f *fleet) listenAt(name string) (*butlertest.Client, string) {
	f.t.Helper()
	url := f.serveHTTP(name)
	return butlertest.Connect(f.t, url, "2025-06-18", f.bearer()), url
}

// serveHTTP serves butler name's MCP endpoint with its background work
// running (once, however many clients connect) and returns the URL.
func (f *fleet) serveHTTP(name string) string {
	f.t.Helper()
	srv := httptest.NewServer(f.butler(name).Handler())
	f.t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = f.butler(name).Run(ctx); close(done) }()
	f.t.Cleanup(func() { cancel(); <-done })
	return srv.URL + butler.MCPPath
}

// endSession ends MCP session id at url with a DELETE, as a client does
// when it quits (mcp-go's client sends its DELETE without the bearer token).
func (f *fleet) endSession(url, id string) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), http.MethodDelete, url, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Authorization", "Bearer "+f.env["HERALD_E2E_MCP_TOKEN"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		f.t.Fatalf("ending the session: %v %v", err, resp)
	}
	resp.Body.Close()
}

func meta(n map[string]any) map[string]any {
	m, _ := n["meta"].(map[string]any)
	return m
}
