package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/natsauth"
	"github.com/heraldhq/herald/pkg/reload"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// TestReloadWithAMessengerKilledMidApply: two messenger binaries run under
// the one NATS user `herald nats-auth` generates for them, on one host.
// Messenger a holds a delivery (the fake Telegram does not answer it), so
// when herald reload asks it to apply a changed file it stays in the
// apply, finishing that delivery first; it is SIGKILLed when its
// "applying" beat arrives, and a messenger is started again in its place,
// as a supervisor would. herald reload names the two messengers apart,
// names a as the one that stopped answering, and says that the one started
// since runs the new file; it says of no process that it runs the old one,
// and exits 0, since every process runs the new file. Then --json names
// the two messengers running, apart.
func TestReloadWithAMessengerKilledMidApply(t *testing.T) {
	yaml := fmt.Sprintf(`butlers:
  - { name: health, default_channel: telegram }
integrations:
  - id: tg_main
    type: telegram
    token_env: TG_TOKEN
    default_chat: %q
    grants: all
    rate_limit_out: { disabled: true }
`, chatID)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	s := runSecureNATS(t, cfg)
	_, adminJS, _ := s.conn("setup", natsauth.ConnCLI)
	if err := bus.EnsureTopology(t.Context(), adminJS, bus.Topology{Replicas: 1, Repair: true, Butlers: cfg.ButlerNames()}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "herald.yaml")
	edit := func(more string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(yaml+more), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	edit("")
	natsURL := func(user string) string {
		u, err := url.Parse(s.url)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, s.pw[user])
		return u.String()
	}
	tg := telegramtest.NewServer(t)
	held, release := make(chan struct{}, 1), make(chan struct{})
	tg.OnAccept("sendMessage", func(telegramtest.Call) {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	env := []string{"NATS_URL=" + natsURL("messenger"), "HERALD_CONFIG=" + file, "TG_TOKEN=" + tg.Token(), "TELEGRAM_API_URL=" + tg.URL()}
	reloadName := func(p *serviceProc) string {
		t.Helper()
		var name string
		testkit.Eventually(t, 10*time.Second, func() bool {
			recs := p.stderr.Records(map[string]string{"msg": "answering herald reload"})
			if len(recs) > 0 {
				name = fmt.Sprint(recs[0]["process"])
			}
			return name != ""
		}, p.name+" to say its name")
		return name
	}

	// Messenger a alone takes the delivery, and holds it.
	a := startService(t, "messenger", "messenger a", env)
	_, sbJS, _ := s.conn("switchboard", natsauth.ConnSwitchboard)
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram:tg_main", Message: "held across the reload"}, nil))
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	h.Set(bus.HeaderKey, r.IdempotencyKey())
	h.Set(nats.MsgIdHdr, r.IdempotencyKey())
	if _, err := sbJS.PublishMsg(t.Context(), &nats.Msg{Subject: bus.DeliverSubject("messenger"), Data: data, Header: h}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatalf("messenger a did not take the delivery; its log:\n%s", a.stderr.String())
	}
	b := startService(t, "messenger", "messenger b", env)
	aName, bName := reloadName(a), reloadName(b)
	if aName == bName {
		t.Fatalf("two messengers under one user on one host answer as one name, %s", aName)
	}
	for p, name := range map[*serviceProc]string{a: aName, b: bName} {
		if !strings.HasPrefix(name, "messenger@") || !strings.Contains(name, "-"+strconv.Itoa(p.cmd.Process.Pid)+"-") {
			t.Errorf("%s answers as %s, want messenger@<host>-%d-<tag>", p.name, name, p.cmd.Process.Pid)
		}
	}

	// The kill lands on a's first beat of the apply: a is in it, waiting
	// for the delivery it holds.
	_, watchJS, _ := s.conn("operator", natsauth.ConnCLI)
	killed := make(chan time.Time, 1)
	sub, err := watchJS.Conn().Subscribe(reload.AllAnswers, func(m *nats.Msg) {
		var ans reload.Answer
		if json.Unmarshal(m.Data, &ans) != nil || ans.Process != aName || ans.State != reload.Applying {
			return
		}
		select {
		case killed <- time.Now():
			_ = a.cmd.Process.Signal(syscall.SIGKILL)
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := watchJS.Conn().Flush(); err != nil {
		t.Fatal(err)
	}

	cliEnv := []string{"NATS_URL=" + natsURL("operator"), "HERALD_CONFIG=" + file}
	edit("  - { id: notes, type: log, grants: all }\n")
	type result struct {
		out string
		err error
		at  time.Time
	}
	answered := make(chan result, 1)
	go func() {
		out, err := heraldCLI(t, cliEnv, "reload")
		answered <- result{out, err, time.Now()}
	}()
	var at time.Time
	select {
	case at = <-killed:
	case res := <-answered:
		t.Fatalf("herald reload answered before messenger a said it was applying: %v\n%s", res.err, res.out)
	}
	_ = a.cmd.Wait()
	close(release) // what a held is redelivered; let it through
	again := startService(t, "messenger", "messenger a again", env)
	againName := reloadName(again)
	res := <-answered
	t.Logf("herald reload answered %s after messenger a was killed mid-apply:\n%s", res.at.Sub(at).Round(time.Millisecond), res.out)
	if res.err != nil {
		t.Fatalf("herald reload, when the killed messenger's replacement runs the new file: %v\n%s", res.err, res.out)
	}
	if strings.Contains(res.out, "old") {
		t.Errorf("herald reload says a process runs the old configuration, though every one runs the new file:\n%s", res.out)
	}
	for _, want := range []string{
		`(?m)^` + regexp.QuoteMeta(bName) + ` +applied: integration notes added(; integration log removed)?$`,
		`(?m)^` + regexp.QuoteMeta(aName) + ` +stopped answering while it applied the file \(nothing for [0-9.]+m?s\); ` +
			regexp.QuoteMeta(againName) + ` has started since and runs the new file$`,
	} {
		if !regexp.MustCompile(want).MatchString(res.out) {
			t.Errorf("herald reload does not print %s:\n%s", want, res.out)
		}
	}

	// The fleet now: b and the one started again, two names.
	edit("  - { id: notes, type: log, grants: all }\n  - { id: more, type: log, grants: all }\n")
	out, err := heraldCLI(t, cliEnv, "reload", "--json")
	if err != nil {
		t.Fatalf("herald reload --json: %v\n%s", err, out)
	}
	var rep struct {
		Applies []struct {
			Process string
			Applied bool
		}
		Lost []any
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("herald reload --json printed no JSON object: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, a := range rep.Applies {
		got[a.Process] = a.Applied
	}
	if len(rep.Applies) != 2 || !got[bName] || !got[againName] || len(rep.Lost) != 0 {
		t.Errorf("herald reload --json: applies %+v, lost %v; want %s and %s applied", rep.Applies, rep.Lost, bName, againName)
	}
}
