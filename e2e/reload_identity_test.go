package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/natsauth"
	"github.com/heraldhq/herald/pkg/reload"
	"github.com/heraldhq/herald/services/process"
)

// TestReloadAnswersProveWhoAnswers: under the permissions `herald nats-auth`
// generates, on a real nats-server, butler finance's user answers
// `herald reload` as the switchboard: on the check's reply subject (there
// is none), on the switchboard's and on butler health's answer subjects
// (NATS refuses both), and on its own with a body naming the switchboard
// and an error holding ESC and BEL. The reload is not refused, the forged
// answer is shown as forged (what it says is not printed), and only the
// switchboard is the switchboard. Then finance refuses as itself: that
// holds back only finance, and the others apply the file.
func TestReloadAnswersProveWhoAnswers(t *testing.T) {
	yaml := "butlers:\n  - { name: health }\n  - { name: finance }\nintegrations:\n  - { id: notes, type: log, grants: all }\n"
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	s := runSecureNATS(t, cfg)
	file := filepath.Join(t.TempDir(), "herald.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	sbApplied := serveReloads(s, "switchboard", natsauth.ConnSwitchboard, file, cfg)
	serveReloads(s, "butler-health", natsauth.ConnButler("health"), file, cfg)
	// Each answers as this test's process does: reload.Self.
	switchboard := reload.Self(natsauth.ConnSwitchboard)
	health := reload.Self(natsauth.ConnButler("health"))
	finance := reload.Self(natsauth.ConnButler("finance"))
	forger := forgeReloadAnswers(s, finance, switchboard, health)

	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("operator", s.pw["operator"])
	env := []string{"NATS_URL=" + u.String(), "HERALD_CONFIG=" + file}
	edit := func(more string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(yaml+more), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	edit("  - { id: more, type: log, grants: all }\n")
	out, err := heraldCLI(t, env, "reload", "--wait", "1s")
	if err != nil {
		t.Fatalf("a butler answering as the switchboard refused the reload: %v\n%s", err, out)
	}
	if sbApplied.Load() != 1 {
		t.Errorf("the switchboard applied the file %d times, want once", sbApplied.Load())
	}
	forger.check(t, switchboard, health)
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("herald reload printed raw escapes from the bus:\n%q", out)
	}
	for _, want := range []string{
		`(?m)^` + regexp.QuoteMeta(switchboard.Name()) + ` +applied: integration more added$`,
		`(?m)^` + regexp.QuoteMeta(finance.Name()) + ` +forged, not counted: it says it is ` + regexp.QuoteMeta(switchboard.Name()) + `$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("herald reload does not print %s:\n%s", want, out)
		}
	}
	if strings.Count(out, switchboard.Name()+" ") != 1 {
		t.Errorf("herald reload shows the switchboard more than once:\n%s", out)
	}

	// Finance refuses in its own name: it holds back only itself.
	forger.asItself.Store(true)
	edit("  - { id: most, type: log, grants: all }\n")
	out, err = heraldCLI(t, env, "reload", "--wait", "1s")
	if err == nil || !strings.Contains(err.Error(), "1 process(es) still run on the old configuration: butler finance@itself: I will not") {
		t.Fatalf("finance refusing as itself: %v\n%s", err, out)
	}
	if sbApplied.Load() != 2 || !strings.Contains(out, "applied: integration most added; integration more removed") {
		t.Errorf("finance's own refusal kept the file from the switchboard (applied %d times, want twice):\n%s", sbApplied.Load(), out)
	}
}

// serveReloads answers herald reload from file as the process user runs,
// connected as conn; it counts the files applied.
func serveReloads(s *secureNATS, user, conn, file string, cfg *config.Config) *atomic.Int32 {
	t := s.t
	t.Helper()
	var applied atomic.Int32
	nc, _, _ := s.conn(user, conn)
	err := process.StartReloads(t.Context(), process.ReloadOptions{NC: nc, Process: conn, Path: file, Current: cfg, Getenv: func(string) string { return "" }, Log: quiet(),
		Apply: func(context.Context, *config.Config, []string) error { applied.Add(1); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &applied
}

// reloadForger is a butler's NATS user answering each reload check as
// other processes, and with asItself also refusing in its own name.
type reloadForger struct {
	refused  *refusals
	asItself atomic.Bool

	mu              sync.Mutex
	replies, nonces []string // of the checks it saw
}

// forgeReloadAnswers answers every check as butler (its own user), with a
// body naming the switchboard and an error holding ESC and BEL: on the
// check's reply subject if it has one, and on the answer subjects of
// switchboard, health and itself.
func forgeReloadAnswers(s *secureNATS, butler, switchboard, health reload.Identity) *reloadForger {
	t := s.t
	t.Helper()
	nc, _, refused := s.conn("butler-"+butler.Butler(), butler.Conn)
	f := &reloadForger{refused: refused}
	lie, _ := json.Marshal(reload.Answer{Process: switchboard.Name(), Result: reload.Result{Error: "refused\x1b]0;owned\x07\x1b[2J"}})
	sub, err := nc.Subscribe(reload.CheckSubject, func(m *nats.Msg) {
		var req struct{ Nonce string }
		_ = json.Unmarshal(m.Data, &req)
		f.mu.Lock()
		f.replies, f.nonces = append(f.replies, m.Reply), append(f.nonces, req.Nonce)
		f.mu.Unlock()
		if m.Reply != "" {
			_ = m.Respond(lie)
		}
		for _, as := range []reload.Identity{switchboard, health, butler} {
			_ = nc.Publish(as.Subject(req.Nonce), lie)
		}
		if f.asItself.Load() {
			itself := reload.Identity{Conn: butler.Conn, Instance: "itself"}
			own, _ := json.Marshal(reload.Answer{Process: itself.Name(), Result: reload.Result{Error: "I will not"}})
			_ = nc.Publish(itself.Subject(req.Nonce), own)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

// check: the checks it saw carried no reply subject, and NATS refused its
// answers in the names of others.
func (f *reloadForger) check(t *testing.T, others ...reload.Identity) {
	t.Helper()
	f.mu.Lock()
	replies, nonces := slices.Clone(f.replies), slices.Clone(f.nonces)
	f.mu.Unlock()
	if len(nonces) == 0 {
		t.Fatal("the butler saw no check")
	}
	for _, r := range replies {
		if r != "" {
			t.Errorf("the check carried the reply subject %q, which any user allowed to answer may answer on", r)
		}
	}
	for _, id := range others {
		if subject := id.Subject(nonces[0]); !f.refused.of(subject) {
			t.Errorf("NATS did not refuse the butler's answer on %s", subject)
		}
	}
}
