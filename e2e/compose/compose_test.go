//go:build compose

package compose

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFleet walks docs/fleet.md in order on one fleet; each step needs the
// ones before it, so the first failure ends the walk.
func TestFleet(t *testing.T) {
	f := newFleet(t)
	steps := []struct {
		name string
		run  func(*testing.T, *fleet)
	}{
		{"init and up", stepUp},
		{"first notify", stepFirstNotify},
		{"connect Claude Code as docs/fleet.md says", stepConnect},
		{"missing provider secret", stepMissingSecret},
		{"restart messenger, kill switchboard", stepBurst},
		{"down and up keep a queued message", stepDownUp},
		{"a new butler joins", stepNewButler},
		{"a grant revoked by herald reload", stepReload},
		{"cluster loses a node", stepCluster},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { f.t = t; s.run(t, f) }) {
			return
		}
	}
}

// stepUp: herald init from the image, as docs/fleet.md "Start" runs it
// with docker alone, then up: every service healthy.
func stepUp(t *testing.T, f *fleet) {
	out := f.shell(docCommand(t, "Start", "herald init"))
	t.Logf("herald init:\n%s", out)
	if !strings.Contains(out, "deploy/.env: added HEALTH_MCP_TOKEN") || !strings.Contains(out, "deploy/compose.butlers.yaml: 2 butler services (health, finance).") {
		t.Errorf("herald init from the image does not print what docs/fleet.md shows:\n%s", out)
	}
	if st, err := os.Stat(filepath.Join(f.dir, ".env")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf(".env after herald init: %v, %v; want mode 0600", st, err)
	}
	// The stand-in takes the place of api.telegram.org; SMTP_URL stays
	// empty (the missing provider secret of a later step).
	f.setEnv("TELEGRAM_BOT_TOKEN", standinToken)
	took := f.up()
	fmt.Printf("compose up: every service healthy %.1f s after up\n", took.Seconds())
	ps := f.compose("ps", "--format", "{{.Service}} {{.Health}}")
	for _, svc := range []string{"nats", "switchboard", "messenger", "butler-health", "butler-finance"} {
		if !regexp.MustCompile(`(?m)^` + svc + ` healthy$`).MatchString(ps) {
			t.Errorf("%s is not healthy:\n%s", svc, ps)
		}
	}
}

