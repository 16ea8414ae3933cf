package reload_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/reload"
	"github.com/heraldhq/herald/pkg/testkit"
)

const base = `
butlers:
  - { name: health, default_channel: log }
integrations:
  - { id: audit_log, type: log, grants: all }
`

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChangesLinesMoved: a file whose lines only moved (a comment added
// above a butler's run block) changes nothing; a changed run key does.
func TestChangesLinesMoved(t *testing.T) {
	dir := t.TempDir()
	file := func(top string) string {
		return top + `butlers:
  - name: health
    run:
      command: /bin/sh
      dir: ` + dir + `
integrations:
  - { id: audit_log, type: log, grants: all }
`
	}
	before, after := parse(t, file("")), parse(t, file("# the health butler, started by a message\n\n"))
	if got := reload.Changes(before, after); len(got) != 0 {
		t.Errorf("Changes of a file whose lines moved = %q, want none", got)
	}
	changed := parse(t, strings.Replace(file(""), "/bin/sh", "/bin/true", 1))
	if got := reload.Changes(before, changed); !slices.Equal(got, []string{"butler health: run changed"}) {
		t.Errorf("Changes of a new run command = %q", got)
	}
}

// TestChanges names what a new file changes by key and id, never a value.
func TestChanges(t *testing.T) {
	changed := base + `
  - { id: hooks, type: log, grants: [health] }
bindings:
  - { integration: audit_log, butler: health }
notify_timeout: 10s
http_listen: 127.0.0.1:9999
`
	changed = strings.Replace(changed, "{ name: health, default_channel: log }", "{ name: health, default_channel: log, max_sessions: 5 }\n  - { name: garden, mcp_http: \"127.0.0.1:7777\" }", 1)
	got := reload.Changes(parse(t, base), parse(t, changed))
	want := []string{"notify_timeout changed", "http_listen changed", "butler health: max_sessions changed", "butler garden added", "integration hooks added", "bindings changed"}
	if !slices.Equal(got, want) {
		t.Fatalf("Changes = %q, want %q", got, want)
	}
	for _, c := range got {
		if strings.Contains(c, "7777") || strings.Contains(c, "9999") {
			t.Errorf("a change names a value: %s", c)
		}
	}
	if r := reload.Restart(got); !slices.Equal(r, []string{"http_listen changed", "butler health: max_sessions changed"}) {
		t.Errorf("Restart = %q", r)
	}
	if r := reload.Restart([]string{"butler health: default_channel, mcp_http, allowed_hosts changed"}); !slices.Equal(r, []string{"butler health: mcp_http, allowed_hosts changed"}) {
		t.Errorf("Restart of a butler's keys = %q, want only those its MCP server was built with", r)
	}
	back := reload.Changes(parse(t, changed), parse(t, base))
	for _, w := range []string{"butler garden removed", "integration hooks removed"} {
		if !slices.Contains(back, w) {
			t.Errorf("Changes back = %q, want %q among them", back, w)
		}
	}
	if c := reload.Changes(parse(t, base), parse(t, base)); len(c) != 0 {
		t.Errorf("the same file changes %q", c)
	}
}

// applied records what a Watcher applied.
type applied struct {
	mu      sync.Mutex
	changes [][]string
	audited [][]string
}

func (a *applied) apply(_ context.Context, _ *config.Config, c []string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.changes = append(a.changes, c)
	return nil
}

func (a *applied) audit(_ context.Context, c []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.audited = append(a.audited, c)
}

func (a *applied) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.changes)
}

func newWatcher(t *testing.T) (*reload.Watcher, string, *applied) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herald.yaml")
	if err := os.WriteFile(path, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &applied{}
	w := reload.New(reload.Options{Path: path, Current: parse(t, base), Apply: a.apply, Audited: a.audit})
	return w, path, a
}

