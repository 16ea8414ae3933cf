package obs

import (
	"context"
	"log/slog"

	"github.com/heraldhq/herald/pkg/envelope"
)

// TraceLog wraps h so that every line logged with a context that carries a
// trace (envelope.WithTraceparent) has its trace_id: grep one id and see a
// notify's whole path through the fleet.
func TraceLog(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ slog.Handler }

func (t traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := envelope.TraceID(envelope.Traceparent(ctx)); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", id))
	}
	return t.Handler.Handle(ctx, r)
}

func (t traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{t.Handler.WithAttrs(as)}
}

func (t traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{t.Handler.WithGroup(name)}
}
