package butler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/butler"
)

// offerEveryRevision asks for MCP 2026-07-28 first and falls back to the
// older revisions, as Claude Code 2.1.332 does: mcp-go's client probes with
// server/discover and takes the handshake only if the server turns that down.
func offerEveryRevision(t *testing.T, c *client.Client) {
	t.Helper()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20260728
	init.Params.ClientInfo = mcp.Implementation{Name: "every-revision", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if v := c.ProtocolVersion(); mcp.IsModernProtocol(v) {
		t.Fatalf("the client settled on MCP %s, which has no unsolicited notification path: Claude Code drops every channel message there", v)
	}
}

// TestEveryRevisionClientReceivesChannelMessagesOverHTTP: a client that
// offers 2026-07-28 and the older revisions ends up on a session with a GET
// stream, and a human's message arrives on it.
func TestEveryRevisionClientReceivesChannelMessagesOverHTTP(t *testing.T) {
	_, js, url, tok := serveButler(t)
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	offerEveryRevision(t, c)
	session := c.GetSessionId()
	if session == "" {
		t.Fatal("no MCP session after the handshake: there is no GET stream to push channel messages on")
	}

	// The GET stream, as Claude Code opens it on a session revision.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(server.HeaderKeySessionID, session)
	req.Header.Set(mcp.HeaderProtocolVersion, c.ProtocolVersion())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET stream: %s %s", resp.Status, body)
	}
	inboundRoute(t, js, "assistant", "over the GET stream", 1)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		var n mcp.JSONRPCNotification
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &n) == nil && n.Method == butler.MethodChannel {
			if got := n.Params.AdditionalFields["content"]; got != "over the GET stream" {
				t.Fatalf("channel notification content %v", got)
			}
			return
		}
	}
	t.Fatalf("no channel notification on the GET stream: %v", sc.Err())
}

// TestEveryRevisionClientReceivesChannelMessagesOverStdio: the same over
// stdio, where the transport itself would serve 2026-07-28. A client that
// says neither who it is nor which channel protocol it reads gets the
// message in both, Claude Code's and nexo-rs's. (Both are awaited: mcp-go's
// stdio session is one per process, and a notification left in it would
// reach the next test's butler.)
func TestEveryRevisionClientReceivesChannelMessagesOverStdio(t *testing.T) {
	in, out, js := stdioButler(t)
	c := client.NewClient(transport.NewIO(out, in, io.NopCloser(strings.NewReader(""))))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := make(chan mcp.JSONRPCNotification, 8)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == butler.MethodChannel || n.Method == butler.MethodNexoChannel {
			got <- n
		}
	})
	offerEveryRevision(t, c)
	inboundRoute(t, js, "assistant", "over stdio", 1)
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case n := <-got:
			if n.Params.AdditionalFields["content"] != "over stdio" || seen[n.Method] {
				t.Fatalf("channel notification %s %v (seen %v)", n.Method, n.Params.AdditionalFields, seen)
			}
			seen[n.Method] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("over stdio, channel notifications %v, want both protocols", seen)
		}
	}
}

// stdioButler serves a butler over stdio, as a client that started it from
// .mcp.json sees it: what the test writes to in reaches the butler, and the
// butler's answers come out of out.
func stdioButler(t *testing.T) (in io.WriteCloser, out io.Reader, js jetstream.JetStream) {
	t.Helper()
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	b, err := butler.New(t.Context(), butler.Options{Name: "assistant", Config: config.Default(), NC: nc, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := b.ServeStdio(ctx, serverIn, serverOut); err != nil {
			t.Errorf("stdio: %v", err)
		}
	}()
	// Closing the reader too ends a write the test no longer reads, so a
	// failed test stops instead of hanging.
	t.Cleanup(func() { _ = clientOut.Close(); _ = clientIn.Close(); cancel(); <-done })
	return clientOut, clientIn, js
}

// modernDiscover is server/discover as a client that speaks only MCP
// 2026-07-28 sends it.
const modernDiscover = `{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"modern-only","version":"1"}}}}`

// TestModernOnlyClientIsToldTheServedRevisions: a client that asks only for
// 2026-07-28 gets a JSON-RPC error naming the revisions the butler serves,
// at once, on both transports.
func TestModernOnlyClientIsToldTheServedRevisions(t *testing.T) {
	check := func(t *testing.T, answer []byte) {
		t.Helper()
		var resp struct {
			ID    int `json:"id"`
			Error *struct {
				Code    int             `json:"code"`
				Message string          `json:"message"`
				Data    json.RawMessage `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(answer, &resp); err != nil || resp.Error == nil || resp.ID != 7 {
			t.Fatalf("answer %s is not a JSON-RPC error for request 7", answer)
		}
		said := resp.Error.Message + string(resp.Error.Data)
		for _, v := range butler.ServedProtocolVersions {
			if !strings.Contains(said, v) {
				t.Errorf("error %s does not name the served revision %s", said, v)
			}
		}
		if !strings.Contains(said, mcp.ProtocolVersion20260728) {
			t.Errorf("error %s does not name the refused revision", said)
		}
	}
	t.Run("http", func(t *testing.T) {
		_, _, url, tok := serveButler(t)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(modernDiscover))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set("Mcp-Method", "server/discover")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		check(t, body)
	})
	t.Run("stdio", func(t *testing.T) {
		in, out, _ := stdioButler(t)
		if _, err := io.WriteString(in, modernDiscover+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		check(t, line)
	})
}