// TestAnInvalidFileKeepsTheRunningConfig: a file with a mistake is refused,
// naming the file and the line, and nothing is applied.
func TestAnInvalidFileKeepsTheRunningConfig(t *testing.T) {
	w, path, a := newWatcher(t)
	before := w.Current()
	bad := base + "  - { id: x, type: log, grants: all, colour: red }\n"
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	res := w.Reload(t.Context(), "test", "")
	if res.Applied || !strings.Contains(res.Error, path) || !strings.Contains(res.Error, "line 6") || !strings.Contains(res.Error, "colour") {
		t.Fatalf("Reload of an invalid file: %+v, want refused naming %s, line 6 and the key", res, path)
	}
	if w.Current() != before || a.count() != 0 {
		t.Fatal("an invalid file was applied")
	}
}

// TestAChangedFileIsApplied: with watch on, writing the file applies it
// within seconds, audited with what changed; a file checked with one hash
// is not applied if it changed since.
func TestAChangedFileIsApplied(t *testing.T) {
	w, path, a := newWatcher(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx, true) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // Run has read the file as it starts
	more := strings.Replace(base, "{ name: health, default_channel: log }", "{ name: health, default_channel: log }\n  - { name: garden }", 1)
	if err := os.WriteFile(path, []byte(more), 0o600); err != nil {
		t.Fatal(err)
	}
	// Applied, then audited: wait for the audit record, which comes last.
	if !testkit.Poll(5*time.Second, testkit.Interval, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return len(a.audited) > 0 }) {
		t.Fatalf("the changed file was not applied and audited within 5 s (applied %d)", a.count())
	}
	a.mu.Lock()
	if len(a.changes) != 1 || !slices.Equal(a.changes[0], []string{"butler garden added"}) || len(a.audited) != 1 {
		t.Errorf("applied %q, audited %q", a.changes, a.audited)
	}
	a.mu.Unlock()
	if w.Current().Butler("garden") == nil {
		t.Error("Current does not have the new butler")
	}

	_, checked := w.Check()
	if err := os.WriteFile(path, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if res := w.Reload(t.Context(), "test", checked.Hash); res.Applied || !strings.Contains(res.Error, "changed after it was checked") {
		t.Errorf("a reload of a file that changed since its check: %+v", res)
	}
}

// TestAFileChangedWhileStartingIsApplied: a change written after the
// process loaded its file and before the watcher ran is applied at its
// first look; before, the watcher took the changed file as its baseline
// and the change waited for the next edit.
func TestAFileChangedWhileStartingIsApplied(t *testing.T) {
	w, path, a := newWatcher(t)
	more := strings.Replace(base, "default_channel: log }", "default_channel: log, max_sessions: 7 }", 1)
	if err := os.WriteFile(path, []byte(more), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx, true) }()
	defer func() { cancel(); <-done }()
	if !testkit.Poll(5*time.Second, testkit.Interval, func() bool { return a.count() > 0 }) {
		t.Fatal("the file changed while the process started was not applied within 5 s")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.changes) != 1 || !slices.Equal(a.changes[0], []string{"butler health: max_sessions changed"}) {
		t.Errorf("applied %q, want the one change", a.changes)
	}
}

// TestAnUnchangedFileIsNotApplied: watching a file nobody edits applies
// nothing and audits nothing.
func TestAnUnchangedFileIsNotApplied(t *testing.T) {
	w, _, a := newWatcher(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*reload.PollEvery+500*time.Millisecond)
	defer cancel()
	w.Run(ctx, true)
	if a.count() != 0 {
		t.Errorf("an unchanged file applied %q", a.changes)
	}
}

