package herald_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/herald"
)

// tokenFleet is a butler over a real NATS and the config file the herald
// commands read to reach it.
type tokenFleet struct {
	file string
	url  string // the butler's /mcp
}

func newTokenFleet(t *testing.T) *tokenFleet {
	t.Helper()
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	dir := t.TempDir()
	f := &tokenFleet{file: filepath.Join(dir, "herald.yaml")}
	writeFile(t, f.file, fmt.Sprintf("nats: { url: %q, store_dir: %q }\n", srv.URL(), filepath.Join(dir, "nats")))
	cfg, err := herald.LoadConfig(f.file, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	b, err := butler.New(t.Context(), butler.Options{Name: "assistant", Config: cfg, NC: nc, Timeout: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b.Handler())
	t.Cleanup(hs.Close)
	f.url = hs.URL + butler.MCPPath
	return f
}

// herald runs `herald args...` with env as the environment.
func (f *tokenFleet) herald(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = herald.Main(t.Context(), args, herald.IO{Getenv: func(k string) string { return env[k] }, Stdout: &out, Stderr: &errOut})
	return code, out.String(), errOut.String()
}

func (f *tokenFleet) mint(t *testing.T, args ...string) (tok, id string) {
	t.Helper()
	code, out, errOut := f.herald(t, nil, append([]string{"token", "mint", "--config", f.file, "--butler", "assistant"}, args...)...)
	tok = strings.TrimSuffix(out, "\n")
	if code != 0 || strings.Contains(tok, "\n") || !strings.HasPrefix(tok, "hrt_") {
		t.Fatalf("herald token mint exited %d; stdout %q (want the token alone), stderr %q", code, out, errOut)
	}
	id = strings.Split(tok, "_")[1]
	if !strings.Contains(errOut, "herald token revoke "+id) || strings.Contains(errOut, tok) {
		t.Fatalf("mint's note %q should name the id %s, not repeat the token", errOut, id)
	}
	return tok, id
}

// TestTokenMintRevoke: a minted token works (herald notify sends it from
// HERALD_MCP_TOKEN), is listed by id, and a revoked one gets 401 within the
// butler's cache time.
func TestTokenMintRevoke(t *testing.T) {
	f := newTokenFleet(t)
	tok, id := f.mint(t)
	if got := initialize(t, f.url, "Bearer "+tok); got != http.StatusOK {
		t.Fatalf("a minted token: %d", got)
	}
	// No switchboard runs here: the notify is queued, which is an answer.
	code, out, errOut := f.herald(t, map[string]string{herald.EnvMCPToken: tok}, "notify", "--config", f.file, "--url", f.url, "hi")
	if code != 0 || !strings.HasPrefix(out, "Notification queued") {
		t.Fatalf("herald notify with HERALD_MCP_TOKEN exited %d: %s%s", code, out, errOut)
	}

	code, out, _ = f.herald(t, nil, "token", "ls", "--config", f.file)
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "assistant") || strings.Contains(out, tok) {
		t.Fatalf("herald token ls exited %d:\n%s", code, out)
	}

	code, out, errOut = f.herald(t, nil, "token", "revoke", id, "--config", f.file)
	if code != 0 || !strings.Contains(out, "Revoked token "+id+" of butler assistant") {
		t.Fatalf("herald token revoke exited %d: %s%s", code, out, errOut)
	}
	revoked := time.Now()
	for initialize(t, f.url, "Bearer "+tok) != http.StatusUnauthorized {
		if time.Since(revoked) > butler.TokenCacheFor+2*time.Second {
			t.Fatalf("a revoked token still works after %s", time.Since(revoked))
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, _, errOut = f.herald(t, nil, "token", "revoke", "--config", f.file, id)
	if code != 1 || !strings.Contains(errOut, "no token "+id) {
		t.Fatalf("revoking twice exited %d: %s", code, errOut)
	}
}

func TestTokenExpires(t *testing.T) {
	f := newTokenFleet(t)
	start := time.Now()
	tok, _ := f.mint(t, "--ttl", "2s")
	if got := initialize(t, f.url, "Bearer "+tok); got != http.StatusOK {
		t.Fatalf("before expiry: %d", got)
	}
	time.Sleep(time.Until(start.Add(2*time.Second + 100*time.Millisecond)))
	if got := initialize(t, f.url, "Bearer "+tok); got != http.StatusUnauthorized {
		t.Fatalf("after expiry: %d", got)
	}
}

func TestTokenErrors(t *testing.T) {
	f := newTokenFleet(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", []string{"token"}, 2, "herald token mint"},
		{"mint without a butler", []string{"token", "mint", "--config", f.file}, 2, "--butler NAME"},
		{"mint for a butler not configured", []string{"token", "mint", "--config", f.file, "--butler", "ghost"}, 1, `no butler "ghost"`},
		{"negative ttl", []string{"token", "mint", "--config", f.file, "--butler", "assistant", "--ttl", "-1h"}, 1, "negative"},
		{"revoke what is not an id", []string{"token", "revoke", "--config", f.file, "hrt_0123"}, 1, "is not a token id"},
		{"revoke an unknown id", []string{"token", "revoke", "--config", f.file, "0123456789abcdef"}, 1, "no token 0123456789abcdef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := f.herald(t, nil, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", code, out, errOut, tt.code, tt.want)
			}
		})
	}
}
