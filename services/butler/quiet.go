package butler

import (
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/envelope"
)

// heldAnswer is the tool's answer to a note the switchboard held for its
// integration's quiet hours, or nil if resp is no such answer. It says the
// note was not sent and when it will be, so the model neither believes it
// delivered nor sends it again.
func heldAnswer(resp *envelope.RouteResponse) *mcp.CallToolResult {
	if resp.Result == nil || resp.Result.NotifyResponse == nil {
		return nil
	}
	nr := resp.Result.NotifyResponse
	if nr.Status != envelope.StatusHeld || nr.Held == nil {
		return nil
	}
	text := heldText(nr)
	return mcp.NewToolResultStructured(sentAnswer{nr, text}, text)
}

// heldText is the sentence of a held note: "held until 07:00
// Europe/Berlin", what happens then, and what to do if it cannot wait.
func heldText(nr *envelope.NotifyResponse) string {
	h := nr.Held
	until := h.Until
	if t, err := time.Parse(time.RFC3339, h.Until); err == nil {
		// Until carries the zone's offset: its clock is the local one.
		until = t.Format("15:04")
		if days := time.Until(t).Hours() / 24; days >= 1 {
			until = t.Format("Mon 2 Jan 15:04")
		}
	}
	pass := h.Pass
	if pass == "" {
		pass = "high"
	}
	return fmt.Sprintf("Notification held until %s %s (request_id %s): %s has quiet hours now, so it was not sent. "+
		"It goes out then, in one digest with the other notes held for that chat; do not send it again. "+
		"If it cannot wait, send it with urgency %s.", until, h.TZ, nr.RequestContext.RequestID, h.Channel, pass)
}