// TestSIGHUPReloads: SIGHUP applies the file without watching it.
func TestSIGHUPReloads(t *testing.T) {
	w, path, a := newWatcher(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx, false) }()
	defer func() { cancel(); <-done }()
	more := strings.Replace(base, "default_channel: log }", "default_channel: log, max_sessions: 7 }", 1)
	if err := os.WriteFile(path, []byte(more), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * reload.PollEvery)
	if a.count() != 0 {
		t.Fatal("applied without watching and without SIGHUP")
	}
	if !testkit.Poll(5*time.Second, 100*time.Millisecond, func() bool {
		if a.count() > 0 {
			return true
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		return false
	}) {
		t.Fatal("SIGHUP did not reload within 5 s")
	}
}

// fleetRig runs processes that answer `herald reload` on one NATS
// connection, each with its own file.
type fleetRig struct {
	t   *testing.T
	nc  *nats.Conn
	dir string
}

func newFleetRig(t *testing.T) *fleetRig {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	return &fleetRig{t: t, nc: nc, dir: t.TempDir()}
}

// serve answers as conn@host from its file, written with base.
func (f *fleetRig) serve(conn string) (file string, a *applied) {
	t := f.t
	t.Helper()
	file = filepath.Join(f.dir, strings.ReplaceAll(conn, ".", "_")+".yaml")
	f.write(base, file)
	a = &applied{}
	w := reload.New(reload.Options{Path: file, Current: parse(t, base), Apply: a.apply})
	stop, err := reload.Serve(f.nc, reload.Identity{Conn: conn, Instance: "host"}, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return file, a
}

func (f *fleetRig) write(yaml string, files ...string) {
	f.t.Helper()
	for _, p := range files {
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			f.t.Fatal(err)
		}
	}
}

// more is base with a butler added: a change every process applies.
var more = strings.Replace(base, "{ name: health, default_channel: log }", "{ name: health, default_channel: log }\n  - { name: garden }", 1)

// TestFleetAppliesOnlyWhatEveryProcessTakes: `herald reload` over a real
// NATS server: when every process can take the file, each applies it; when
// a service cannot, none does, and the answer names that one and why; when
// a butler cannot, it alone keeps its configuration.
func TestFleetAppliesOnlyWhatEveryProcessTakes(t *testing.T) {
	f := newFleetRig(t)
	sbFile, sb := f.serve("switchboard")
	msFile, ms := f.serve("messenger")
	own, bt := f.serve("butler.health")
	counts := func() [3]int { return [3]int{sb.count(), ms.count(), bt.count()} }

	f.write(more, sbFile, msFile, own)
	rep, err := reload.Fleet(t.Context(), f.nc, time.Second)
	if err != nil || len(rep.Checks) != 3 || len(rep.Applies) != 3 || counts() != [3]int{1, 1, 1} {
		t.Fatalf("Fleet: %v; %+v; applied %v, want each once", err, rep, counts())
	}
	for i, want := range []string{"butler health@host", "messenger@host", "switchboard@host"} {
		if rep.Applies[i].Process != want || !rep.Applies[i].Applied {
			t.Errorf("apply %d: %+v, want %s applied", i, rep.Applies[i], want)
		}
	}

	// The switchboard's copy breaks: nobody applies the next change.
	f.write(base, msFile, own)
	f.write(base+"  - { id: x, type: nope }\n", sbFile)
	rep, err = reload.Fleet(t.Context(), f.nc, time.Second)
	var refused *reload.RefusedError
	if !errors.As(err, &refused) || refused.Applying || len(refused.Processes) != 1 || !strings.HasPrefix(refused.Processes[0], "switchboard@host: ") || rep.Asked {
		t.Fatalf("Fleet with the switchboard's file bad: %v, %+v; want it named and nothing applied", err, rep)
	}
	if counts() != [3]int{1, 1, 1} {
		t.Errorf("applied %v after a service refused, want each still once", counts())
	}

	// The butler's copy breaks: the services apply the change, the butler
	// keeps its configuration and is named.
	f.write(base, sbFile)
	f.write(base+"  - { id: x, type: nope }\n", own)
	rep, err = reload.Fleet(t.Context(), f.nc, time.Second)
	if !errors.As(err, &refused) || !refused.Applying || len(refused.Processes) != 1 || !strings.HasPrefix(refused.Processes[0], "butler health@host: ") || len(rep.Applies) != 2 {
		t.Fatalf("Fleet with the butler's file bad: %v, %+v; want the services to apply and the butler named", err, rep)
	}
	if counts() != [3]int{2, 2, 1} {
		t.Errorf("applied %v, want the services twice and the butler once", counts())
	}
}

