// Package envelope holds Herald's versioned envelopes (architecture.md §3): their Go
// types, builders that fill defaults, schema validation whose errors name every
// failing field by JSON pointer, and the idempotency key that makes a repeated
// notify one delivery.
package envelope

import (
	"time"
)

// Schema versions.
const (
	NotifyV1         = "notify.v1"
	RouteV1          = "route.v1"
	NotifyResponseV1 = "notify_response.v1"
	RouteResponseV1  = "route_response.v1"
	IngressV1        = "ingress.v1"
)

// Intents of a notify.
const (
	IntentSend  = "send"
	IntentReply = "reply"
	IntentReact = "react"
	// IntentEdit replaces the text of a message the butler sent
	// (Delivery.EditOf names it).
	IntentEdit = "edit"
)

// Statuses of responses.
const (
	StatusOK       = "ok"
	StatusError    = "error"
	StatusAccepted = "accepted"
	// StatusHeld: notify_response.v1 of a note held for its integration's
	// quiet hours (Held says until when); its route_response is accepted.
	StatusHeld = "held"
)

// ToolRouteExecute is route.v1's target.tool.
const ToolRouteExecute = "route.execute"

// RequestContext is the lineage of the inbound request a message belongs to.
// In route.v1 only request_id and received_at are required.
type RequestContext struct {
	RequestID              string `json:"request_id"`
	SourceChannel          string `json:"source_channel,omitempty"`
	SourceEndpointIdentity string `json:"source_endpoint_identity,omitempty"`
	SourceSenderIdentity   string `json:"source_sender_identity,omitempty"`
	SourceThreadIdentity   string `json:"source_thread_identity,omitempty"`
	ReceivedAt             string `json:"received_at,omitempty"`
}

// Notify is notify.v1: a butler's request to send, reply or react.
type Notify struct {
	SchemaVersion  string          `json:"schema_version"`
	OriginButler   string          `json:"origin_butler"`
	Delivery       Delivery        `json:"delivery"`
	RequestContext *RequestContext `json:"request_context,omitempty"`
	// IdempotencyKey is the caller's name for this notify (architecture.md §11): the
	// same key from the same butler is one delivery, whatever the request.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// PermissionRequest, set by the butler alone, is the client's request to
	// run a tool that this notify relays to an approver: the switchboard opens
	// the prompt from it and writes the message and buttons (architecture.md §5).
	PermissionRequest *PermissionRequest `json:"permission_request,omitempty"`
}

// PermissionRequest is a client's request to run a tool, as the butler
// relays it: the prompt's id, the tag of the MCP session that asked (never
// the session id itself), and the client's own words.
type PermissionRequest struct {
	ID           string `json:"id"`
	Session      string `json:"session"`
	ToolName     string `json:"tool_name"`
	Description  string `json:"description,omitempty"`
	InputPreview string `json:"input_preview,omitempty"`
}

// Delivery says what to deliver and where.
type Delivery struct {
	Intent           string   `json:"intent,omitempty"`
	Channel          string   `json:"channel,omitempty"`
	Message          string   `json:"message,omitempty"`
	Recipient        string   `json:"recipient,omitempty"`
	Subject          string   `json:"subject,omitempty"`
	Emoji            string   `json:"emoji,omitempty"`
	Urgency          string   `json:"urgency,omitempty"`
	Topic            string   `json:"topic,omitempty"`
	Level            string   `json:"level,omitempty"`
	ClaimThread      bool     `json:"claim_thread,omitempty"`
	ClaimThreadLabel string   `json:"claim_thread_label,omitempty"`
	ClaimSession     string   `json:"claim_session,omitempty"`
	AckWithin        string   `json:"ack_within,omitempty"`
	Actions          []Action `json:"actions,omitempty"`
	// EditOf, for intent edit, is the idempotency key of the butler's
	// delivery whose message is replaced (its ledger record's key).
	EditOf string `json:"edit_of,omitempty"`
	// Files are sent with the message; their bytes are in herald_files
	// (pkg/bus FileOutSubject of the origin butler and Object).
	Files []File `json:"files,omitempty"`
}

