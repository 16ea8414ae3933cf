package butler

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/token"
)

// TestStreamOutlivesServerTimeouts: the butler's HTTP server has read and
// idle timeouts, and none of them, however short, ends the long-lived GET
// stream (a WriteTimeout would).
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	nc, _ := bustest.RunServer(t).Connect()
	cfg := config.Default()
	cfg.Butlers[0].MCPTokenEnv = "T"
	static := token.NewStatic()
	b, err := New(t.Context(), Options{Name: "assistant", Config: cfg, NC: nc, Getenv: func(string) string { return static }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := b.httpServer(ln.Addr().String())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("timeouts: read header %s, read %s, idle %s; want all set", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout)
	}
	const short = 300 * time.Millisecond
	for _, d := range []*time.Duration{&srv.ReadHeaderTimeout, &srv.ReadTimeout, &srv.WriteTimeout, &srv.IdleTimeout} {
		if *d > 0 {
			*d = short
		}
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String() + MCPPath

	do := func(ctx context.Context, method, session, body string) *http.Response {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+static)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := do(t.Context(), http.MethodPost, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream := do(ctx, http.MethodGet, session, "")
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", stream.StatusCode)
	}
	listening := func() bool {
		b.channel.mu.Lock()
		defer b.channel.mu.Unlock()
		return b.channel.listening[session] > 0
	}
	if !listening() {
		t.Fatal("the GET stream is not counted as listening")
	}
	time.Sleep(5 * short)
	if !listening() {
		t.Fatalf("the GET stream ended after the server's timeouts (%s)", short)
	}
	// And it still carries what the butler pushes.
	if err := b.mcp.SendNotificationToSpecificClient(session, "notifications/test", map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/test") {
				got <- sc.Text()
				return
			}
		}
		got <- "stream ended: " + fmt.Sprint(sc.Err())
	}()
	select {
	case line := <-got:
		if !strings.HasPrefix(line, "data:") {
			t.Fatalf("after the server's timeouts: %s", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a notification pushed after the server's timeouts did not arrive")
	}
}