// TestAnswersAreNamedByTheirSubject: an answer counts under the name its
// subject proves. One whose body names another process (a butler saying it
// is the switchboard, refusing), one that is no answer, and one on a
// subject naming no process count for nothing; the requests carry no reply
// subject to answer on.
func TestAnswersAreNamedByTheirSubject(t *testing.T) {
	f := newFleetRig(t)
	sbFile, sb := f.serve("switchboard")
	var replies []string
	var mu sync.Mutex
	forge, err := f.nc.Subscribe(reload.CheckSubject, func(m *nats.Msg) {
		var req struct{ Nonce string }
		_ = json.Unmarshal(m.Data, &req)
		mu.Lock()
		replies = append(replies, m.Reply)
		mu.Unlock()
		lie, _ := json.Marshal(reload.Answer{Process: "switchboard@host", Result: reload.Result{Error: "refused\x1b]0;owned\x07"}})
		_ = f.nc.Publish(reload.Identity{Conn: "butler.evil", Instance: "host"}.Subject(req.Nonce), lie)
		_ = f.nc.Publish(reload.Identity{Conn: "butler.evil", Instance: "other"}.Subject(req.Nonce), []byte("not json"))
		_ = f.nc.Publish("herald.control.reload.answer."+req.Nonce+".a.b.c.host", lie)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = forge.Unsubscribe() })

	f.write(more, sbFile)
	rep, err := reload.Fleet(t.Context(), f.nc, time.Second)
	if err != nil || sb.count() != 1 {
		t.Fatalf("Fleet with forged answers: %v; %+v; the switchboard applied %d times, want once", err, rep, sb.count())
	}
	forged := map[string]string{}
	for _, c := range rep.Checks {
		if c.Forged != "" {
			forged[c.Process] = c.Forged
			if c.Error != "" || c.Hash != "" {
				t.Errorf("a forged answer keeps what it said: %+v", c)
			}
		}
	}
	want := map[string]string{
		"butler evil@host":  "it says it is switchboard@host",
		"butler evil@other": "not a reload answer",
		"a.b.c.host":        "its subject names no Herald process",
	}
	if len(forged) != len(want) {
		t.Errorf("forged answers %q, want %q", forged, want)
	}
	for name, why := range want {
		if forged[name] != why {
			t.Errorf("%s: forged %q, want %q", name, forged[name], why)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(replies) == 0 || slices.ContainsFunc(replies, func(r string) bool { return r != "" }) {
		t.Errorf("the checks' reply subjects %q, want none", replies)
	}
}

// TestALostProcessIsNamedAndWhatRunsInItsPlace: two messengers under one
// name on one host answer as two processes. One loses NATS while it
// applies the file (as a SIGKILL would end it): within Silence the fleet
// names it, and then says what is true: a messenger started since on the
// new file runs it, and the reload is not refused; with none started, it
// says that none runs in its place, and the reload is.
func TestALostProcessIsNamedAndWhatRunsInItsPlace(t *testing.T) {
	srv := bustest.RunServer(t)
	f := newFleetRig(t)
	f.nc, _ = srv.Connect()
	for _, comesBack := range []bool{true, false} {
		name := map[bool]string{true: "one starts in its place", false: "none starts in its place"}[comesBack]
		t.Run(name, func(t *testing.T) {
			f.t = t
			survivor := reload.Identity{Conn: "messenger", Instance: "host-101-aaaaaa"}
			dying := reload.Identity{Conn: "messenger", Instance: "host-102-bbbbbb"}
			file := filepath.Join(t.TempDir(), "herald.yaml")
			f.write(base, file)
			serveAs := func(id reload.Identity, current string, apply func(*nats.Conn) func(context.Context, *config.Config, []string) error) {
				nc, _ := srv.Connect()
				w := reload.New(reload.Options{Path: file, Current: parse(t, current), Apply: apply(nc)})
				stop, err := reload.Serve(nc, id, w)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(stop)
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			ok := &applied{}
			applies := func(*nats.Conn) func(context.Context, *config.Config, []string) error { return ok.apply }
			serveAs(survivor, base, applies)
			// The dying one is gone from NATS once it begins to apply; one
			// started in its place runs on the file as it is then.
			serveAs(dying, base, func(nc *nats.Conn) func(context.Context, *config.Config, []string) error {
				return func(ctx context.Context, _ *config.Config, _ []string) error {
					nc.Close() // it says nothing more, beats included
					if comesBack {
						serveAs(reload.Identity{Conn: "messenger", Instance: "host-103-cccccc"}, more, applies)
					}
					<-ctx.Done()
					return ctx.Err()
				}
			})
			f.write(more, file)
			started := time.Now()
			rep, err := reload.Fleet(t.Context(), f.nc, time.Second)
			took := time.Since(started)
			t.Logf("Fleet answered in %s", took.Round(time.Millisecond))
			if len(rep.Lost) != 1 || rep.Lost[0].Process != dying.Name() || !rep.Lost[0].Applying {
				t.Fatalf("lost %+v, want %s, lost while applying; err %v", rep.Lost, dying.Name(), err)
			}
			if len(rep.Applies) != 1 || rep.Applies[0].Process != survivor.Name() || !rep.Applies[0].Applied {
				t.Errorf("applies %+v, want %s's", rep.Applies, survivor.Name())
			}
			l := rep.Lost[0]
			var refused *reload.RefusedError
			if comesBack {
				if err != nil || l.Now == nil || l.Now.Process != "messenger@host-103-cccccc" || !l.RunsNew {
					t.Fatalf("Fleet: %v; lost %+v, want messenger@host-103-cccccc in its place on the new file", err, l)
				}
				if want := "messenger@host-103-cccccc has started since and runs the new file"; !strings.Contains(l.What(), want) {
					t.Errorf("What() = %q, want it to say %q", l.What(), want)
				}
				return
			}
			if !errors.As(err, &refused) || len(refused.Lost) != 1 || len(refused.Processes) != 0 || strings.Contains(err.Error(), "old configuration") {
				t.Fatalf("Fleet: %v, want %s named as lost, none said to run the old file", err, dying.Name())
			}
			if want := "no messenger has answered since"; !strings.Contains(err.Error(), want) || l.Now != nil {
				t.Errorf("Fleet: %v; lost %+v; want it to say %q", err, l, want)
			}
		})
	}
}

// TestSelfTellsProcessesApart: Self's instance is the host, the pid and a
// tag; Host reads the host back, also of an older process's bare host.
func TestSelfTellsProcessesApart(t *testing.T) {
	id := reload.Self("messenger")
	host, _ := os.Hostname()
	if want := regexp.MustCompile(`^messenger@[A-Za-z0-9_-]+-` + strconv.Itoa(os.Getpid()) + `-[0-9a-f]{6}$`); !want.MatchString(id.Name()) {
		t.Errorf("Self = %s, want messenger@<host>-<pid>-<tag>", id.Name())
	}
	if host != "" && !strings.Contains(host, ".") && id.Host() != host {
		t.Errorf("Host() = %q, want %q", id.Host(), host)
	}
	if old := (reload.Identity{Conn: "messenger", Instance: "web-1"}); old.Host() != "web-1" {
		t.Errorf("an older process's Host() = %q, want web-1", old.Host())
	}
}