// File names one file a notify sends.
type File struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	MediaType string `json:"media_type"`
	// Object is the file's name in herald_files: the first 32 hex digits
	// of its sha256, so the same file sent again is the same notify.
	Object string `json:"object"`
}

// Action is a button under a message; data comes back as callback_data.
type Action struct {
	Label string `json:"label"`
	Data  string `json:"data"`
}

// Route is route.v1, the envelope every message travels in.
type Route struct {
	SchemaVersion  string         `json:"schema_version"`
	RequestContext RequestContext `json:"request_context"`
	Target         Target         `json:"target"`
	Input          Input          `json:"input"`
	TraceContext   *TraceContext  `json:"trace_context,omitempty"`
}

// Target names the butler a route is for (or, outbound, on whose behalf).
type Target struct {
	Butler string `json:"butler"`
	Tool   string `json:"tool"`
}

// Input is what the route carries.
type Input struct {
	Prompt  string       `json:"prompt,omitempty"`
	Context InputContext `json:"context"`
}

// InputContext holds exactly one payload: a notify on its way out, or an
// ingress on its way in.
type InputContext struct {
	NotifyRequest *Notify  `json:"notify_request,omitempty"`
	Ingress       *Ingress `json:"ingress,omitempty"`
}

// Ingress is ingress.v1: what a person sent, as the messenger received it.
type Ingress struct {
	SchemaVersion  string            `json:"schema_version"`
	RequestContext RequestContext    `json:"request_context"`
	IntegrationID  string            `json:"integration_id"`
	Content        Content           `json:"content"`
	Meta           map[string]string `json:"meta,omitempty"`
	Attachments    []Attachment      `json:"attachments,omitempty"`
	// NativeID is the provider's own id of the message (Telegram
	// "<bot_id>:<update_id>", email Message-ID); JetStream dedups on it.
	NativeID string `json:"native_id"`
}

// Content is the text of an inbound message.
type Content struct {
	Text string `json:"text"`
}

// Attachment describes a file that came with an inbound message; Ref says
// where to fetch it (it is never inlined).
type Attachment struct {
	Name string `json:"name"`
	Mime string `json:"mime"`
	Size int64  `json:"size"`
	Ref  string `json:"ref"`
	// Seconds is how long a voice note, audio or video plays, where the
	// provider says.
	Seconds int `json:"seconds,omitempty"`
}

// NewIngress builds an ingress.v1 with a fresh request_id stamped now.
func NewIngress(integrationID, channel, endpoint, sender, thread, text, nativeID string, meta map[string]string) *Ingress {
	return &Ingress{
		SchemaVersion: IngressV1,
		RequestContext: RequestContext{
			RequestID: NewRequestID(), SourceChannel: channel, SourceEndpointIdentity: endpoint,
			SourceSenderIdentity: sender, SourceThreadIdentity: thread, ReceivedAt: Now(),
		},
		IntegrationID: integrationID,
		Content:       Content{Text: text},
		Meta:          meta,
		NativeID:      nativeID,
	}
}

// NewInboundRoute wraps an ingress for the butler it is routed to. The
// route's request_id is the ingress's, so a reply can name it.
func NewInboundRoute(butler string, in *Ingress) *Route {
	return &Route{
		SchemaVersion:  RouteV1,
		RequestContext: RequestContext{RequestID: in.RequestContext.RequestID, ReceivedAt: Now()},
		Target:         Target{Butler: butler, Tool: ToolRouteExecute},
		Input:          Input{Context: InputContext{Ingress: in}},
	}
}

// TraceContext carries W3C trace context.
type TraceContext struct {
	Traceparent string `json:"traceparent,omitempty"`
}

// RequestRef is the request_context of responses: just the request answered.
type RequestRef struct {
	RequestID string `json:"request_id"`
}

// NotifyResponse is notify_response.v1, the messenger's answer.
type NotifyResponse struct {
	SchemaVersion  string          `json:"schema_version"`
	RequestContext RequestRef      `json:"request_context"`
	Status         string          `json:"status"`
	Delivery       *DeliveryResult `json:"delivery,omitempty"`
	Held           *HeldResult     `json:"held,omitempty"`
	Error          *ErrorBody      `json:"error,omitempty"`
}

