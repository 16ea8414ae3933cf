package butler_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/switchboard"
)

// TestStdio drives a butler over the stdio transport, as an .mcp.json entry
// does, through a real switchboard and messenger to the log channel.
func TestStdio(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	cfg := config.Default()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(2)
	go func() { defer wg.Done(); _ = switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: nc, Log: log}) }()
	go func() { defer wg.Done(); _ = messenger.Run(ctx, messenger.Options{Config: cfg, NC: nc, Log: log}) }()

	b, err := butler.New(ctx, butler.Options{Name: "assistant", Config: cfg, NC: nc, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := b.ServeStdio(ctx, serverIn, serverOut); err != nil {
			t.Errorf("stdio: %v", err)
		}
	}()
	c := client.NewClient(transport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = clientOut.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-06-18"
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	res, err := c.Initialize(t.Context(), init)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Instructions, "notify") {
		t.Fatalf("instructions %q do not explain the notify tool", res.Instructions)
	}
	// They describe the tag the model sees: source is the server's name.
	if !strings.Contains(res.Instructions, `source_channel="telegram"`) || strings.Contains(res.Instructions, `source="telegram"`) {
		t.Errorf("instructions %q do not describe Herald's source as source_channel", res.Instructions)
	}
	for _, capability := range []string{"claude/channel", "claude/channel/permission", "nexo/channel", "nexo/channel/permission"} {
		if _, ok := res.Capabilities.Experimental[capability]; !ok {
			t.Fatalf("experimental capability %s not declared: %v", capability, res.Capabilities.Experimental)
		}
	}
	tools, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The tools that answer a message load with the session: Claude Code
	// sends a session's first channel message without its deferred tools.
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		load := tool.Meta != nil && tool.Meta.AdditionalFields[butler.MetaAlwaysLoad] == true
		if want := tool.Name == "reply" || tool.Name == "react" || tool.Name == "ask" || tool.Name == "edit" || tool.Name == "download_attachment"; load != want {
			t.Errorf("tool %s: _meta %v, want %s %v", tool.Name, tool.Meta, butler.MetaAlwaysLoad, want)
		}
	}
	slices.Sort(names)
	if want := []string{"ask", "channel_list", "channel_status", "download_attachment", "edit", "history", "inbox", "notify", "react", "reply", "send_message"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	call := mcp.CallToolRequest{}
	call.Params.Name = "notify"
	call.Params.Arguments = map[string]any{"message": "over stdio"}
	out, err := c.CallTool(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	text := out.Content[0].(mcp.TextContent).Text
	if out.IsError || !strings.HasPrefix(text, "Notification sent via log:log (delivery_id dlv_") {
		t.Fatalf("answer %q", text)
	}
}

func TestUnknownButlerIsRefused(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, _ := srv.Connect()
	_, err := butler.New(t.Context(), butler.Options{Name: "ghost", Config: config.Default(), NC: nc})
	if err == nil || !strings.Contains(err.Error(), `"ghost"`) {
		t.Fatalf("err = %v", err)
	}
}
