package e2e

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestTraceFollowsANotify: a notify whose MCP request carries
// _meta.traceparent keeps that trace through the switchboard and the
// messenger: every line logged about it, the llm_notify line included, has
// its trace_id. A notify without one gets a trace of its own.
func TestTraceFollowsANotify(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	c := f.mcp("health", "")
	req := mcp.CallToolRequest{}
	req.Params.Name = "notify"
	req.Params.Arguments = map[string]any{"channel": "log", "message": "traced"}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}}
	res, err := c.CallTool(t.Context(), req)
	if err != nil || res.IsError {
		t.Fatalf("notify: %v %s", err, text(res))
	}
	for _, match := range []map[string]string{
		{"msg": "routed", "service": "switchboard"},
		{"msg": "delivered", "service": "messenger"},
		{"msg": "notification", "logger": "llm_notify", "message": "traced"},
	} {
		recs := f.logs.records(match)
		if len(recs) != 1 || recs[0]["trace_id"] != traceID {
			t.Errorf("log lines %v: %v, want one with trace_id %s", match, recs, traceID)
		}
	}

	if res := f.notify("health", map[string]any{"channel": "log", "message": "untraced"}); res.IsError {
		t.Fatalf("notify: %s", text(res))
	}
	recs := f.logs.records(map[string]string{"msg": "notification", "logger": "llm_notify", "message": "untraced"})
	if len(recs) != 1 {
		t.Fatalf("llm_notify lines: %v", recs)
	}
	if id, _ := recs[0]["trace_id"].(string); len(id) != 32 || id == traceID {
		t.Errorf("a notify without a traceparent: trace_id %q, want a new trace", id)
	}
}
