package herald

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/web"
)

// dead runs `herald dead args...` with env; the deadline only keeps a
// command that never ends from hanging the suite.
func dead(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code = Main(ctx, append([]string{"dead"}, args...), IO{Getenv: func(k string) string { return env[k] }, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	if ctx.Err() != nil {
		t.Fatalf("herald dead %s did not end by itself", strings.Join(args, " "))
	}
	return code, out.String(), errOut.String()
}

// TestDeadReplayRefusedAgain: on a real fleet, a notify to a web visitor
// that does not exist is dead-lettered; replayed, it is refused again at
// once, and the replay says so, with its new ID, and exits 1. (It once
// printed "Replayed 1." and exited 0.)
func TestDeadReplayRefusedAgain(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.NATS.Listen, cfg.NATS.StoreDir, cfg.HTTPListen = "127.0.0.1:0", filepath.Join(dir, "nats"), "127.0.0.1:0"
	cfg.Butlers[0].MCPHTTP = "127.0.0.1:0"
	cfg.Integration("web").Settings.(*web.Config).Listen = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(t.Context())
	ready, done := make(chan Endpoints, 1), make(chan error, 1)
	go func() {
		done <- Dev(ctx, DevOptions{Config: cfg, Getenv: noEnv, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Out: io.Discard, Ready: func(ep Endpoints) { ready <- ep }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("herald dev did not stop cleanly: %v", err)
		}
	})
	var ep Endpoints
	select {
	case ep = <-ready:
	case err := <-done:
		t.Fatalf("herald dev stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("herald dev did not become ready")
	}
	tok, err := os.ReadFile(DevTokenFile(cfg, "assistant"))
	if err != nil {
		t.Fatal(err)
	}
	var answer bytes.Buffer
	err = Notify(t.Context(), NotifyArgs{URL: ep.Butlers["assistant"], Token: strings.TrimSpace(string(tok)), Channel: "web", Recipient: "nobody", Message: "to nobody"}, &answer)
	if !errors.Is(err, ErrNotifyFailed) {
		t.Fatalf("a notify to a web visitor that does not exist: %v\n%s", err, answer.String())
	}
	nc, err := nats.Connect(ep.NATS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	letters := func(n int) []bus.DeadLetter {
		t.Helper()
		var dead []bus.DeadLetter
		if !testkit.Poll(20*time.Second, 50*time.Millisecond, func() bool {
			dead, err = bus.DeadLetters(t.Context(), js)
			return err == nil && len(dead) == n
		}) {
			t.Fatalf("dead letters: %+v, %v; want %d", dead, err, n)
		}
		return dead
	}
	first := letters(1)[0]
	if first.RequestID == "" {
		t.Fatalf("the dead letter names no request: %+v", first)
	}

	env := map[string]string{"NATS_URL": ep.NATS}
	code, stdout, stderr := dead(t, env, "replay", fmt.Sprint(first.ID))
	again := letters(1)[0]
	if again.ID == first.ID || again.RequestID != first.RequestID || again.Error == "" {
		t.Fatalf("after the replay: %+v; want the same request dead-lettered anew", again)
	}
	want := fmt.Sprintf("%d: refused again: %s; it is back in herald dead ls as %d\n", first.ID, again.Error, again.ID)
	if code != 1 || stdout != want || stderr != "herald dead: the replayed message failed again\n" {
		t.Errorf("herald dead replay %d exited %d\nstdout %q\nwant   %q\nstderr %q", first.ID, code, stdout, want, stderr)
	}

	// --json: one object, the same facts.
	code, stdout, _ = dead(t, env, "replay", "--json", fmt.Sprint(again.ID))
	third := letters(1)[0]
	want = fmt.Sprintf(`{"id":%d,"request_id":%q,"outcome":"refused_again","class":%q,"reason":%q,"dead_id":%d,"followed":true}`+"\n",
		again.ID, first.RequestID, third.Class, third.Error, third.ID)
	if code != 1 || stdout != want {
		t.Errorf("herald dead replay --json exited %d\nstdout %q\nwant   %q", code, stdout, want)
	}
}

// TestDeadReplayOutcomes: as the operator's NATS user, a replay follows
// each message it put back in the audit log and says what became of it:
// delivered (its channel and delivery), failed (and not dead-lettered
// again) with the class and the reason, or nothing yet within --wait,
// with the command that follows it. The outcomes are written here as the
// messenger writes them.
func TestDeadReplayOutcomes(t *testing.T) {
	url, pw := secureBus(t)
	messenger := connAs(t, url, "messenger", pw["messenger"], "messenger")
	for _, id := range []string{"r-delivered", "r-failed", "r-silent"} {
		subject := bus.DeliverSubject("log.log")
		h := nats.Header{}
		h.Set(bus.HeaderSubject, subject)
		h.Set(bus.HeaderError, "target_unavailable: log: disk full")
		h.Set(bus.HeaderErrorClass, "target_unavailable")
		h.Set(bus.HeaderDeliveries, "3")
		data := fmt.Appendf(nil, `{"request_context":{"request_id":%q}}`, id)
		if _, err := messenger.PublishMsg(t.Context(), &nats.Msg{Subject: bus.DeadSubject(bus.StreamDeliver, subject), Header: h, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	w := &audit.Writer{JS: messenger, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	// Once the three are back on their queue, what the messenger would
	// write of two of them.
	go func() {
		if !testkit.Poll(30*time.Second, 20*time.Millisecond, func() bool { return queued(messenger) == 3 }) {
			return // the replay did not put them back: its output says so
		}
		w.Write(t.Context(), audit.Record{Kind: audit.Delivered, Butler: "health", Channel: "log:log", RequestID: "r-delivered", DeliveryID: "dlv_0a1b2c"})
		w.Write(t.Context(), audit.Record{Kind: audit.Failed, Butler: "health", Channel: "log:log", RequestID: "r-failed", Class: "target_unavailable", Reason: "log: disk full"})
		w.Flush()
	}()

	op := strings.Replace(url, "nats://", "nats://operator:"+pw["operator"]+"@", 1)
	code, stdout, stderr := dead(t, map[string]string{"NATS_URL": op}, "replay", "--all", "--wait", "4s")
	want := `1: delivered on log:log (delivery dlv_0a1b2c)
2: failed: target_unavailable: log: disk full
3: put back on its queue; no outcome within 4s (herald log --request-id r-silent follows it)
`
	if diff := cmp.Diff(want, stdout); diff != "" || code != 1 || stderr != "herald dead: 1 of the 3 replayed messages failed again\n" {
		t.Errorf("herald dead replay --all exited %d, stderr %q; stdout (-want +got):\n%s", code, stderr, diff)
	}
}

// queued is how many messages HERALD_DELIVER holds, as the messenger may
// ask.
func queued(js jetstream.JetStream) uint64 {
	s, err := js.Stream(context.Background(), bus.StreamDeliver)
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.State.Msgs
}
