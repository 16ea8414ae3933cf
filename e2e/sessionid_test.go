package e2e

import (
	"context"
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
)

// stdioRun is one run of a butler over stdio, as a `claude` run starts it
// from .mcp.json: a butler of its own (a process) and its one client.
type stdioRun struct {
	c    *butlertest.Client
	stop func()
}

func (f *fleet) stdioRun(name string) *stdioRun {
	f.t.Helper()
	b, err := butler.New(context.Background(), butler.Options{Name: name, Config: f.cfg, NC: f.nc, Log: f.logger(), Timeout: f.timeout, Getenv: f.getenv})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	done := make(chan struct{})
	go func() { _ = b.ServeStdio(ctx, serverIn, serverOut); close(done) }()
	c := butlertest.ConnectIO(f.t, clientIn, clientOut, "2025-06-18", butlertest.Hello{})
	r := &stdioRun{c: c}
	r.stop = func() {
		cancel()
		_ = clientOut.Close()
		_ = serverOut.Close()
		<-done
	}
	f.t.Cleanup(r.stop)
	return r
}

// TestStdioGrantIsOneRuns: "Allow for this session" tapped for a butler run
// over stdio covers that run only. mcp-go names every stdio session
// "stdio", so a grant keyed on it was honoured in every later run, for
// grant_ttl; each run now is a session of its own.
func TestStdioGrantIsOneRuns(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")

	first := f.stdioRun("health")
	askPermission(t, first.c, "abcde", "Read", "Read a file")
	copies := f.promptCopies("abcde", alice.ID)
	f.tg.PressButton(f.tg.Token(), alice.ID, copies[alice.ID], alice, "perm:session:abcde")
	if got := first.c.Wait(butler.MethodPermission, 1); got[0]["request_id"] != "abcde" || got[0]["behavior"] != "allow" {
		t.Fatalf("verdict %v", got[0])
	}
	// Within the run, the grant answers the next request at once.
	askPermission(t, first.c, "fghij", "Read", "Read another file")
	if got := first.c.Wait(butler.MethodPermission, 2); got[1]["request_id"] != "fghij" || got[1]["behavior"] != "allow" {
		t.Fatalf("the granted run's next request: %v", got[1])
	}
	if n := sentContaining(f, `"yes fghij"`); n != 0 {
		t.Fatalf("the granted run's next request was sent to the approver (%d)", n)
	}
	first.stop()

	// A new run is asked again.
	second := f.stdioRun("health")
	askPermission(t, second.c, "qwert", "Read", "Read a file")
	testkit.Eventually(t, 15*time.Second, func() bool { return sentContaining(f, `"yes qwert"`) == 1 }, "the new run's request to reach the approver")
	if got := second.c.Notifications(butler.MethodPermission); len(got) != 0 {
		t.Fatalf("a new stdio run was allowed by the last run's grant: %v", got)
	}
}

// TestRecordsHoldNoSessionID: what outlives a call names its MCP session by
// a tag, never by the session id, which a butler's NATS user could read back
// and forge a record for a live session with.
func TestRecordsHoldNoSessionID(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	sid := c.GetSessionId()
	if sid == "" {
		t.Fatal("no MCP session id")
	}
	askPermission(t, c, "abcde", "Bash", "List files")
	f.promptCopies("abcde", alice.ID)
	store, err := approval.Open(t.Context(), f.js)
	if err != nil {
		t.Fatal(err)
	}
	req, err := store.Get(t.Context(), "health", "abcde")
	if err != nil {
		t.Fatal(err)
	}
	tag := regexp.MustCompile(`^[0-9a-f]{16}$`)
	if req.Session == sid || !tag.MatchString(req.Session) {
		t.Errorf("the prompt names its session %q (the session id is %q), want a tag", req.Session, sid)
	}
	res := c.Call("ask", map[string]any{"question": "Tea or coffee?", "options": []any{"tea", "coffee"}})
	if res.IsError {
		t.Fatalf("ask: %s", text(res))
	}
	q, err := store.Question(t.Context(), "health", res.StructuredContent.(map[string]any)["question_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if q.Session == sid || !tag.MatchString(q.Session) {
		t.Errorf("the question names its session %q (the session id is %q), want a tag", q.Session, sid)
	}
}
