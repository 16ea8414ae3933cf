// Command mcpfloor is the floor of `make bench`'s MCP rows: mcp-go's
// streamable HTTP server, set up as a butler sets it up, with a notify tool
// that answers at once, as a delivered notify is answered, and does nothing
// else (no NATS, no Herald). Driven by the same client as herald dev, it
// shows what the MCP layer alone costs on the machine, so the MCP rows' goals
// can be read against it. It prints its endpoint's URL on its first line and
// serves until killed.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/heraldhq/herald/pkg/envelope"
)

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpfloor:", err)
		os.Exit(1)
	}
	s := server.NewMCPServer("herald-mcp-floor", "1", server.WithToolCapabilities(false), server.WithRecovery())
	var n atomic.Int64
	s.AddTool(mcp.NewToolWithRawSchema("notify", "Answers as a delivered notify is answered, and does nothing else.",
		json.RawMessage(`{"type":"object","properties":{"channel":{"type":"string"},"message":{"type":"string"}},"additionalProperties":false}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			channel, _ := req.GetArguments()["channel"].(string)
			id := envelope.NewRequestID()
			d := &envelope.DeliveryResult{Channel: channel, DeliveryID: "dlv_" + strconv.FormatInt(n.Add(1), 36), MessageIDs: []string{id}}
			nr := &envelope.NotifyResponse{SchemaVersion: envelope.NotifyResponseV1, RequestContext: envelope.RequestRef{RequestID: id}, Status: envelope.StatusOK, Delivery: d}
			return mcp.NewToolResultStructured(nr, fmt.Sprintf("Notification sent via %s (delivery_id %s, request_id %s)", d.Channel, d.DeliveryID, nr.RequestContext.RequestID)), nil
		})
	h := server.NewStreamableHTTPServer(s, server.WithEndpointPath("/mcp"), server.WithHeartbeatInterval(25*time.Second),
		server.WithDisableLocalhostProtection(true))
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "mcpfloor:", err)
		os.Exit(1)
	}
}