// DeliveryResult says where a notify went: one message id per chunk.
type DeliveryResult struct {
	Channel    string   `json:"channel"`
	DeliveryID string   `json:"delivery_id"`
	MessageIDs []string `json:"message_ids,omitempty"`
	// Outcome is confirmed, or uncertain when an attempt died while calling
	// the provider (Note says what that means for this delivery).
	Outcome string `json:"outcome,omitempty"`
	Note    string `json:"note,omitempty"`
}

// RouteResponse is route_response.v1, the switchboard's answer to a route.
type RouteResponse struct {
	SchemaVersion  string       `json:"schema_version"`
	RequestContext RequestRef   `json:"request_context"`
	Status         string       `json:"status"`
	Result         *RouteResult `json:"result,omitempty"`
	Error          *ErrorBody   `json:"error,omitempty"`
	Timing         *Timing      `json:"timing,omitempty"`
}

// RouteResult carries the notify_response of a routed notify.
type RouteResult struct {
	NotifyResponse *NotifyResponse `json:"notify_response,omitempty"`
}

// Timing of a route, from its received_at to the answer.
type Timing struct {
	DurationMS float64 `json:"duration_ms"`
}

// NewNotify builds a notify.v1 with the defaults of architecture.md §3 filled in:
// intent send, urgency normal.
func NewNotify(origin string, d Delivery, rc *RequestContext) *Notify {
	if d.Intent == "" {
		d.Intent = IntentSend
	}
	if d.Urgency == "" {
		d.Urgency = "normal"
	}
	return &Notify{SchemaVersion: NotifyV1, OriginButler: origin, Delivery: d, RequestContext: rc}
}

// NewRoute wraps a notify in a route.v1 with a fresh request_id, on behalf of
// the notify's origin butler.
func NewRoute(n *Notify) *Route {
	return &Route{
		SchemaVersion:  RouteV1,
		RequestContext: RequestContext{RequestID: NewRequestID(), ReceivedAt: Now()},
		Target:         Target{Butler: n.OriginButler, Tool: ToolRouteExecute},
		Input:          Input{Context: InputContext{NotifyRequest: n}},
	}
}

// Notify returns the notify the route carries, or nil.
func (r *Route) Notify() *Notify { return r.Input.Context.NotifyRequest }

// OK builds a successful notify_response.
func OK(requestID string, d DeliveryResult) *NotifyResponse {
	return &NotifyResponse{SchemaVersion: NotifyResponseV1, RequestContext: RequestRef{requestID}, Status: StatusOK, Delivery: &d}
}

// Failed builds a failed notify_response from any error.
func Failed(requestID string, err error) *NotifyResponse {
	return &NotifyResponse{SchemaVersion: NotifyResponseV1, RequestContext: RequestRef{requestID}, Status: StatusError, Error: ErrorBodyFrom(err)}
}

// Answer wraps a notify_response in the route_response to route r.
func Answer(r *Route, nr *NotifyResponse) *RouteResponse {
	resp := &RouteResponse{
		SchemaVersion:  RouteResponseV1,
		RequestContext: RequestRef{r.RequestContext.RequestID},
		Status:         nr.Status,
		Result:         &RouteResult{NotifyResponse: nr},
		Error:          nr.Error,
	}
	if t, err := time.Parse(time.RFC3339Nano, r.RequestContext.ReceivedAt); err == nil {
		resp.Timing = &Timing{DurationMS: float64(time.Since(t).Microseconds()) / 1000}
	}
	return resp
}

// Reject builds the route_response for a route that could not be routed at all.
func Reject(requestID string, err error) *RouteResponse {
	return &RouteResponse{SchemaVersion: RouteResponseV1, RequestContext: RequestRef{requestID}, Status: StatusError, Error: ErrorBodyFrom(err)}
}

// Now is the current time as envelopes write it (RFC 3339 with offset).
func Now() string { return time.Now().UTC().Format(time.RFC3339Nano) }
