package envelope

// HeldResult says where a note held for quiet hours goes, and when: one
// digest of the notes held for its chat, once the hours end.
type HeldResult struct {
	// Channel is the integration ("type:id") whose quiet hours hold it.
	Channel string `json:"channel"`
	// Until is when the hours end and the digest goes out: RFC 3339 with
	// the offset of the hours' time zone, so its clock time is the local one.
	Until string `json:"until"`
	// TZ is the hours' time zone, an IANA name (Europe/Berlin).
	TZ string `json:"tz"`
	// Pass is the lowest urgency that would have gone through at once.
	Pass string `json:"pass,omitempty"`
}

// Held builds the notify_response of a note held for quiet hours: not
// sent, not failed, and nothing to do but wait (or send again with an
// urgency that passes).
func Held(requestID string, h HeldResult) *NotifyResponse {
	return &NotifyResponse{SchemaVersion: NotifyResponseV1, RequestContext: RequestRef{requestID}, Status: StatusHeld, Held: &h}
}

// AnswerHeld is the route_response to r for a held note: accepted (it
// will be delivered), carrying the held notify_response.
func AnswerHeld(r *Route, h HeldResult) *RouteResponse {
	resp := Answer(r, Held(r.RequestContext.RequestID, h))
	resp.Status = StatusAccepted
	return resp
}