// stepFirstNotify: docs/fleet.md's notify from the image through the
// herald service reaches the log channel, and herald log through the
// service shows it delivered; a notify through butler-health's published
// MCP port, with its token from .env, reaches the log channel and Telegram.
func stepFirstNotify(t *testing.T, f *fleet) {
	out := f.shell(docCommand(t, "Start", "herald notify --url http://butler-health:7701/mcp"))
	m := regexp.MustCompile(`Notification sent via log:log \(delivery_id (dlv_[0-9a-f]+), request_id ([0-9a-f-]+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("docs/fleet.md's notify through the herald service answered:\n%s", out)
	}
	testkit.EventuallyEvery(t, 30*time.Second, time.Second, func() bool {
		log := f.shell(docCommand(t, "Start", "herald log --since 10m"))
		for line := range strings.Lines(log) {
			if strings.Contains(line, m[2]) && strings.Contains(line, "delivered") && strings.Contains(line, "log:log") {
				return true
			}
		}
		return false
	}, "herald log through the herald service showing the notify delivered")
	token := f.env("HEALTH_MCP_TOKEN")
	if s, err := openSession(t.Context(), "http://127.0.0.1:7701/mcp", "wrong-"+token); err == nil {
		s.close()
		t.Fatal("butler-health let in a session with a wrong token")
	}
	r := notifyOnce(t, "7701", token, map[string]any{"channel": "log", "message": "compose first log"})
	if r.isError || !strings.Contains(r.text, "Notification sent via log") {
		t.Fatalf("notify on log: %q", r.text)
	}
	testkit.EventuallyEvery(t, 30*time.Second, 250*time.Millisecond, func() bool {
		out, _ := f.composeOut(t.Context(), "logs", "--no-color", "messenger")
		return strings.Contains(out, "llm_notify") && strings.Contains(out, "compose first log")
	}, "the log channel's llm_notify record")
	r = notifyOnce(t, "7701", token, map[string]any{"message": "compose first telegram"})
	if r.isError || !strings.Contains(r.text, "Notification sent via telegram") {
		t.Fatalf("notify on telegram: %q", r.text)
	}
	if got := sent(t); len(got) != 1 || got[0] != "compose first telegram" {
		t.Fatalf("the Telegram stand-in holds %q, want the one notify", got)
	}
}

// stepMissingSecret: SMTP_URL is empty. The fleet is up (the messenger is
// healthy), the messenger says which integration cannot work, and a notify
// to it answers not_found naming the variable.
func stepMissingSecret(t *testing.T, f *fleet) {
	logs := f.compose("logs", "--no-color", "messenger")
	if !regexp.MustCompile(`integration unavailable.*"integration":"mail"`).MatchString(logs) {
		t.Errorf("the messenger's log does not name the integration mail as unavailable:\n%s", logs)
	}
	// Ready all the same: the other integrations work (compose would stop
	// here if herald healthcheck exited non-zero); /readyz names the one
	// that cannot, with its variable, and the health check says so.
	ready := f.compose("exec", "-T", "messenger", "herald", "healthcheck", "http://127.0.0.1:8790/readyz")
	if !strings.Contains(ready, "integration.mail cannot work") || !strings.Contains(ready, "SMTP_URL") {
		t.Errorf("the messenger's health check does not name integration mail and SMTP_URL:\n%s", ready)
	}
	// docs/fleet.md's herald status through the herald service: every
	// process, and the integration that cannot work, with why.
	status := f.shell(docCommand(t, "Start", "run --rm herald status"))
	for _, want := range []string{"switchboard", "messenger", "butler health", "butler finance"} {
		if !strings.Contains(status, want) {
			t.Errorf("herald status does not list %s:\n%s", want, status)
		}
	}
	if !regexp.MustCompile(`email:mail .*CANNOT WORK: .*SMTP_URL`).MatchString(status) {
		t.Errorf("herald status does not show email:mail as CANNOT WORK naming SMTP_URL:\n%s", status)
	}
	r := notifyOnce(t, "7702", f.env("FINANCE_MCP_TOKEN"), map[string]any{"channel": "email", "message": "compose no smtp"})
	if !r.isError || !strings.Contains(r.text, "not_found") || !strings.Contains(r.text, "SMTP_URL") {
		t.Errorf("notify on email without SMTP_URL answered %q; want not_found naming SMTP_URL", r.text)
	}
}

// burst sends n distinct notifies on telegram from sessions at once, 20
// a second (so the faults the caller injects happen in the middle of it),
// and calls at(i) as the i-th notify is handed out. Every notify must be
// accepted: answered sent, or queued (it is then delivered later). It
// returns the notifies' texts.
func burst(t *testing.T, port, token, prefix string, n, sessions int, next *atomic.Int64, at func(i int)) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("%s #%04d", prefix, i)
	}
	var mu sync.Mutex
	var failures []string
	var queued atomic.Int64
	pace := time.NewTicker(50 * time.Millisecond)
	defer pace.Stop()
	var wg sync.WaitGroup
	for range sessions {
		wg.Go(func() {
			s, err := openSession(ctx, "http://127.0.0.1:"+port+"/mcp", token)
			if err != nil {
				mu.Lock()
				failures = append(failures, "opening an MCP session: "+err.Error())
				mu.Unlock()
				return
			}
			defer s.close()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				<-pace.C
				at(i)
				r, err := s.notify(ctx, map[string]any{"message": tags[i]})
				switch {
				case err != nil:
					mu.Lock()
					failures = append(failures, tags[i]+": "+err.Error())
					mu.Unlock()
				case r.isError:
					mu.Lock()
					failures = append(failures, tags[i]+": "+r.text)
					mu.Unlock()
				case r.queued:
					queued.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d notifies were not accepted:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	fmt.Printf("%s: %d notifies accepted (%d answered queued)\n", t.Name(), n, queued.Load())
	return tags
}

// checkDelivered waits until every tag is in the stand-in's chat and
// reports tags seen more than once; those must be audited uncertain.
func checkDelivered(t *testing.T, f *fleet, tags []string) {
	t.Helper()
	count := func() map[string]int {
		c := map[string]int{}
		for _, m := range sent(t) {
			c[m]++
		}
		return c
	}
	var missing []string
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c := count()
		missing = missing[:0]
		for _, tag := range tags {
			if c[tag] == 0 {
				missing = append(missing, tag)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d notifies never reached Telegram: %v", len(missing), len(tags), missing)
	}
	c := count()
	var doubled []string
	for _, tag := range tags {
		if c[tag] > 1 {
			doubled = append(doubled, fmt.Sprintf("%s ×%d", tag, c[tag]))
		}
	}
	// A second copy is allowed only where the first attempt's outcome was
	// unknown (the messenger died inside the provider call), which the
	// audit log records as uncertain; read as the operator reads it.
	u := f.uncertain()
	switch {
	case len(doubled) > len(u):
		t.Errorf("delivered more than once: %v; the audit log has %d uncertain deliveries", doubled, len(u))
	case len(doubled) == 0:
		fmt.Printf("%s: %d notifies, each delivered once (%d audited uncertain)\n", t.Name(), len(tags), len(u))
	default:
		fmt.Printf("%s: %d notifies delivered; %d twice, with %d audited uncertain\n", t.Name(), len(tags), len(doubled), len(u))
	}
}

// stepBurst: 200 notifies while the messenger is restarted and the
// switchboard killed: nothing lost, nothing doubled that is not audited.
func stepBurst(t *testing.T, f *fleet) {
	var once1, once2 sync.Once
	done := make(chan struct{}, 2)
	var next atomic.Int64
	// How many notifies had been handed out when each fault was over: less
	// than all, or the burst did not overlap it.
	var restartedAt, killedAt atomic.Int64
	tags := burst(t, "7701", f.env("HEALTH_MCP_TOKEN"), "compose burst", 200, 8, &next, func(i int) {
		switch {
		case i == 50:
			once1.Do(func() {
				go func() {
					defer func() { done <- struct{}{} }()
					if out, err := f.composeOut(t.Context(), "restart", "messenger"); err != nil {
						t.Errorf("docker compose restart messenger: %v\n%s", err, out)
					}
					restartedAt.Store(next.Load())
				}()
			})
		case i == 120:
			once2.Do(func() {
				go func() {
					defer func() { done <- struct{}{} }()
					id, _ := f.composeOut(t.Context(), "ps", "-q", "switchboard")
					if out, err := cmd(t.Context(), "", "docker", "kill", strings.TrimSpace(id)); err != nil {
						t.Errorf("docker kill switchboard: %v\n%s", err, out)
						return
					}
					// docker kill counts as a stop by hand, so the restart
					// policy leaves it down: the operator starts it again.
					time.Sleep(2 * time.Second)
					if out, err := f.composeOut(t.Context(), "start", "switchboard"); err != nil {
						t.Errorf("docker compose start switchboard: %v\n%s", err, out)
					}
					killedAt.Store(next.Load())
				}()
			})
		}
	})
	<-done
	<-done
	fmt.Printf("%s: messenger restarted by notify #%d, switchboard back by #%d\n", t.Name(), restartedAt.Load(), killedAt.Load())
	if restartedAt.Load() >= 200 || killedAt.Load() >= 200 {
		t.Error("the burst was over before a fault ended: it tested nothing; slow it down")
	}
	checkDelivered(t, f, tags)
	// A crash, not a stop: the restart policy brings the switchboard back.
	pid := f.containerPID("switchboard")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyEvery(t, time.Minute, 250*time.Millisecond, func() bool {
		out, _ := f.composeOut(t.Context(), "ps", "--format", "{{.Health}}", "switchboard")
		id, _ := f.composeOut(t.Context(), "ps", "-q", "switchboard")
		now, _ := cmd(t.Context(), "", "docker", "inspect", "-f", "{{.State.Pid}}", strings.TrimSpace(id))
		return strings.TrimSpace(out) == "healthy" && strings.TrimSpace(string(now)) != fmt.Sprint(pid)
	}, "the switchboard restarted by its restart policy and healthy")
}

// stepDownUp: a notify queued while the messenger is stopped survives
// `docker compose down` and `up` (the volume), and is delivered after.
func stepDownUp(t *testing.T, f *fleet) {
	f.compose("stop", "messenger")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	s, err := openSession(ctx, "http://127.0.0.1:7701/mcp", f.env("HEALTH_MCP_TOKEN"))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	// The butler stores the route and waits for an answer that cannot come
	// while the messenger is down; the client gives up first, as a model
	// would, and the notify stays queued.
	_, _ = s.notify(ctx, map[string]any{"message": "compose queued across down"})
	cancel()
	s.close()
	time.Sleep(2 * time.Second) // the switchboard forwards it to HERALD_DELIVER
	f.compose("down")
	took := f.up()
	fmt.Printf("compose down, up: healthy again %.1f s after up\n", took.Seconds())
	testkit.EventuallyEvery(t, 2*time.Minute, 250*time.Millisecond, func() bool {
		for _, m := range sent(t) {
			if m == "compose queued across down" {
				return true
			}
		}
		return false
	}, "the notify queued before down delivered after up")
}

const gardenButler = `  - name: garden
    default_channel: telegram
    mcp_http: 0.0.0.0:7703
    mcp_token_env: GARDEN_MCP_TOKEN
    allowed_hosts: [butler-garden]
`

// stepNewButler: docs/fleet.md "Add a butler": append it to herald.yaml,
// herald init, herald nats-auth > nats-secure.conf, up -d. It answers
// notify, and its NATS user cannot read another butler's inbox.
func stepNewButler(t *testing.T, f *fleet) {
	cfgPath := filepath.Join(f.dir, "herald.yaml")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "\nintegrations:\n", "\n"+gardenButler+"\nintegrations:\n", 1)
	if edited == string(b) {
		t.Fatal("deploy/herald.yaml has no line \"integrations:\" to add a butler before")
	}
	start := time.Now()
	if err := os.WriteFile(cfgPath, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	// docs/fleet.md "Add a butler", from the image.
	t.Logf("herald init:\n%s", f.shell(docCommand(t, "Add a butler", "herald init")))
	f.shell(docCommand(t, "Add a butler", "herald nats-auth"))
	if conf, err := os.ReadFile(filepath.Join(f.dir, "nats-secure.conf")); err != nil || !strings.Contains(string(conf), `user: "butler-garden"`) {
		t.Fatalf("nats-secure.conf after herald nats-auth from the image has no user butler-garden (%v):\n%s", err, conf)
	}
	f.compose("up", "-d", "--wait", "--no-build", "--wait-timeout", "240")
	token := f.env("GARDEN_MCP_TOKEN")
	r := notifyOnce(t, "7703", token, map[string]any{"message": "compose garden says hello"})
	if r.isError {
		t.Fatalf("the new butler's notify: %q", r.text)
	}
	testkit.EventuallyEvery(t, time.Minute, 250*time.Millisecond, func() bool {
		for _, m := range sent(t) {
			if m == "compose garden says hello" {
				return true
			}
		}
		return false
	}, "the new butler's notify delivered")
	secs := time.Since(start).Seconds()
	fmt.Printf("a new butler: %.0f s from editing herald.yaml to its first delivered notify\n", secs)

	// Its NATS user, from the host (NATS is published on 127.0.0.1), may
	// not read butler health's inbox: neither its durable consumer nor the
	// subject.
	nc, err := nats.Connect("nats://127.0.0.1:4222", nats.UserInfo("butler-garden", f.env("HERALD_NATS_BUTLER_GARDEN_PASSWORD")),
		nats.Name("butler.garden"), nats.CustomInboxPrefix("_INBOX.butler.garden"))
	if err != nil {
		t.Fatalf("connecting as butler-garden: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A refused request gets no answer: it runs out its own time.
	bind := func(butler string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		_, err := js.Consumer(ctx, bus.StreamInbox, bus.ConsumerInbox(butler))
		return err
	}
	if err := bind("garden"); err != nil {
		t.Errorf("butler-garden cannot bind its own inbox consumer (so the next check would show nothing): %v", err)
	}
	if err := bind("health"); err == nil {
		t.Error("butler-garden bound butler health's inbox consumer")
	}
	denied := make(chan error, 1)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		// Only this subscription's refusal (the refused binds above are
		// reported here too).
		if strings.Contains(strings.ToLower(err.Error()), "permissions violation") && strings.Contains(err.Error(), `"herald.inbox.health"`) {
			select {
			case denied <- err:
			default:
			}
		}
	})
	if _, err := nc.SubscribeSync("herald.inbox.health"); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	select {
	case err := <-denied:
		t.Logf("subscribing to herald.inbox.health as butler-garden: %v", err)
	case <-time.After(5 * time.Second):
		t.Error("butler-garden subscribed to herald.inbox.health without a permissions violation")
	}
}

// stepReload: docs/fleet.md "Change the configuration": herald.yaml edited
// in place, `herald reload` through the herald service; every service (each
// as its own NATS user) applies it, and a revoked grant refuses at once.
func stepReload(t *testing.T, f *fleet) {
	cfgPath := filepath.Join(f.dir, "herald.yaml")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	const granted = "grants: [finance, health]"
	if !strings.Contains(string(b), granted) {
		t.Fatalf("deploy/herald.yaml's mail integration no longer says %q", granted)
	}
	reload := func(file string) string {
		t.Helper()
		// os.WriteFile writes in place: the containers' bind mount sees it.
		if err := os.WriteFile(cfgPath, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		return f.compose("run", "--rm", "herald", "reload")
	}
	out := reload(strings.Replace(string(b), granted, "grants: [finance]", 1))
	t.Logf("herald reload:\n%s", out)
	for _, want := range []string{"switchboard@", "messenger@", "butler health@", "butler finance@", "butler garden@", "integration mail: grants changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("herald reload's answer lacks %q", want)
		}
	}
	r := notifyOnce(t, "7701", f.env("HEALTH_MCP_TOKEN"), map[string]any{"channel": "email", "message": "health may no longer mail"})
	if !r.isError || !strings.Contains(r.text, "not granted") {
		t.Fatalf("health's notify to email after its grant was revoked: %q", r.text)
	}
	out = reload(string(b))
	if !strings.Contains(out, "integration mail: grants changed") {
		t.Errorf("putting the grant back: %s", out)
	}
}

// stepCluster: the 3-node override; one NATS node's process killed in the
// middle of 100 notifies: nothing lost.
func stepCluster(t *testing.T, f *fleet) {
	f.compose("down", "-v")
	// docs/fleet.md "Add a butler", with the cluster: garden also goes into
	// herald.cluster.yaml (setup makes its inbox from that file, and the
	// switchboard knows butlers from it) and into compose.cluster.yaml.
	edit := func(name, after, insert string) {
		path := filepath.Join(f.dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(b), after, after+insert, 1)
		if edited == string(b) {
			t.Fatalf("deploy/%s has no %q to add the butler garden after", name, after)
		}
		if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("herald.cluster.yaml", "    allowed_hosts: [butler-finance]\n", gardenButler)
	edit("compose.cluster.yaml", "  butler-finance: *cluster-config\n", "  butler-garden: *cluster-config\n")
	f.files = []string{"compose.yaml", "compose.cluster.yaml", "compose.test.yaml"}
	took := f.up()
	fmt.Printf("cluster up: every service healthy %.1f s after up\n", took.Seconds())
	var once sync.Once
	done := make(chan struct{})
	var next atomic.Int64
	pid := f.containerPID("nats")
	tags := burst(t, "7701", f.env("HEALTH_MCP_TOKEN"), "compose cluster", 100, 8, &next, func(i int) {
		if i == 40 {
			once.Do(func() {
				go func() {
					defer close(done)
					// A crash of node 1's process; its restart policy
					// brings it back, and it catches up with the others.
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						t.Errorf("killing nats: %v", err)
					}
				}()
			})
		}
	})
	<-done
	checkDelivered(t, f, tags)
	testkit.EventuallyEvery(t, 2*time.Minute, 250*time.Millisecond, func() bool {
		out, _ := f.composeOut(t.Context(), "ps", "--format", "{{.Health}}", "nats")
		id, _ := f.composeOut(t.Context(), "ps", "-q", "nats")
		now, _ := cmd(t.Context(), "", "docker", "inspect", "-f", "{{.State.Pid}}", strings.TrimSpace(id))
		return strings.TrimSpace(out) == "healthy" && strings.TrimSpace(string(now)) != fmt.Sprint(pid)
	}, "node 1 restarted by its restart policy and healthy (current with the cluster)")
}
