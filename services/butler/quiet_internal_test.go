package butler

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/envelope"
)

// TestHeldAnswer: a note held for quiet hours is answered as held, with
// the local time the hours end and their zone, never as sent or failed;
// any other answer is not taken for one.
func TestHeldAnswer(t *testing.T) {
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "later", Urgency: "low"}, nil))
	resp := envelope.AnswerHeld(r, envelope.HeldResult{Channel: "telegram:tg_main", Until: "2026-11-27T07:00:00+01:00", TZ: "Europe/Berlin", Pass: "high"})
	res := heldAnswer(resp)
	if res == nil || res.IsError {
		t.Fatalf("held answer %+v", res)
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", res.Content[0])
	}
	got := tc.Text
	if sa, ok := res.StructuredContent.(sentAnswer); !ok || sa.Summary != got || sa.Status != envelope.StatusHeld {
		t.Errorf("structured content %+v: want status held and the text as summary", res.StructuredContent)
	}
	for _, want := range []string{"Notification held until ", "07:00 Europe/Berlin", r.RequestContext.RequestID, "telegram:tg_main", "not sent", "do not send it again", "urgency high"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "sent via") {
		t.Errorf("%q reads as sent", got)
	}
	sent := envelope.Answer(r, envelope.OK(r.RequestContext.RequestID, envelope.DeliveryResult{Channel: "log:log", DeliveryID: "dlv_1"}))
	if heldAnswer(sent) != nil || heldAnswer(envelope.Reject(r.RequestContext.RequestID, envelope.ErrForbidden)) != nil {
		t.Error("a sent or refused notify was answered as held")
	}
}
