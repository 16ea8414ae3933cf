package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/natsauth"
	"github.com/heraldhq/herald/pkg/route"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/switchboard"
	"github.com/heraldhq/herald/services/switchboard/core"
)

// secureNATS is a real nats-server running the authorization `herald
// nats-auth` prints for cfg, with each user's password in the environment.
type secureNATS struct {
	t   *testing.T
	url string
	pw  map[string]string
}

func runSecureNATS(t *testing.T, cfg *config.Config) *secureNATS {
	t.Helper()
	return runSecureNATSWith(t, cfg, natsauth.Render(cfg))
}

// runSecureNATSWith runs nats-server with the authorization conf (as
// herald nats-auth prints it) for cfg's users.
func runSecureNATSWith(t *testing.T, cfg *config.Config, conf []byte) *secureNATS {
	t.Helper()
	dir := t.TempDir()
	base := fmt.Sprintf("listen: 127.0.0.1:-1\njetstream { store_dir: %q }\n", filepath.Join(dir, "js"))
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nats-secure.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &secureNATS{t: t, pw: map[string]string{}}
	for _, u := range natsauth.Users(cfg) {
		s.pw[u.Name] = "pw-" + strings.ReplaceAll(u.Name, "-", "")
		t.Setenv(u.PasswordEnv, s.pw[u.Name])
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the generated configuration does not load: %v", err)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	s.url = srv.ClientURL()
	return s
}

// runFleet makes the topology as the setup user, as herald setup does, and
// runs the switchboard and the messenger under their own users.
func (s *secureNATS) runFleet(cfg *config.Config) {
	s.runFleetEnv(cfg, func(string) string { return "" })
}

// runFleetEnv is runFleet with the messenger's environment (its channels'
// secrets) from getenv.
func (s *secureNATS) runFleetEnv(cfg *config.Config, getenv func(string) string) {
	t := s.t
	_, adminJS, _ := s.conn("setup", natsauth.ConnCLI)
	if err := bus.EnsureTopology(t.Context(), adminJS, bus.Topology{Replicas: 1, Repair: true, Butlers: cfg.ButlerNames()}); err != nil {
		t.Fatalf("herald setup as the setup user: %v", err)
	}
	sbNC, _, _ := s.conn("switchboard", natsauth.ConnSwitchboard)
	mNC, _, _ := s.conn("messenger", natsauth.ConnMessenger)
	run := func(name string, f func(ctx context.Context) error) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	sbRunning, mRunning := make(chan struct{}), make(chan struct{})
	run("switchboard", func(ctx context.Context) error {
		return switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: sbNC, Log: quiet(), Running: func() { close(sbRunning) }})
	})
	run("messenger", func(ctx context.Context) error {
		return messenger.Run(ctx, messenger.Options{Config: cfg, NC: mNC, Log: quiet(), Getenv: getenv, Running: func() { close(mRunning) }})
	})
	for name, running := range map[string]chan struct{}{"switchboard": sbRunning, "messenger": mRunning} {
		select {
		case <-running:
		case <-time.After(30 * time.Second):
			t.Fatalf("the %s did not start under its permissions within 30s", name)
		}
	}
}

// conn connects as user with the connection name its process uses, and
// collects what the server refuses it.
func (s *secureNATS) conn(user, name string) (*nats.Conn, jetstream.JetStream, *refusals) {
	s.t.Helper()
	r := &refusals{}
	nc, err := nats.Connect(s.url, nats.UserInfo(user, s.pw[user]), nats.Name(name), nats.CustomInboxPrefix("_INBOX."+name),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { r.add(err) }))
	if err != nil {
		s.t.Fatalf("connecting as %s: %v", user, err)
	}
	s.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	return nc, js, r
}

type refusals struct {
	mu   sync.Mutex
	errs []string
}

func (r *refusals) add(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err.Error())
	r.mu.Unlock()
}

// of waits briefly for the server's refusal of subject.
func (r *refusals) of(subject string) bool {
	return testkit.Poll(2*time.Second, testkit.Interval, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.errs {
			if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, `"`+subject+`"`) {
				return true
			}
		}
		return false
	})
}

