package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// mcpConn is a connected MCP server and the tools it listed.
type mcpConn struct {
	client *client.Client
	tools  []string
}

// connectTimeout bounds connecting to a server and listing its tools, as
// the real CLI's MCP_TIMEOUT does. A call has no bound of its own: a
// permission prompt waits for a person.
const connectTimeout = 30 * time.Second

// toolOutput is what a tool call gave: its text blocks, joined by
// newlines, and whether it failed.
type toolOutput struct {
	text    string
	isError bool
}

// callMCP calls tool name on server with args, connecting on first use.
// What fails is a tool result with is_error, as the model would see it.
func (f *fake) callMCP(ctx context.Context, server, name string, args map[string]any) toolOutput {
	i := slices.IndexFunc(f.mcpServers, func(s mcpServer) bool { return s.Name == server })
	if i < 0 || f.mcpStatus(server) != "connected" {
		return toolOutput{text: noSuchTool(server, name), isError: true}
	}
	conn, err := f.connect(ctx, f.mcpServers[i])
	if err != nil {
		return toolOutput{text: err.Error(), isError: true}
	}
	if !slices.Contains(conn.tools, name) {
		return toolOutput{text: noSuchTool(server, name), isError: true}
	}
	res, err := conn.client.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		return toolOutput{text: "Error: " + err.Error(), isError: true}
	}
	var texts []string
	for _, c := range res.Content {
		if t, ok := mcp.AsTextContent(c); ok {
			texts = append(texts, t.Text)
		}
	}
	return toolOutput{text: strings.Join(texts, "\n"), isError: res.IsError}
}

// noSuchTool is the real CLI's answer to a call of a tool it does not have.
func noSuchTool(server, name string) string {
	return "<tool_use_error>Error: No such tool available: " + mcpToolName(server, name) + "</tool_use_error>"
}

// connect is the session's connection to server: Claude Code's
// initialize (protocol 2025-06-18, client claude-code), then tools/list.
// Only one call runs at a time, so f.mcp needs no lock.
func (f *fake) connect(ctx context.Context, srv mcpServer) (*mcpConn, error) {
	if c, ok := f.mcp[srv.Name]; ok {
		return c, nil
	}
	if srv.Type != "http" {
		return nil, fmt.Errorf("fakeclaude: MCP server %s is of type %q; only type http servers are called", srv.Name, srv.Type)
	}
	tr, err := transport.NewStreamableHTTP(srv.URL, transport.WithHTTPHeaders(srv.Headers),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, fmt.Errorf("fakeclaude: MCP server %s: %w", srv.Name, err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := initialize(ctx, c)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("fakeclaude: MCP server %s at %s: %w", srv.Name, srv.URL, err)
	}
	f.mcp[srv.Name] = conn
	return conn, nil
}

func initialize(ctx context.Context, c *client.Client) (*mcpConn, error) {
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.ProtocolVersion20250618
	req.Params.ClientInfo = mcp.Implementation{Name: "claude-code", Version: "2.1.332"}
	if _, err := c.Initialize(ctx, req); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	conn := &mcpConn{client: c}
	for _, t := range list.Tools {
		conn.tools = append(conn.tools, t.Name)
	}
	return conn, nil
}

// closeMCP ends the MCP sessions, as the real CLI does when it exits.
func (f *fake) closeMCP() {
	for name, c := range f.mcp {
		_ = c.client.Close()
		delete(f.mcp, name)
	}
}
