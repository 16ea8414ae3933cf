package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
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
		// The switchboard logs "routed" after its publish, which may be
		// after the notify was answered.
		testkit.Eventually(t, 5*time.Second, func() bool { return len(f.logs.Records(match)) > 0 }, fmt.Sprintf("a log line %v", match))
		recs := f.logs.Records(match)
		if len(recs) != 1 || recs[0]["trace_id"] != traceID {
			t.Errorf("log lines %v: %v, want one with trace_id %s", match, recs, traceID)
		}
	}

	if res := f.notify("health", map[string]any{"channel": "log", "message": "untraced"}); res.IsError {
		t.Fatalf("notify: %s", text(res))
	}
	recs := f.logs.Records(map[string]string{"msg": "notification", "logger": "llm_notify", "message": "untraced"})
	if len(recs) != 1 {
		t.Fatalf("llm_notify lines: %v", recs)
	}
	if id, _ := recs[0]["trace_id"].(string); len(id) != 32 || id == traceID {
		t.Errorf("a notify without a traceparent: trace_id %q, want a new trace", id)
	}
}

// TestLogFindsANotifysTrail: `herald log --request-id` shows what happened
// to one notify, from the real audit records the fleet wrote: routed, then
// delivered, and nothing of another notify.
func TestLogFindsANotifysTrail(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	var ids []string
	for _, msg := range []string{"first", "second"} {
		res := f.notify("health", map[string]any{"channel": "log", "message": msg})
		if res.IsError {
			t.Fatalf("notify: %s", text(res))
		}
		b, _ := json.Marshal(res.StructuredContent)
		var nr envelope.NotifyResponse
		if err := json.Unmarshal(b, &nr); err != nil || nr.RequestContext.RequestID == "" {
			t.Fatalf("notify answer %s: %v", b, err)
		}
		ids = append(ids, nr.RequestContext.RequestID)
	}
	var kinds []string
	testkit.Eventually(t, 10*time.Second, func() bool {
		out, err := f.herald("log", "--request-id", ids[0], "--json")
		if err != nil {
			t.Fatal(err)
		}
		kinds = nil
		if strings.TrimSpace(out) == "" {
			return false // its records wait up to 50 ms to be stored (audit.Linger)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r audit.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("herald log --json line %q: %v", line, err)
			}
			if r.RequestID != ids[0] {
				t.Fatalf("herald log --request-id %s printed %s's record", ids[0], r.RequestID)
			}
			kinds = append(kinds, string(r.Kind))
		}
		return slices.Equal(kinds, []string{"routed", "delivered"})
	}, "herald log --request-id to show the notify routed, then delivered")
}
