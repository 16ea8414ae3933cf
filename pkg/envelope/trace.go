package envelope

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// W3C trace context (architecture.md §3's trace_context): a notify's trace starts at
// the butler's tool call, or continues the one the MCP client sent in the
// request's _meta.traceparent, and goes with it through every envelope and
// every NATS message (header traceparent), so each line that handles it can
// log its trace_id.

// HeaderTraceparent is the NATS header that carries a message's trace.
const HeaderTraceparent = "traceparent"

// NewTraceparent starts a trace: version 00, a random trace id and span id,
// sampled.
func NewTraceparent() string { return "00-" + randomHex(16) + "-" + randomHex(8) + "-01" }

// ChildTraceparent continues parent with a span of its own; an invalid or
// empty parent starts a new trace.
func ChildTraceparent(parent string) string {
	id := TraceID(parent)
	if id == "" {
		return NewTraceparent()
	}
	return "00-" + id + "-" + randomHex(8) + "-" + parent[len(parent)-2:]
}

// TraceID is the trace id of a traceparent, "" if it is not one
// (version-traceid-spanid-flags in lower-case hex; the all-zero ids and
// version ff are invalid, as the spec says).
func TraceID(traceparent string) string {
	if !isTraceparent(traceparent) {
		return ""
	}
	id, span := traceparent[3:35], traceparent[36:52]
	if id == "00000000000000000000000000000000" || span == "0000000000000000" || traceparent[:2] == "ff" {
		return ""
	}
	return id
}

// isTraceparent matches ^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$.
func isTraceparent(s string) bool {
	return len(s) == 55 && dashedHex(s, 2, 35, 52)
}

// TraceID is the route's trace id, "" if it carries none.
func (r *Route) TraceID() string {
	if r == nil || r.TraceContext == nil {
		return ""
	}
	return TraceID(r.TraceContext.Traceparent)
}

type traceKey struct{}

// WithTraceparent is ctx carrying a trace; an invalid traceparent leaves ctx
// as it is.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if TraceID(traceparent) == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, traceparent)
}

// Traceparent is the trace ctx carries, "" if none.
func Traceparent(ctx context.Context) string {
	tp, _ := ctx.Value(traceKey{}).(string)
	return tp
}

// Traced joins a route and the context handling it into one trace: ctx
// takes the route's trace if it has none (a message that came without the
// header), and a route without one takes ctx's.
func Traced(ctx context.Context, r *Route) context.Context {
	if r.TraceID() != "" && Traceparent(ctx) == "" {
		return WithTraceparent(ctx, r.TraceContext.Traceparent)
	}
	if r.TraceContext == nil {
		r.TraceContext = TraceContextOf(ctx)
	}
	return ctx
}

// TraceContextOf is ctx's trace as an envelope's trace_context, nil if none.
func TraceContextOf(ctx context.Context) *TraceContext {
	if tp := Traceparent(ctx); tp != "" {
		return &TraceContext{Traceparent: tp}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
