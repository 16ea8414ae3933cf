package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/token"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
	"github.com/heraldhq/herald/services/herald"
)

// authButler serves the fleet's butler "health" as the butler binary does
// (ServeHTTP: its own listener and timeouts), with a static token from
// mcp_token_env, and returns its /mcp URL and that token.
func (f *fleet) authButler() (url, static string) {
	f.t.Helper()
	static = token.NewStatic()
	f.env["HEALTH_MCP_TOKEN"] = static
	bc := f.cfg.Butler("health")
	bc.MCPTokenEnv = "HEALTH_MCP_TOKEN"
	bc.AllowedHosts = []string{"butler-health"}
	b, err := butler.New(context.Background(), butler.Options{Name: "health", Config: f.cfg, NC: f.nc, Log: f.logger(), Timeout: f.timeout, Getenv: f.getenv})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- b.ServeHTTP(ctx, "127.0.0.1:0", func(url string) { ready <- url }) }()
	f.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			f.t.Errorf("butler health: %v", err)
		}
	})
	select {
	case url = <-ready:
	case err := <-done:
		f.t.Fatalf("butler health: %v", err)
	}
	return url, static
}

// heraldCLI runs `herald args...` against the fleet's NATS and returns the
// exit code, stdout and stderr.
func (f *fleet) heraldCLI(args ...string) (int, string, string) {
	f.t.Helper()
	file := filepath.Join(f.t.TempDir(), "herald.yaml")
	yaml := fmt.Sprintf("nats: { url: %q }\nbutlers:\n  - { name: health }\n  - { name: finance }\n", f.bus.URL())
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		f.t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := herald.Main(f.t.Context(), append(args, "--config", file), herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

// connect opens an MCP session sending auth as the Authorization header.
func connect(t *testing.T, url, auth string) (*client.Client, error) {
	t.Helper()
	var opts []transport.StreamableHTTPCOption
	if auth != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": auth}))
	}
	c, err := client.NewStreamableHttpClient(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := butlertest.Initialize(t, c, "2025-06-18", butlertest.Hello{Name: "e2e"}); err != nil {
		return nil, err
	}
	return c, nil
}

// rawInitialize sends an initialize request with the given headers (Host
// too) and returns the HTTP status and the WWW-Authenticate header.
func rawInitialize(t *testing.T, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// TestMCPNeedsToken: every MCP request needs a bearer token, the butler's
// static one or one minted with `herald token mint`; without one there is a
// 401 and nothing reaches the model's tools, and a revoked or expired token
// stops working.
func TestMCPNeedsToken(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	url, static := f.authButler()

	status, challenge := rawInitialize(t, url, nil)
	if status != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer") {
		t.Fatalf("no token: %d %q, want 401 with a Bearer challenge", status, challenge)
	}
	if _, err := connect(t, url, ""); err == nil {
		t.Fatal("an MCP client without a token connected")
	}
	sent := len(f.tg.Calls("sendMessage"))

	// The static token: a notify goes all the way to Telegram.
	c, err := connect(t, url, "Bearer "+static)
	if err != nil {
		t.Fatal(err)
	}
	if res := callNotify(t, c, map[string]any{"message": "with the static token"}); res.IsError || !strings.HasPrefix(text(res), "Notification sent via telegram:tg_main") {
		t.Fatalf("notify: %s", text(res))
	}
	if got := len(f.tg.Calls("sendMessage")); got != sent+1 {
		t.Fatalf("%d messages sent, want %d", got, sent+1)
	}

	// A minted token works until it is revoked.
	code, tok, errOut := f.heraldCLI("token", "mint", "--butler", "health")
	tok = strings.TrimSpace(tok)
	id, ok := token.ParseID(tok)
	if code != 0 || !ok {
		t.Fatalf("herald token mint exited %d: %q %s", code, tok, errOut)
	}
	c, err = connect(t, url, "Bearer "+tok)
	if err != nil {
		t.Fatal(err)
	}
	if res := callNotify(t, c, map[string]any{"message": "with a minted token"}); res.IsError {
		t.Fatalf("notify: %s", text(res))
	}
	// A token of another butler is no token of this one.
	_, other, _ := f.heraldCLI("token", "mint", "--butler", "finance")
	if status, _ := rawInitialize(t, url, map[string]string{"Authorization": "Bearer " + strings.TrimSpace(other)}); status != http.StatusUnauthorized {
		t.Fatalf("finance's token at health: %d, want 401", status)
	}

	if code, out, errOut := f.heraldCLI("token", "revoke", id); code != 0 {
		t.Fatalf("herald token revoke exited %d: %s%s", code, out, errOut)
	}
	revoked := time.Now()
	// The open session stops working too: every request carries the token.
	req := mcp.CallToolRequest{}
	req.Params.Name = "notify"
	req.Params.Arguments = map[string]any{"message": "after revoking"}
	for {
		_, err := c.CallTool(t.Context(), req)
		if err != nil && strings.Contains(err.Error(), "authorization required") {
			break
		}
		if time.Since(revoked) > butler.TokenCacheFor+2*time.Second {
			t.Fatalf("a revoked token still works %s later (%v)", time.Since(revoked), err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// An expired token gets 401.
	code, tok, errOut = f.heraldCLI("token", "mint", "--butler", "health", "--ttl", "1s")
	if code != 0 {
		t.Fatalf("herald token mint --ttl exited %d: %s", code, errOut)
	}
	time.Sleep(1100 * time.Millisecond)
	if status, challenge := rawInitialize(t, url, map[string]string{"Authorization": "Bearer " + strings.TrimSpace(tok)}); status != http.StatusUnauthorized || !strings.Contains(challenge, "invalid_token") {
		t.Fatalf("an expired token: %d %q", status, challenge)
	}

	// The refusals are logged, by token id and never with a token, one line
	// a minute however many come (the later ones are counted on the next):
	// the first, finance's token at health, is the line.
	refusals := f.logs.Records(map[string]string{"msg": "refused an MCP request with an invalid token"})
	otherID, _ := token.ParseID(strings.TrimSpace(other))
	if len(refusals) != 1 || !strings.Contains(fmt.Sprint(refusals), otherID) {
		t.Fatalf("refusals of finance's, a revoked and an expired token logged as %v, want one line naming token %s", refusals, otherID)
	}
	for _, secret := range []string{static, tok, strings.TrimSpace(other)} {
		if strings.Contains(fmt.Sprint(f.logs.Records(nil)), secret) {
			t.Fatal("a token appears in the logs")
		}
	}
}

// countingBody is n bytes of request body that counts what the client sent.
type countingBody struct{ n, sent atomic.Int64 }

func (b *countingBody) Read(p []byte) (int, error) {
	left := b.n.Load() - b.sent.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), left)]
	clear(p)
	b.sent.Add(int64(len(p)))
	return len(p), nil
}

// TestMCPRefusesBrowsersAndBigBodies: with a valid token still, a page of
// another site (Origin) or one that rebinds its name (Host) is refused, and
// a 2 MB body is answered 413 without being read.
func TestMCPRefusesBrowsersAndBigBodies(t *testing.T) {
	f := newFleet(t)
	url, static := f.authButler()
	auth := "Bearer " + static
	for _, tt := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"token alone", map[string]string{}, http.StatusOK},
		{"page of another site", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"name rebound to the butler", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest},
		{"compose service name in allowed_hosts", map[string]string{"Host": "butler-health:7701"}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.hdr["Authorization"] = auth
			if status, _ := rawInitialize(t, url, tt.hdr); status != tt.want {
				t.Fatalf("status %d, want %d", status, tt.want)
			}
		})
	}

	t.Run("2 MB body", func(t *testing.T) {
		body := &countingBody{}
		body.n.Store(2 << 20)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = body.n.Load()
		req.Header.Set("Authorization", auth)
		req.Header.Set("Expect", "100-continue") // the body goes only if the butler asks for it
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || body.sent.Load() != 0 {
			t.Fatalf("status %d having sent %d bytes; want 413 having sent none", resp.StatusCode, body.sent.Load())
		}
	})
}
