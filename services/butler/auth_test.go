package butler_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/pkg/token"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
)

// guarded is a butler behind its real HTTP handler, with a static token
// from mcp_token_env, allowed_hosts, and the herald_tokens bucket of its NATS.
type guarded struct {
	b      *butler.Butler
	url    string // the /mcp endpoint
	static string
	tokens *token.Store
	logs   *testkit.Buffer
}

// startGuarded starts a guarded butler; each of with changes its
// configuration first.
func startGuarded(t *testing.T, with ...func(*config.Butler)) *guarded {
	t.Helper()
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	cfg := config.Default()
	cfg.Butlers[0].MCPTokenEnv = "ASSISTANT_MCP_TOKEN"
	cfg.Butlers[0].AllowedHosts = []string{"MCP.example.org"}
	for _, f := range with {
		f(&cfg.Butlers[0])
	}
	g := &guarded{static: token.NewStatic(), logs: &testkit.Buffer{}}
	getenv := func(k string) string {
		if k == "ASSISTANT_MCP_TOKEN" {
			return g.static
		}
		return ""
	}
	var err error
	g.b, err = butler.New(t.Context(), butler.Options{Name: "assistant", Config: cfg, NC: nc, Getenv: getenv, Log: slog.New(slog.NewTextHandler(g.logs, nil)), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if g.tokens, err = token.Open(t.Context(), js); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(g.b.Handler())
	t.Cleanup(hs.Close)
	g.url = hs.URL + butler.MCPPath
	return g
}

func (g *guarded) mint(t *testing.T, name string, ttl time.Duration) (string, token.Record) {
	t.Helper()
	tok, rec, err := g.tokens.Mint(t.Context(), name, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok, rec
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`

// post sends an MCP request and returns the response, its body read.
func post(t *testing.T, url string, hdr map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// TestMCPNeedsAValidToken: every MCP request carries the butler's static
// token or a token minted for it; anything else is 401 and nothing else.
func TestMCPNeedsAValidToken(t *testing.T) {
	g := startGuarded(t)
	minted, _ := g.mint(t, "assistant", 0)
	foreign, _ := g.mint(t, "finance", 0)
	tests := []struct {
		name string
		auth string // the Authorization header; "" sends none
		want int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"empty bearer", "Bearer ", http.StatusUnauthorized},
		{"basic auth", "Basic YXNzaXN0YW50OnB3", http.StatusUnauthorized},
		{"wrong static token", "Bearer " + token.NewStatic(), http.StatusUnauthorized},
		{"static token as a prefix", "Bearer " + g.static[:len(g.static)-1], http.StatusUnauthorized},
		{"token minted for another butler", "Bearer " + foreign, http.StatusUnauthorized},
		{"minted token with its secret changed", "Bearer " + minted[:len(minted)-4] + "AAAA", http.StatusUnauthorized},
		{"static token", "Bearer " + g.static, http.StatusOK},
		{"scheme in lower case", "bearer " + g.static, http.StatusOK},
		{"minted token", "Bearer " + minted, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.auth != "" {
				hdr["Authorization"] = tt.auth
			}
			resp, body := post(t, g.url, hdr, initialize)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tt.want)
			}
			if tt.want != http.StatusUnauthorized {
				return
			}
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("WWW-Authenticate %q, want a Bearer challenge", resp.Header.Get("WWW-Authenticate"))
			}
			if strings.Contains(body, "jsonrpc") || resp.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("a refused request reached MCP: %q", body)
			}
			// The body says how to fix it, and names no butler to a caller
			// that has shown no token.
			for _, fix := range []string{`--header "Authorization: Bearer <token>"`, "mcp_token_env", "herald token mint --butler <name>"} {
				if !strings.Contains(body, fix) {
					t.Errorf("401 body %q does not say %q", body, fix)
				}
			}
			if strings.Contains(body, "assistant") {
				t.Errorf("401 body %q names the butler", body)
			}
		})
	}
}

// TestMintedTokenWorksWithAnMCPClient: what `claude mcp add --header` does.
func TestMintedTokenWorksWithAnMCPClient(t *testing.T) {
	g := startGuarded(t)
	tok, _ := g.mint(t, "assistant", 0)
	c, err := client.NewStreamableHttpClient(g.url, transport.WithHTTPHeaders(bearer(tok)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := butlertest.Initialize(t, c, "2025-11-25", butlertest.Hello{}); err != nil {
		t.Fatal(err)
	}
	if tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v, %v", tools, err)
	}

	c, err = client.NewStreamableHttpClient(g.url) // no token
	if err != nil {
		t.Fatal(err)
	}
	if _, err := butlertest.Initialize(t, c, "2025-11-25", butlertest.Hello{}); err == nil || !strings.Contains(err.Error(), "authorization required") {
		t.Fatalf("initialize without a token: %v", err)
	}
}

// TestRevokedTokenRefused: a revoked token stops working within the butler's
// cache time.
func TestRevokedTokenRefused(t *testing.T) {
	g := startGuarded(t)
	tok, rec := g.mint(t, "assistant", 0)
	if resp, body := post(t, g.url, bearer(tok), initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("before revoking: %d %s", resp.StatusCode, body)
	}
	if _, err := g.tokens.Revoke(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	for {
		resp, _ := post(t, g.url, bearer(tok), initialize)
		if resp.StatusCode == http.StatusUnauthorized {
			break
		}
		if time.Since(revoked) > butler.TokenCacheFor+2*time.Second {
			t.Fatalf("still %d %s after revoking", resp.StatusCode, time.Since(revoked))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestExpiredTokenRefused(t *testing.T) {
	g := startGuarded(t)
	tok, rec := g.mint(t, "assistant", 1500*time.Millisecond)
	if resp, body := post(t, g.url, bearer(tok), initialize); resp.StatusCode != http.StatusOK {
		t.Fatalf("before expiry: %d %s", resp.StatusCode, body)
	}
	time.Sleep(time.Until(rec.Expires) + 50*time.Millisecond)
	resp, _ := post(t, g.url, bearer(tok), initialize)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "invalid_token") {
		t.Fatalf("after expiry: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// TestForeignHostAndOriginRefused: a page that rebinds its name to the
// butler's address, or drives it from another site, gets nothing, token or
// not.
func TestForeignHostAndOriginRefused(t *testing.T) {
	g := startGuarded(t)
	tests := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"rebound name", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest},
		{"rebound name with port", map[string]string{"Host": "evil.example:7701"}, http.StatusMisdirectedRequest},
		{"loopback name", map[string]string{"Host": "localhost:7701"}, http.StatusOK},
		{"IPv6 loopback", map[string]string{"Host": "[::1]:7701"}, http.StatusOK},
		{"allowed_hosts, any case", map[string]string{"Host": "mcp.EXAMPLE.org."}, http.StatusOK},
		{"another site's page", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"sandboxed page", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"local tool's page", map[string]string{"Origin": "http://localhost:6274"}, http.StatusOK},
		{"page on an allowed host", map[string]string{"Origin": "https://mcp.example.org"}, http.StatusOK},
	}
	for _, tt := range tests {
		for _, auth := range []string{"with token", "without token"} {
			t.Run(tt.name+"/"+auth, func(t *testing.T) {
				hdr := map[string]string{}
				for k, v := range tt.hdr {
					hdr[k] = v
				}
				want := tt.want
				if auth == "with token" {
					hdr["Authorization"] = "Bearer " + g.static
				} else if want == http.StatusOK {
					want = http.StatusUnauthorized
				}
				if resp, body := post(t, g.url, hdr, initialize); resp.StatusCode != want {
					t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, want)
				}
			})
		}
	}
}

// TestHealthEndpointsCheckHost: /healthz and /readyz beside the MCP
// endpoint need no token, but answer a rebound name nothing.
func TestHealthEndpointsCheckHost(t *testing.T) {
	g := startGuarded(t)
	base := strings.TrimSuffix(g.url, butler.MCPPath)
	for _, path := range []string{"/healthz", "/readyz"} {
		for host, refused := range map[string]bool{"evil.example": true, "localhost": false, "mcp.example.org": false} {
			req, err := http.NewRequest(http.MethodGet, base+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			// Not running, the butler is not ready (503): answered all the same.
			if (resp.StatusCode == http.StatusMisdirectedRequest) != refused {
				t.Errorf("GET %s for Host %s: %d, refused %v", path, host, resp.StatusCode, refused)
			}
		}
	}
}

// countingReader is a body of n bytes that counts what was read of it.
type countingReader struct {
	n, read atomic.Int64
}

func newBody(n int64) *countingReader {
	r := &countingReader{}
	r.n.Store(n)
	return r
}

func (r *countingReader) Read(p []byte) (int, error) {
	left := r.n.Load() - r.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), left)]
	for i := range p {
		p[i] = ' '
	}
	r.read.Add(int64(len(p)))
	return len(p), nil
}

// TestLargeBodyRefused: a 2 MB body is answered 413 having read at most the
// 1 MiB cap of it (nothing, when its length is announced), so memory stays
// flat however large the bodies; a body just under the cap goes through.
func TestLargeBodyRefused(t *testing.T) {
	g := startGuarded(t)
	const size = 2 << 20
	t.Run("length unknown", func(t *testing.T) {
		body := newBody(size)
		req := httptest.NewRequest(http.MethodPost, butler.MCPPath, body)
		req.Host = "127.0.0.1"
		req.ContentLength = -1 // chunked
		req.Header.Set("Authorization", "Bearer "+g.static)
		rec := httptest.NewRecorder()
		g.b.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", rec.Code)
		}
		if read := body.read.Load(); read > butler.MaxRequestBody+1 {
			t.Fatalf("read %d bytes of the body, want at most %d", read, butler.MaxRequestBody+1)
		}
	})
	t.Run("length announced", func(t *testing.T) {
		body := newBody(size)
		req := httptest.NewRequest(http.MethodPost, butler.MCPPath, body)
		req.Host = "127.0.0.1"
		req.ContentLength = size
		req.Header.Set("Authorization", "Bearer "+g.static)
		rec := httptest.NewRecorder()
		g.b.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge || body.read.Load() != 0 {
			t.Fatalf("status %d having read %d bytes, want 413 having read none", rec.Code, body.read.Load())
		}
	})
	t.Run("over the wire", func(t *testing.T) {
		body := newBody(size)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, g.url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = size
		// The client sends the body only once the server asks for it.
		req.Header.Set("Expect", "100-continue")
		req.Header.Set("Authorization", "Bearer "+g.static)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || body.read.Load() != 0 {
			t.Fatalf("status %d having sent %d bytes, want 413 having sent none", resp.StatusCode, body.read.Load())
		}
	})
	t.Run("just under the cap", func(t *testing.T) {
		padded := initialize[:1] + strings.Repeat(" ", butler.MaxRequestBody-len(initialize)) + initialize[1:]
		if resp, body := post(t, g.url, bearer(g.static), padded); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d (%.200s), want 200", resp.StatusCode, body)
		}
	})
}

func TestHealthzNeedsNoToken(t *testing.T) {
	g := startGuarded(t)
	resp, err := http.Get(strings.TrimSuffix(g.url, butler.MCPPath) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(b) != "ok\n" {
		t.Fatalf("healthz: %d %q", resp.StatusCode, b)
	}
}

// TestGETStreamEndsWhenTokenRevoked: a client whose token is revoked stops
// receiving the human's messages too, not only new requests.
func TestGETStreamEndsWhenTokenRevoked(t *testing.T) {
	g := startGuarded(t)
	tok, rec := g.mint(t, "assistant", 0)
	resp, body := post(t, g.url, bearer(tok), initialize)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	hdr := bearer(tok)
	hdr["Mcp-Session-Id"] = session
	hdr["Mcp-Protocol-Version"] = "2025-06-18"
	if resp, body := post(t, g.url, hdr, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", stream.StatusCode)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_, _ = io.Copy(io.Discard, bufio.NewReader(stream.Body))
	}()
	select {
	case <-ended:
		t.Fatal("the stream ended while its token was valid")
	case <-time.After(butler.TokenCacheFor + time.Second):
	}
	if _, err := g.tokens.Revoke(t.Context(), rec.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(butler.TokenCacheFor + 2*time.Second):
		t.Fatal("the GET stream of a revoked token is still open")
	}
}

// TestStaticTokenMissing: a butler whose mcp_token_env is not set refuses to
// serve HTTP, naming the variable and not guessing.
func TestStaticTokenMissing(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	for _, tt := range []struct {
		name, value, want string
	}{
		{"unset", "", "HEALTH_MCP_TOKEN is not set"},
		{"too short", "hunter2", "at least 16"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Butlers[0].MCPTokenEnv = "HEALTH_MCP_TOKEN"
			cfg.Butlers[0].MCPHTTP = "127.0.0.1:0"
			b, err := butler.New(t.Context(), butler.Options{Name: "assistant", Config: cfg, NC: nc, Getenv: func(string) string { return tt.value }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			err = b.ServeHTTP(t.Context(), "127.0.0.1:0", nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.value != "" && strings.Contains(err.Error(), tt.value)) {
				t.Fatalf("ServeHTTP = %v, want an error saying %q without the value", err, tt.want)
			}
		})
	}
}

// TestNoStaticTokenSaysSoAtStart: a butler serving HTTP with no token
// configured says once, at start, that only minted tokens open it and how
// to give it one; one with a token says nothing of the kind.
func TestNoStaticTokenSaysSoAtStart(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	for _, tt := range []struct {
		name  string
		env   string
		warns int
	}{
		{"no token configured", "", 1},
		{"static token", "HEALTH_MCP_TOKEN", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Butlers[0].MCPTokenEnv = tt.env
			var logs bytes.Buffer // read once ServeHTTP has returned, when nothing writes to it
			tok := token.NewStatic()
			b, err := butler.New(t.Context(), butler.Options{Name: "assistant", Config: cfg, NC: nc, Getenv: func(string) string { return tok }, Log: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			up := make(chan string, 1)
			done := make(chan error, 1)
			go func() { done <- b.ServeHTTP(ctx, "127.0.0.1:0", func(url string) { up <- url }) }()
			url := <-up
			for range 3 {
				resp, _ := post(t, url, nil, initialize)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("status %d without a token", resp.StatusCode)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			if got := strings.Count(out, "no static MCP token"); got != tt.warns {
				t.Fatalf("%d warnings about the missing token, want %d:\n%s", got, tt.warns, out)
			}
			if tt.warns > 0 && !(strings.Contains(out, "herald token mint --butler assistant") && strings.Contains(out, "mcp_token_env")) {
				t.Fatalf("the warning does not say how to fix it:\n%s", out)
			}
		})
	}
}