// TestPermissionsFromBeforeTheDirectRoute: a fleet whose nats-secure.conf
// was generated before butlers asked the switchboard directly (no
// herald.direct subjects) still delivers every notify, through
// HERALD_ROUTE; the butler says once what to run, and does not try the
// refused subject again for route.DirectPause.
func TestPermissionsFromBeforeTheDirectRoute(t *testing.T) {
	cfg, err := config.Parse([]byte(`
butlers:
  - { name: health }
integrations:
  - { id: health_log, type: log, grants: [health] }
`))
	if err != nil {
		t.Fatal(err)
	}
	old := regexp.MustCompile(`(?m)^.*"herald\.direct\..*\n`).ReplaceAll(natsauth.Render(cfg), nil)
	if bytes.Contains(old, []byte("herald.direct")) {
		t.Fatalf("the configuration of before still names herald.direct:\n%s", old)
	}
	s := runSecureNATSWith(t, cfg, old)
	s.runFleet(cfg)
	hNC, hJS, refused := s.conn("butler-health", natsauth.ConnButler("health"))
	var logs testkit.Buffer
	rc := &route.Client{NC: hNC, JS: hJS, Ledger: ledger.New(bus.NewDirectKV(hJS, bus.BucketDeliveries)), Timeout: 20 * time.Second, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	for _, msg := range []string{"first after the upgrade", "second after the upgrade"} {
		resp, err := rc.Send(t.Context(), envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "log", Message: msg}, nil)))
		if err != nil || resp.Status != "ok" {
			t.Fatalf("%q under the old permissions: %v %+v", msg, err, resp)
		}
	}
	_, setupJS, _ := s.conn("setup", natsauth.ConnCLI)
	if n := bustest.Stored(t, setupJS, bus.StreamRoute); n != 2 {
		t.Errorf("%d notifies stored in %s, want both", n, bus.StreamRoute)
	}
	if !refused.of(bus.DirectSubject("health")) {
		t.Fatal("the old permissions did not refuse the direct subject; the test shows nothing")
	}
	tries := 0
	refused.mu.Lock()
	for _, e := range refused.errs {
		if strings.Contains(e, `"`+bus.DirectSubject("health")+`"`) {
			tries++
		}
	}
	refused.mu.Unlock()
	if tries != 1 {
		t.Errorf("the butler tried the refused direct subject %d times, want once (then a pause)", tries)
	}
	if got := strings.Count(logs.String(), "run herald nats-auth again"); got != 1 {
		t.Errorf("the butler said what to run %d times, want once:\n%s", got, logs.String())
	}
}

