package butler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler/butlertest"
)

// TestIdleSessionMakesRoom: at max_sessions a new initialize ends the
// session idle longest (not the oldest one: use counts), whose id is then
// 404 for requests and GET streams alike; the others and the new one work.
func TestIdleSessionMakesRoom(t *testing.T) {
	g := startGuarded(t, func(bc *config.Butler) { bc.MaxSessions = 3 })
	s1, s2, s3 := g.open(t), g.open(t), g.open(t)
	s4 := g.open(t)
	if code := g.list(t, s1); code != http.StatusNotFound {
		t.Fatalf("the session idle longest answers %d after a fourth initialize, want 404", code)
	}
	if code := g.get(t, s1); code != http.StatusNotFound {
		t.Fatalf("a GET stream of the ended session: %d, want 404", code)
	}
	for _, s := range []string{s2, s3, s4} { // used in this order: s2 is now idle longest
		if code := g.list(t, s); code != http.StatusOK {
			t.Fatalf("session %s answers %d, want 200", s, code)
		}
	}
	if code := g.list(t, s2); code != http.StatusOK { // s3 is now
		t.Fatalf("s2 answers %d", code)
	}
	s5 := g.open(t)
	for s, want := range map[string]int{s2: http.StatusOK, s3: http.StatusNotFound, s4: http.StatusOK, s5: http.StatusOK} {
		if code := g.list(t, s); code != want {
			t.Errorf("session %s answers %d, want %d", s, code, want)
		}
	}
	if n := strings.Count(g.logs.String(), "closed the MCP session idle longest"); n != 1 {
		t.Errorf("%d log lines for 2 sessions closed to make room, want 1 (the rest counted on the next):\n%s", n, g.logs)
	}
}

// TestBusySessionsAreNotClosed: a session with its GET stream open (a
// connected Claude Code) is never closed to make room; with every session
// busy an initialize is refused with 503 and a JSON-RPC error an MCP client
// shows, naming max_sessions, and logged once however many come. Once a
// stream closes its session can make room.
func TestBusySessionsAreNotClosed(t *testing.T) {
	g := startGuarded(t, func(bc *config.Butler) { bc.MaxSessions = 2 })
	s1, s2 := g.open(t), g.open(t)
	close1 := g.stream(t, s1)
	g.stream(t, s2)
	for range 3 {
		resp, body := post(t, g.url, bearer(g.static), initialize)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("initialize with every session busy: %d, Retry-After %q, session %q; want 503 with Retry-After and no session",
				resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Mcp-Session-Id"))
		}
		var answer mcp.JSONRPCError
		if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.ID.String() != "int64:1" ||
			!strings.Contains(answer.Error.Message, "has 2 MCP sessions open, its max_sessions") ||
			!strings.Contains(answer.Error.Message, "raise max_sessions for butler assistant in herald.yaml") {
			t.Fatalf("503 body %s (%v), want a JSON-RPC error for id 1 saying what to do", body, err)
		}
	}
	// What an MCP client makes of it.
	c, err := client.NewStreamableHttpClient(g.url, transport.WithHTTPHeaders(bearer(g.static)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := butlertest.Initialize(t, c, "2025-06-18", butlertest.Hello{}); err == nil || !strings.Contains(err.Error(), "max_sessions") {
		t.Fatalf("an MCP client's initialize: %v, want an error naming max_sessions", err)
	}
	for _, s := range []string{s1, s2} {
		if code := g.list(t, s); code != http.StatusOK {
			t.Fatalf("busy session %s answers %d after the refusals, want 200", s, code)
		}
	}
	if n := strings.Count(g.logs.String(), "refused a new MCP session"); n != 1 {
		t.Errorf("%d log lines for 4 refused sessions, want 1:\n%s", n, g.logs)
	}

	close1()
	testkit.Eventually(t, 10*time.Second, func() bool {
		resp, _ := post(t, g.url, bearer(g.static), initialize)
		return resp.StatusCode == http.StatusOK
	}, "an initialize to find room once a stream closed")
	if code := g.list(t, s1); code != http.StatusNotFound {
		t.Errorf("the session whose stream closed answers %d, want 404", code)
	}
	if code := g.list(t, s2); code != http.StatusOK {
		t.Errorf("the session still streaming answers %d, want 200", code)
	}
}

// TestIdleSessionIsReaped: a session with no request and no GET stream for
// session_idle_timeout is ended; one with its stream open is not, and once
// its stream closes it is ended in turn.
func TestIdleSessionIsReaped(t *testing.T) {
	const timeout = 500 * time.Millisecond
	g := startGuarded(t, func(bc *config.Butler) { bc.SessionIdleTimeout = config.Duration(timeout) })
	idle := g.open(t)
	listening := g.open(t)
	closeStream := g.stream(t, listening)
	time.Sleep(3 * timeout)
	if code := g.list(t, idle); code != http.StatusNotFound {
		t.Fatalf("a session idle for 3× session_idle_timeout answers %d, want 404", code)
	}
	if code := g.list(t, listening); code != http.StatusOK {
		t.Fatalf("a session with its GET stream open answers %d after 3× session_idle_timeout, want 200", code)
	}
	closeStream()
	time.Sleep(3 * timeout)
	if code := g.list(t, listening); code != http.StatusNotFound {
		t.Fatalf("a session idle since its stream closed answers %d, want 404", code)
	}
	if !strings.Contains(g.logs.String(), "ended an MCP session idle for session_idle_timeout") {
		t.Errorf("no log line for the sessions ended:\n%s", g.logs)
	}
}

// open initializes a session as an MCP client does and returns its id.
func (g *guarded) open(t *testing.T) string {
	t.Helper()
	resp, body := post(t, g.url, bearer(g.static), initialize)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, g.url, g.sessionHeader(id), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
	return id
}

// list asks session id for its tools and returns the status.
func (g *guarded) list(t *testing.T, id string) int {
	t.Helper()
	resp, _ := post(t, g.url, g.sessionHeader(id), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	return resp.StatusCode
}

// get opens session id's GET stream and returns the status, closing it.
func (g *guarded) get(t *testing.T, id string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := g.openStream(t, ctx, id)
	resp.Body.Close()
	return resp.StatusCode
}

// stream opens session id's GET stream, as Claude Code keeps one open; the
// function returned closes it (so does the end of the test).
func (g *guarded) stream(t *testing.T, id string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	resp := g.openStream(t, ctx, id)
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); resp.Body.Close() }) }
	t.Cleanup(stop)
	return stop
}

func (g *guarded) openStream(t *testing.T, ctx context.Context, id string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range g.sessionHeader(id) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (g *guarded) sessionHeader(id string) map[string]string {
	hdr := bearer(g.static)
	hdr["Mcp-Session-Id"] = id
	hdr["Mcp-Protocol-Version"] = "2025-06-18"
	return hdr
}
