package envelope_test

import (
	"context"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/envelope"
)

func TestTraceparent(t *testing.T) {
	tp := envelope.NewTraceparent()
	id := envelope.TraceID(tp)
	if len(id) != 32 || !strings.HasPrefix(tp, "00-"+id+"-") || !strings.HasSuffix(tp, "-01") {
		t.Fatalf("new traceparent %q (trace id %q)", tp, id)
	}
	if envelope.NewTraceparent() == tp {
		t.Fatal("two traces share their ids")
	}
	child := envelope.ChildTraceparent(tp)
	if envelope.TraceID(child) != id || child == tp {
		t.Errorf("child %q of %q: same trace, another span", child, tp)
	}
	for _, bad := range []string{"", "00-xyz", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		if envelope.TraceID(bad) != "" {
			t.Errorf("%q taken as a traceparent", bad)
		}
		if c := envelope.ChildTraceparent(bad); envelope.TraceID(c) == "" {
			t.Errorf("a bad parent %q did not start a new trace: %q", bad, c)
		}
	}
	ctx := envelope.WithTraceparent(context.Background(), tp)
	if envelope.Traceparent(ctx) != tp || envelope.TraceContextOf(ctx).Traceparent != tp {
		t.Errorf("context lost the trace")
	}
	if envelope.Traceparent(envelope.WithTraceparent(context.Background(), "junk")) != "" || envelope.TraceContextOf(context.Background()) != nil {
		t.Errorf("junk became a trace")
	}
}