// TestLeastPrivilegeOnNATS runs the fleet on a real nats-server with the
// generated permissions: the services do their work, and butler health, with
// only its own credentials, tries every attack of the security issue. Each is
// refused by the server.
func TestLeastPrivilegeOnNATS(t *testing.T) {
	cfg, err := config.Parse([]byte(`
butlers:
  - { name: health }
  - { name: finance }
integrations:
  - { id: health_log, type: log, grants: [health] }
  - { id: finance_log, type: log, grants: [finance] }
`))
	if err != nil {
		t.Fatal(err)
	}
	s := runSecureNATS(t, cfg)
	ctx := t.Context()

	s.runFleet(cfg)
	hNC, hJS, refused := s.conn("butler-health", natsauth.ConnButler("health"))
	led := ledger.New(bus.NewDirectKV(hJS, bus.BucketDeliveries))
	rc := &route.Client{NC: hNC, JS: hJS, Ledger: led, Timeout: 20 * time.Second}
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "log", Message: "hello under least privilege"}, nil))
	resp, err := rc.Send(ctx, r)
	if err != nil || resp.Status != "ok" {
		t.Fatalf("health's notify under its own permissions: %v %+v", err, resp)
	}
	_, setupJS, _ := s.conn("setup", natsauth.ConnCLI)
	if n := bustest.Stored(t, setupJS, bus.StreamRoute); n != 0 {
		t.Errorf("health's notify was stored in %s (%d): the switchboard did not route it directly under its permissions", bus.StreamRoute, n)
	}
	if rec, err := led.Get(ctx, "health", r.IdempotencyKey()); err != nil || rec == nil || !rec.Final() {
		t.Fatalf("health reads its own ledger record by subject: %+v %v", rec, err)
	}
	// channel_status: the health of its own integrations, by key.
	ownStatus := "$JS.API.DIRECT.GET.KV_" + bus.BucketStatus + ".$KV." + bus.BucketStatus + ".health_log"
	if _, err := bus.NewDirectKV(hJS, bus.BucketStatus).Get(ctx, "health_log"); (err != nil && !errors.Is(err, jetstream.ErrKeyNotFound)) || refused.of(ownStatus) {
		t.Fatalf("health reads the status of its own integration: %v", err)
	}

	// The attacks, as health.
	try := func(name, subject string, do func() error) {
		t.Helper()
		err := do()
		if !refused.of(subject) {
			t.Errorf("%s: not refused by the server (err %v)", name, err)
		}
	}
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 500*time.Millisecond) }
	req := func(subject string, body any) func() error {
		return func() error {
			c, cancel := short()
			defer cancel()
			b, _ := json.Marshal(body)
			_, err := hNC.RequestWithContext(c, subject, b)
			return err
		}
	}
	pub := func(subject string) func() error {
		return func() error {
			if err := hNC.Publish(subject, []byte("forged")); err != nil {
				return err
			}
			return hNC.Flush()
		}
	}
	try("a stream that sources every bucket onto its reply subject", "$JS.API.STREAM.CREATE.LEAK",
		req("$JS.API.STREAM.CREATE.LEAK", jetstream.StreamConfig{Name: "LEAK", Subjects: []string{"herald.reply.health.leak.>"},
			Sources: []*jetstream.StreamSource{{Name: "KV_herald_approvals"}, {Name: "KV_herald_pairing"}, {Name: bus.StreamAudit}}}))
	try("a republish added to HERALD_INBOX", "$JS.API.STREAM.UPDATE."+bus.StreamInbox,
		req("$JS.API.STREAM.UPDATE."+bus.StreamInbox, jetstream.StreamConfig{Name: bus.StreamInbox, Subjects: []string{"herald.inbox.>"},
			RePublish: &jetstream.RePublish{Source: "herald.inbox.>", Destination: "herald.reply.health.leak.>"}}))
	try("STREAM.INFO with a subjects filter, listing the approvals' keys", "$JS.API.STREAM.INFO.KV_herald_approvals",
		req("$JS.API.STREAM.INFO.KV_herald_approvals", map[string]any{"subjects_filter": ">"}))
	try("deleting a stream", "$JS.API.STREAM.DELETE."+bus.StreamAudit, req("$JS.API.STREAM.DELETE."+bus.StreamAudit, nil))
	try("typing… shown on a visitor's web chat", bus.WebTypingSubject("web", "0123456789abcdef01234567"), pub(bus.WebTypingSubject("web", "0123456789abcdef01234567")))
	for _, k := range []struct{ bucket, key string }{
		{bus.BucketDeliveries, "finance.x"}, {bus.BucketRequests, "finance.x"}, {bus.BucketRequests, "_routed.health.x"},
		{bus.BucketApprovals, "finance.abcde"}, {bus.BucketApprovals, "health.abcde"}, {bus.BucketSessions, "x"},
		{bus.BucketPairing, "x"}, {bus.BucketTokens, "finance.x"},
		{bus.BucketStatus, "finance_log"}, // when someone last wrote on another butler's channel
	} {
		subject := "$JS.API.DIRECT.GET.KV_" + k.bucket + ".$KV." + k.bucket + "." + k.key
		try("reading "+k.bucket+" "+k.key, subject, req(subject, nil))
	}
	for _, subject := range []string{
		"$KV." + bus.BucketApprovals + ".finance.abcde", // writing another butler's prompt
		"$KV." + bus.BucketRequests + ".finance.x",
		"$KV." + bus.BucketRequests + "._routed.health.x", // forging a routed message to reply to
		"$KV." + bus.BucketDeliveries + ".health.x",       // writing its own ledger
		bus.RouteSubject("finance"),                       // speaking as finance
		bus.DirectSubject("finance"),                      // the same, straight to the switchboard
		bus.DeliverSubject("messenger"), bus.IngressSubject("telegram"), bus.InboxSubject("finance"),
		bus.ResultSubject("finance", "x"), bus.AuditSubject("routed", "telegram"), "herald.dead.x",
		bus.FileOutSubject("finance", "x") + ".0",  // a file out as finance
		bus.FileInSubject("health", "x", 0) + ".0", // the bytes of a download, which the messenger writes
		"$O." + bus.BucketFiles + ".M.eA",          // an Object Store object's description
		bus.DownloadSubject("finance"),             // asking for finance's attachments
	} {
		try("publishing to "+subject, subject, pub(subject))
	}
	for _, subject := range []string{
		"$JS.API.DIRECT.GET." + bus.StreamFiles + "." + bus.FileInSubject("finance", "x", 0) + ".0", // finance's downloads
		"$JS.API.DIRECT.GET." + bus.StreamFiles + "." + bus.FileOutSubject("finance", "x") + ".0",   // finance's files out
		"$JS.API.DIRECT.GET." + bus.StreamFiles,                                                     // any chunk, by sequence
		"$JS.API.STREAM.MSG.GET." + bus.StreamFiles,                                                 // the same
		"$JS.API.STREAM.INFO." + bus.StreamFiles,                                                    // listing the files' subjects
	} {
		try("reading "+subject, subject, req(subject, map[string]any{"seq": 1}))
	}
	finInbox := "$JS.API.CONSUMER.CREATE." + bus.StreamInbox + "." + bus.ConsumerInbox("finance") + "." + bus.InboxSubject("finance")
	try("consuming finance's inbox", finInbox, req(finInbox, nil))
	try("pulling from finance's inbox", "$JS.API.CONSUMER.MSG.NEXT."+bus.StreamInbox+"."+bus.ConsumerInbox("finance"),
		req("$JS.API.CONSUMER.MSG.NEXT."+bus.StreamInbox+"."+bus.ConsumerInbox("finance"), map[string]any{"batch": 1}))
	mine := "$JS.API.CONSUMER.CREATE." + bus.StreamInbox + "." + bus.ConsumerInbox("health") + "." + bus.InboxSubject("finance")
	try("its own consumer name on finance's subject", mine, req(mine, nil))
	// Not even its own inbox consumer may it make or change (herald setup
	// made it): so it cannot turn it into a push consumer delivering elsewhere.
	own := "$JS.API.CONSUMER.CREATE." + bus.StreamInbox + "." + bus.ConsumerInbox("health") + "." + bus.InboxSubject("health")
	try("remaking its own inbox consumer", own, req(own, map[string]any{"stream_name": bus.StreamInbox,
		"config": map[string]any{"durable_name": bus.ConsumerInbox("health"), "deliver_subject": "herald.ingress.web", "filter_subject": bus.InboxSubject("health")}}))
	c, cancel := short()
	_, err = hJS.CreateOrUpdateConsumer(c, bus.StreamInbox, jetstream.ConsumerConfig{Durable: bus.ConsumerInbox("health"), FilterSubject: bus.InboxSubject("finance")})
	cancel()
	if err == nil {
		t.Error("health's consumer filtered on finance's inbox was created")
	}
	// Neither another butler's answers, nor the notifies on their way to
	// the switchboard (a butler taking them could answer "routed" and drop them).
	for _, subject := range []string{bus.ReplySubject("finance", ">"), bus.DirectPrefix + "*"} {
		sub, err := hNC.QueueSubscribeSync(subject, "switchboard")
		if err == nil {
			_ = hNC.Flush()
			if !refused.of(subject) {
				t.Errorf("subscribing to %s: not refused", subject)
			}
			_ = sub.Unsubscribe()
		}
	}

	// A control: what health may do is not refused, so the checks above can tell.
	if err := pub(bus.RouteSubject("health"))(); err != nil || refused.of(bus.RouteSubject("health")) {
		t.Errorf("health's own route subject refused: %v", err)
	}
	out := bus.FileOutSubject("health", "x")
	if _, err := bus.PutFile(ctx, hJS, out, strings.NewReader("a chart"), 1<<20); err != nil || refused.of(out+".0") {
		t.Errorf("health writing its own file out: %v", err)
	}
	in := bus.FileInSubject("health", "x", 0)
	if err := bus.GetFile(ctx, hNC, in, 1, "", io.Discard); !errors.Is(err, envelope.ErrNotFound) || refused.of("$JS.API.DIRECT.GET."+bus.StreamFiles+"."+in+".0") {
		t.Errorf("health reading its own downloads: %v, want not_found (none was fetched)", err)
	}
	if msg, err := hNC.Request(bus.DownloadSubject("health"), []byte(`{"request_id":"x"}`), 10*time.Second); err != nil {
		t.Errorf("health asking the messenger for an attachment: %v", err)
	} else if !strings.Contains(string(msg.Data), "not a message routed to health") {
		t.Errorf("health asking the messenger for an attachment of a message it was not given: %s", msg.Data)
	}

	// The messenger may not list keys of buckets it has no business with,
	// nor make streams.
	m2, _, mr := s.conn("messenger", natsauth.ConnMessenger)
	for _, subject := range []string{"$JS.API.STREAM.INFO.KV_herald_approvals", "$JS.API.STREAM.CREATE.LEAK", "$JS.API.STREAM.UPDATE." + bus.StreamAudit} {
		c, cancel := short()
		_, err := m2.RequestWithContext(c, subject, []byte(`{"subjects_filter":">"}`))
		cancel()
		if !mr.of(subject) {
			t.Errorf("messenger %s: not refused (err %v)", subject, err)
		}
	}
	// A control: one replica's web chat typing… reaches another's pages.
	typing := bus.WebTypingSubject("web", "0123456789abcdef01234567")
	heard, err := m2.SubscribeSync(bus.WebTypingSubject("web", "*"))
	if err != nil {
		t.Fatal(err)
	}
	m3, _, mr3 := s.conn("messenger", natsauth.ConnMessenger)
	if err := m3.Publish(typing, []byte(`{"butler":"health"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := heard.NextMsg(5 * time.Second); err != nil || mr.of(typing) || mr3.of(typing) {
		t.Errorf("the messenger's web chat typing… does not pass between replicas: %v", err)
	}
}

// TestButlerNamesReachOnlyTheirOwnKeys runs the generated permissions with
// butlers named after every prefix Herald uses in shared buckets and
// subjects: each reaches only its own keys. A butler named routed can no
// longer read, forge or rewrite the switchboard's routing records, and one
// named sent cannot reach which prompt went to which approver.
func TestButlerNamesReachOnlyTheirOwnKeys(t *testing.T) {
	for _, name := range config.ReservedButlerNames {
		_, err := config.Parse([]byte("butlers: [{ name: " + name + " }]\n"))
		if err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Fatalf("a butler named %s: %v, want refused as reserved", name, err)
		}
	}
	names := []string{"routed", "sent", "status", "butler", "route", "reply", "inbox", "finance"}
	cfg, err := config.Parse([]byte("butlers:\n" + func() string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString("  - { name: " + n + " }\n")
		}
		return b.String()
	}() + "integrations:\n  - { id: main_log, type: log, grants: [" + strings.Join(names, ", ") + "] }\n"))
	if err != nil {
		t.Fatal(err)
	}

	// Every key rule of every butler names its own keys: "<name>." in the
	// shared buckets, its granted integrations' ids in herald_status.
	for _, u := range natsauth.Users(cfg) {
		name, ok := strings.CutPrefix(u.Name, "butler-")
		if !ok {
			continue
		}
		for _, r := range u.Publish {
			bucket, key, ok := kvKeyOf(r.Subject)
			switch {
			case !ok:
			case bucket == bus.BucketStatus:
				if key != "main_log" {
					t.Errorf("%s may read %s key %s, not one of its integrations", u.Name, bucket, key)
				}
			case bucket == bus.BucketApprovals && strings.HasPrefix(key, "_grant."):
				// Its sessions' grants, which the switchboard writes: read only.
				if !strings.HasPrefix(key, "_grant."+name+".") || !strings.HasPrefix(r.Subject, "$JS.API.DIRECT.GET.") {
					t.Errorf("%s may reach %s key %s, not its own grants' (read only)", u.Name, bucket, key)
				}
			case !strings.HasPrefix(key, name+"."):
				t.Errorf("%s may reach %s key %s, not under %s.", u.Name, bucket, key, name)
			}
		}
	}

	s := runSecureNATS(t, cfg)
	s.runFleet(cfg)
	ctx := t.Context()

	// The switchboard's records for finance: an inbound message routed to
	// it, and a prompt of its sent to an approver in chat 42.
	_, swJS, _ := s.conn("switchboard", natsauth.ConnSwitchboard)
	swRequests, err := swJS.KeyValue(ctx, bus.BucketRequests)
	if err != nil {
		t.Fatal(err)
	}
	in := &envelope.Ingress{SchemaVersion: envelope.IngressV1, IntegrationID: "main_log", Meta: map[string]string{"chat_id": "42"},
		RequestContext: envelope.RequestContext{RequestID: envelope.NewRequestID(), SourceChannel: "api", SourceEndpointIdentity: "main_log", SourceSenderIdentity: "42"}}
	if err := core.RecordRouted(ctx, swRequests, "finance", in); err != nil {
		t.Fatal(err)
	}
	if err := approval.New(bus.NewDirectKV(swJS, bus.BucketApprovals)).MarkSent(ctx, "finance", "abcde", "main_log", "42"); err != nil {
		t.Fatal(err)
	}
	_, setupJS, _ := s.conn("setup", natsauth.ConnCLI)
	routedKeys, sentKeys := keysOf(t, setupJS, bus.BucketRequests), keysOf(t, setupJS, bus.BucketApprovals)
	if len(routedKeys) != 1 || len(sentKeys) != 1 {
		t.Fatalf("switchboard records: %v %v", routedKeys, sentKeys)
	}

	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 500*time.Millisecond) }
	for _, name := range names[:len(names)-1] {
		t.Run(name, func(t *testing.T) {
			nc, js, refused := s.conn("butler-"+name, natsauth.ConnButler(name))
			for _, k := range []struct{ bucket, key string }{{bus.BucketRequests, routedKeys[0]}, {bus.BucketApprovals, sentKeys[0]}} {
				get := "$JS.API.DIRECT.GET.KV_" + k.bucket + ".$KV." + k.bucket + "." + k.key
				c, cancel := short()
				_, err := nc.RequestWithContext(c, get, nil)
				cancel()
				if !refused.of(get) {
					t.Errorf("reading the switchboard's %s %s: not refused (err %v)", k.bucket, k.key, err)
				}
				put := "$KV." + k.bucket + "." + k.key
				if err := nc.Publish(put, []byte("forged")); err == nil {
					_ = nc.Flush()
				}
				if !refused.of(put) {
					t.Errorf("rewriting the switchboard's %s %s: not refused", k.bucket, k.key)
				}
			}
			// What its own name lets it write is its own and nothing more: a
			// routing record forged under it (as the legacy "routed." key, for
			// the butler named routed) opens no reply to chat 666.
			forged := envelope.NewRequestID()
			rec, _ := json.Marshal(map[string]any{"integration": "main_log", "chat": "666",
				"request_context": envelope.RequestContext{RequestID: forged, SourceChannel: "api", SourceEndpointIdentity: "main_log", SourceSenderIdentity: "666"}})
			if _, err := bus.NewDirectKV(js, bus.BucketRequests).Put(ctx, name+"."+name+"."+forged, rec); err != nil {
				t.Fatalf("writing under its own name: %v", err)
			}
			rc := &route.Client{NC: nc, JS: js, Ledger: ledger.New(bus.NewDirectKV(js, bus.BucketDeliveries)), Timeout: 20 * time.Second}
			resp, err := rc.Send(ctx, envelope.NewRoute(envelope.NewNotify(name, envelope.Delivery{Channel: "log", Intent: envelope.IntentReply,
				Recipient: "666", Message: "to a stranger"}, &envelope.RequestContext{RequestID: forged, SourceChannel: "api", SourceEndpointIdentity: "main_log", SourceSenderIdentity: "666"})))
			if err != nil || resp.Error == nil || resp.Error.Class != "forbidden" {
				t.Errorf("a reply through a forged routing record: %v %+v, want forbidden", err, resp)
			}
		})
	}

	// Finance's own reply still goes out, though routed wrote a record of
	// its own under the legacy name of finance's.
	fNC, fJS, _ := s.conn("butler-finance", natsauth.ConnButler("finance"))
	_, rJS, _ := s.conn("butler-routed", natsauth.ConnButler("routed"))
	if _, err := bus.NewDirectKV(rJS, bus.BucketRequests).Put(ctx, "routed.finance."+in.RequestContext.RequestID, []byte(`{"integration":"main_log","chat":"999"}`)); err != nil {
		t.Fatal(err)
	}
	rc := &route.Client{NC: fNC, JS: fJS, Ledger: ledger.New(bus.NewDirectKV(fJS, bus.BucketDeliveries)), Timeout: 20 * time.Second}
	rcx := in.RequestContext
	resp, err := rc.Send(ctx, envelope.NewRoute(envelope.NewNotify("finance", envelope.Delivery{Channel: "log", Intent: envelope.IntentReply, Message: "answered"}, &rcx)))
	if err != nil || resp.Status != "ok" {
		t.Fatalf("finance's reply to the message routed to it: %v %+v", err, resp)
	}

	// A session grant the switchboard made for finance: finance reads it and
	// audits what it answers by it; it cannot write one, and routed cannot
	// read it.
	grant := &approval.Grant{Butler: "finance", Session: "sess-1", ToolName: "Bash", GrantedBy: "42", Channel: "log:main_log", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := approval.New(bus.NewDirectKV(swJS, bus.BucketApprovals)).AddGrant(ctx, grant); err != nil {
		t.Fatal(err)
	}
	if g, err := approval.New(bus.NewDirectKV(fJS, bus.BucketApprovals)).GrantFor(ctx, "finance", "sess-1", "Bash"); err != nil || g == nil || g.ID != grant.ID {
		t.Fatalf("finance reading its own session's grant: %+v %v", g, err)
	}
	if _, err := fJS.Publish(ctx, bus.ButlerAuditSubject(audit.AutoAllowed, "finance"), []byte(`{"kind":"auto_allowed","butler":"finance"}`)); err != nil {
		t.Errorf("finance auditing a request its grant answered: %v", err)
	}
	pubCtx, cancelPub := short()
	if _, err := fJS.Publish(pubCtx, bus.AuditSubject(audit.AutoAllowed, "unknown"), []byte(`{"kind":"auto_allowed","butler":"finance"}`)); err == nil {
		t.Error("finance stored an audit record on a service's subject")
	}
	cancelPub()
	rNC, _, rRefused := s.conn("butler-routed", natsauth.ConnButler("routed"))
	get := "$JS.API.DIRECT.GET.KV_" + bus.BucketApprovals + ".$KV." + bus.BucketApprovals + "." + approval.GrantKey("finance", "sess-1", "Bash")
	c, cancel := short()
	_, _ = rNC.RequestWithContext(c, get, nil)
	cancel()
	if !rRefused.of(get) {
		t.Error("butler-routed read finance's grant")
	}
	// Its questions (ask): finance writes one and reads it back; routed
	// cannot read it.
	fq := approval.New(bus.NewDirectKV(fJS, bus.BucketApprovals))
	question := approval.Question{ID: approval.NewQuestionID(), Butler: "finance", Question: "Deploy?", CreatedAt: time.Now()}
	if err := fq.Ask(ctx, question); err != nil {
		t.Fatalf("finance asking a question: %v", err)
	}
	if got, err := fq.Question(ctx, "finance", question.ID); err != nil || got.Question != "Deploy?" {
		t.Fatalf("finance reading back its question: %+v %v", got, err)
	}
	qget := "$JS.API.DIRECT.GET.KV_" + bus.BucketApprovals + ".$KV." + bus.BucketApprovals + ".finance.q." + question.ID
	c, cancel = short()
	_, _ = rNC.RequestWithContext(c, qget, nil)
	cancel()
	if !rRefused.of(qget) {
		t.Error("butler-routed read finance's question")
	}
	fNC2, _, fRefused := s.conn("butler-finance", natsauth.ConnButler("finance"))
	forge := "$KV." + bus.BucketApprovals + "." + approval.GrantKey("finance", "sess-2", "Bash")
	if err := fNC2.Publish(forge, []byte(`{"butler":"finance"}`)); err == nil {
		_ = fNC2.Flush()
	}
	if !fRefused.of(forge) {
		t.Error("butler-finance wrote itself a grant")
	}
}

// kvKeyOf splits a permission subject on a KV key, "$KV.<bucket>.<key>" or
// a direct get of one, into bucket and key.
func kvKeyOf(subject string) (bucket, key string, ok bool) {
	if rest, found := strings.CutPrefix(subject, "$JS.API.DIRECT.GET.KV_"); found {
		_, subject, found = strings.Cut(rest, ".")
		if !found {
			return "", "", false
		}
	}
	rest, found := strings.CutPrefix(subject, "$KV.")
	if !found {
		return "", "", false
	}
	return strings.Cut(rest, ".")
}

// keysOf lists a bucket's keys (js must be the setup user's).
func keysOf(t *testing.T, js jetstream.JetStream, bucket string) []string {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range keys.Keys() {
		out = append(out, k)
	}
	return out
}
