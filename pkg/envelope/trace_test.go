package envelope_test

import (
	"context"
	"encoding/json"
	"errors"
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

// TestDecodeTrusted: what Herald's own services publish is decoded without a
// schema check, but never taken for another envelope or from broken JSON.
func TestDecodeTrusted(t *testing.T) {
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "log", Message: "hi"}, nil))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := envelope.DecodeTrustedRoute(b)
	if err != nil || got.Notify().Delivery.Message != "hi" || got.RequestContext.RequestID != r.RequestContext.RequestID {
		t.Fatalf("DecodeTrustedRoute: %+v, %v", got, err)
	}
	resp, _ := json.Marshal(envelope.Answer(r, envelope.Failed(r.RequestContext.RequestID, envelope.ErrForbidden)))
	for _, bad := range [][]byte{[]byte("{"), resp} {
		if _, err := envelope.DecodeTrustedRoute(bad); !errors.Is(err, envelope.ErrValidation) {
			t.Errorf("DecodeTrustedRoute(%s): %v, want a validation error", bad, err)
		}
	}
	if got, err := envelope.DecodeTrustedResponse(resp); err != nil || got.Status != envelope.StatusError {
		t.Errorf("DecodeTrustedResponse: %+v, %v", got, err)
	}
	if _, err := envelope.DecodeTrustedResponse(b); !errors.Is(err, envelope.ErrValidation) {
		t.Errorf("a route taken for a response: %v", err)
	}
}
