package envelope_test

import (
	"encoding/json"
	"testing"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

// TestAnswerHeld: a held note's answer is a valid route_response, accepted,
// whose notify_response says held and until when, and reads back whole
// through the decoder butlers use.
func TestAnswerHeld(t *testing.T) {
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "later", Urgency: "low"}, nil))
	h := envelope.HeldResult{Channel: "telegram:tg_main", Until: "2026-11-27T07:00:00+01:00", TZ: "Europe/Berlin", Pass: "high"}
	resp := envelope.AnswerHeld(r, h)
	if err := envelope.Check(schemas.RouteResponse, resp); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := envelope.DecodeTrustedResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	nr := got.Result.NotifyResponse
	if got.Status != envelope.StatusAccepted || nr.Status != envelope.StatusHeld || nr.Held == nil || *nr.Held != h || nr.Delivery != nil {
		t.Fatalf("decoded %+v / %+v, want accepted carrying held %+v and no delivery", got, nr, h)
	}
}
