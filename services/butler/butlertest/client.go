// Package butlertest connects to a butler as Claude Code or nexo-rs does
// (streamable HTTP with the GET stream open, or stdio) and records what the
// butler pushes, like httptest for MCP channels.
package butlertest

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Client is a connected MCP client.
type Client struct {
	*client.Client
	// Server is the butler's answer to initialize: its capabilities.
	Server *mcp.InitializeResult
	t      testing.TB
	mu     sync.Mutex
	got    []mcp.JSONRPCNotification
	seen   chan struct{}
}

// Connect opens a client on the butler's MCP endpoint url, speaking
// protocolVersion, with its GET stream open for channel notifications. opts
// add to the transport's (the butler's bearer token:
// transport.WithHTTPHeaders). It is closed when the test ends.
func Connect(t testing.TB, url, protocolVersion string, opts ...transport.StreamableHTTPCOption) *Client {
	t.Helper()
	return ConnectAs(t, url, protocolVersion, Hello{}, opts...)
}

// Hello is what a client says of itself at initialize: the butler decides
// from it which channel protocol to push in (Claude Code's, nexo-rs's).
type Hello struct {
	// Name is clientInfo.name; "" is "butlertest".
	Name string
	// Capabilities are the client's, experimental ones included.
	Capabilities mcp.ClientCapabilities
}

// ConnectAs is Connect for a client that introduces itself as hello says.
func ConnectAs(t testing.TB, url, protocolVersion string, hello Hello, opts ...transport.StreamableHTTPCOption) *Client {
	t.Helper()
	// The GET stream of the revisions before 2026-07-28 is what these
	// clients test (the current revision's clients use Client.Listen).
	//lint:ignore SA1019 a client of the older protocol revisions, on purpose
	c, err := client.NewStreamableHttpClient(url, append([]transport.StreamableHTTPCOption{transport.WithContinuousListening()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return start(t, c, protocolVersion, hello)
}

// ConnectIO is a client over a stdio transport: it writes the butler's
// input to in and reads its output from out (Butler.ServeStdio's other
// ends). It is closed when the test ends.
func ConnectIO(t testing.TB, out io.Reader, in io.WriteCloser, protocolVersion string, hello Hello) *Client {
	t.Helper()
	return start(t, client.NewClient(transport.NewIO(out, in, io.NopCloser(strings.NewReader("")))), protocolVersion, hello)
}

func start(t testing.TB, c *client.Client, protocolVersion string, hello Hello) *Client {
	t.Helper()
	cc := &Client{Client: c, t: t, seen: make(chan struct{}, 1)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		cc.mu.Lock()
		cc.got = append(cc.got, n)
		cc.mu.Unlock()
		select {
		case cc.seen <- struct{}{}:
		default:
		}
	})
	res, err := Initialize(t, c, protocolVersion, hello)
	if err != nil {
		t.Fatalf("initialize (%s): %v", protocolVersion, err)
	}
	cc.Server = res
	return cc
}

// Initialize starts c, closed when the test ends, and sends the butler the
// initialize of a client speaking protocolVersion that introduces itself
// as hello says. It returns the butler's answer, or its refusal, for a
// test of one.
func Initialize(t testing.TB, c *client.Client, protocolVersion string, hello Hello) (*mcp.InitializeResult, error) {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	init.Params.ClientInfo = mcp.Implementation{Name: "butlertest", Version: "1"}
	if hello.Name != "" {
		init.Params.ClientInfo.Name = hello.Name
	}
	init.Params.Capabilities = hello.Capabilities
	return c.Initialize(context.Background(), init)
}

// Send sends the butler a notification of method (a permission request).
func (c *Client) Send(method string, params map[string]any) {
	c.t.Helper()
	err := c.GetTransport().SendNotification(context.Background(), mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}},
	})
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

// Notifications are the params of every notification of method received so
// far, in order.
func (c *Client) Notifications(method string) []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]any
	for _, n := range c.got {
		if n.Method == method {
			out = append(out, n.Params.AdditionalFields)
		}
	}
	return out
}

// Wait returns the notifications of method once there are at least n.
func (c *Client) Wait(method string, n int) []map[string]any {
	c.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if got := c.Notifications(method); len(got) >= n {
			return got
		}
		select {
		case <-c.seen:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			c.t.Fatalf("got %d %s notifications, want %d", len(c.Notifications(method)), method, n)
		}
	}
}

// Call calls tool and returns its result; a protocol error fails the test.
func (c *Client) Call(tool string, args map[string]any) *mcp.CallToolResult {
	c.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		c.t.Fatalf("%s: %v", tool, err)
	}
	return res
}
