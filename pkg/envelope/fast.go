package envelope

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald/schemas"
)

// The fast path: every route a butler publishes is checked, and the schema
// interpreter costs a map decode, a tree walk and a second decode each time.
// fastRoute and fastNotify decode once into the Go types and check, in plain
// Go, what schemas/route.v1.json, notify.v1.json and request_context.v1.json
// (and goRules) say about a notify_request route. They answer ok only when
// sure the schema would accept; anything else (an ingress, a null, an empty
// string, a key with an escape, a duplicate key, a field they do not model)
// is left to the schema, which says what is wrong. They may be stricter than
// the schema, never looser: they mirror those three files and must change
// with them (TestFastSchemasUnchanged notices when they change).

// shape is the schema object a JSON value must be, for decodeFast.
type shape uint8

const (
	shNone shape = iota // no value expected here
	shLeaf              // a string or a boolean
	shRoute
	shRouteRC // route.v1's request_context
	shTarget
	shInput
	shContext
	shNotify
	shNotifyRC // request_context.v1
	shDelivery
	shActions // the one array
	shAction
	shTrace
)

type shapeKey struct {
	name  string
	child shape
}

var rcFields = []shapeKey{
	{"request_id", shLeaf}, {"source_channel", shLeaf}, {"source_endpoint_identity", shLeaf},
	{"source_sender_identity", shLeaf}, {"source_thread_identity", shLeaf}, {"received_at", shLeaf},
}

// shapeKeys lists, for each object shape, the keys the schema allows there (and
// the fast path models), the shape of each key's value, and which keys are
// required, as a bit mask over the key indexes.
var shapeKeys = [...]struct {
	fields   []shapeKey
	required uint32
}{
	shRoute: {[]shapeKey{
		{"schema_version", shLeaf}, {"request_context", shRouteRC}, {"target", shTarget},
		{"input", shInput}, {"trace_context", shTrace},
	}, 0b1111},
	shRouteRC:  {rcFields, 1<<0 | 1<<5},
	shTarget:   {[]shapeKey{{"butler", shLeaf}, {"tool", shLeaf}}, 0b11},
	shInput:    {[]shapeKey{{"prompt", shLeaf}, {"context", shContext}}, 0b10},
	shContext:  {[]shapeKey{{"notify_request", shNotify}}, 0b1}, // an ingress is left to the schema
	shNotify:   {[]shapeKey{{"schema_version", shLeaf}, {"origin_butler", shLeaf}, {"delivery", shDelivery}, {"request_context", shNotifyRC}, {"idempotency_key", shLeaf}}, 0b111},
	shNotifyRC: {rcFields, 0b1111},
	shDelivery: {[]shapeKey{
		{"intent", shLeaf}, {"channel", shLeaf}, {"message", shLeaf}, {"recipient", shLeaf},
		{"subject", shLeaf}, {"emoji", shLeaf}, {"urgency", shLeaf}, {"topic", shLeaf}, {"level", shLeaf},
		{"claim_thread", shLeaf}, {"claim_thread_label", shLeaf}, {"actions", shActions},
		{"claim_session", shLeaf}, {"ack_within", shLeaf}, {"edit_of", shLeaf},
	}, 0},
	shAction: {[]shapeKey{{"label", shLeaf}, {"data", shLeaf}}, 0b11},
	shTrace:  {[]shapeKey{{"traceparent", shLeaf}}, 0},
}

// decodeFast decodes data, one JSON object of shape root, into dst (a *Route
// for shRoute, a *Notify for shNotify) in a single pass, and reports whether
// it could be sure of it: every key is one the schema allows at its place,
// spelled byte for byte as there (so no escapes, and no "Message", which
// encoding/json would take for "message"), at most once per object (the
// schema sees the last of two, encoding/json merges them), every required key
// is there, and there is no null, no number and no empty string. The last
// rule makes "" mean "absent" in the decoded struct, which the checks below
// rely on. What it decodes is what json.Unmarshal would (FuzzFastRoute and
// FuzzFastNotify hold it to that); anything it is not sure of, bad syntax
// included, is false, and left to the schema and json.Unmarshal. It replaces
// a key scan followed by json.Unmarshal, which spent most of the switchboard's
// decoding time in reflection.
func decodeFast(data []byte, root shape, dst any) bool {
	d := fastDecoder{data: data}
	if !d.object(root, dst) {
		return false
	}
	d.space()
	return d.i == len(d.data)
}

// fastDecoder is decodeFast's position in its input. Each decoded string is
// a copy of its own, never a part of one copy of the input: a field kept
// long (a metric's label, say) would keep the whole envelope alive.
type fastDecoder struct {
	data []byte
	i    int
}

// space skips JSON whitespace.
func (d *fastDecoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips whitespace and returns the byte there (0 at the end).
func (d *fastDecoder) next() byte {
	d.space()
	if d.i < len(d.data) {
		return d.data[d.i]
	}
	return 0
}

// object decodes an object of shape s into obj, the struct that shape
// decodes into.
func (d *fastDecoder) object(s shape, obj any) bool {
	fields, required := shapeKeys[s].fields, shapeKeys[s].required
	var seen uint32
	return d.members(func(key []byte) bool {
		for j, f := range fields {
			if string(key) == f.name {
				seen |= 1 << j
				return d.value(obj, f)
			}
		}
		return false
	}) && seen&required == required
}

// value decodes the value of key k of obj.
func (d *fastDecoder) value(obj any, k shapeKey) bool {
	switch k.child {
	case shLeaf:
		switch d.next() {
		case '"':
			v, ok := d.str()
			return ok && setString(obj, k.name, v)
		case 't':
			return d.literal("true") && setBool(obj, k.name, true)
		case 'f':
			return d.literal("false") && setBool(obj, k.name, false)
		}
		return false
	case shActions:
		del, ok := obj.(*Delivery)
		return ok && d.actions(&del.Actions)
	}
	child := childObject(obj, k.name)
	return child != nil && d.object(k.child, child)
}

// actions decodes delivery.actions, a non-empty array of actions (an empty
// one is left to the schema, which refuses it).
func (d *fastDecoder) actions(dst *[]Action) bool {
	n, ok := d.elements(func() bool {
		*dst = append(*dst, Action{})
		return d.object(shAction, &(*dst)[len(*dst)-1])
	})
	return ok && n > 0
}

// literal consumes lit (true or false).
func (d *fastDecoder) literal(lit string) bool {
	if !bytes.HasPrefix(d.data[d.i:], []byte(lit)) {
		return false
	}
	d.i += len(lit)
	return true
}

// rawString consumes the string at d.i (an opening quote) and returns its
// bytes as written, and whether they are plain: no escape and nothing but
// ASCII. ok is false if it is unterminated or holds a control character,
// which JSON forbids.
func (d *fastDecoder) rawString() (raw []byte, plain, ok bool) {
	start := d.i + 1
	plain = true
	for j := start; j < len(d.data); j++ {
		switch c := d.data[j]; {
		case c == '"':
			d.i = j + 1
			return d.data[start:j], plain, true
		case c == '\\':
			plain = false
			j++ // the escaped byte; a \u's hex digits are plain bytes
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			plain = false
		}
	}
	return nil, false, false
}

// str consumes a string value and returns it decoded as encoding/json
// decodes it; "" is refused (in a route it means "absent").
func (d *fastDecoder) str() (string, bool) {
	s, ok := d.anyStr()
	return s, ok && s != ""
}

// anyStr consumes a string value, "" included, and returns it decoded as
// encoding/json decodes it. A plain one is its bytes; one with escapes or
// bytes beyond ASCII, rarer, goes to json.Unmarshal alone (which also
// replaces invalid UTF-8 as it does everywhere).
func (d *fastDecoder) anyStr() (string, bool) {
	start := d.i
	raw, plain, ok := d.rawString()
	switch {
	case !ok:
		return "", false
	case plain, !bytes.ContainsRune(raw, '\\') && utf8.Valid(raw):
		return string(raw), true
	}
	var s string
	if json.Unmarshal(d.data[start:d.i], &s) != nil {
		return "", false
	}
	return s, true
}

// childObject is the struct that key name of obj decodes into,
// made where the field is a pointer; nil if there is none.
func childObject(obj any, name string) any {
	switch o := obj.(type) {
	case *Route:
		switch name {
		case "request_context":
			return &o.RequestContext
		case "target":
			return &o.Target
		case "input":
			return &o.Input
		case "trace_context":
			o.TraceContext = new(TraceContext)
			return o.TraceContext
		}
	case *Input:
		if name == "context" {
			return &o.Context
		}
	case *InputContext:
		if name == "notify_request" {
			o.NotifyRequest = new(Notify)
			return o.NotifyRequest
		}
	case *Notify:
		switch name {
		case "delivery":
			return &o.Delivery
		case "request_context":
			o.RequestContext = new(RequestContext)
			return o.RequestContext
		}
	}
	return nil
}

// setString sets the string field that key name of obj stands for; false if
// it is not a string field.
func setString(obj any, name, v string) bool {
	var f *string
	switch o := obj.(type) {
	case *Route:
		if name == "schema_version" {
			f = &o.SchemaVersion
		}
	case *RequestContext:
		f = rcString(o, name)
	case *Target:
		f = targetString(o, name)
	case *Input:
		if name == "prompt" {
			f = &o.Prompt
		}
	case *Notify:
		f = notifyString(o, name)
	case *Delivery:
		f = deliveryString(o, name)
	case *Action:
		f = actionString(o, name)
	case *TraceContext:
		if name == "traceparent" {
			f = &o.Traceparent
		}
	}
	if f == nil {
		return false
	}
	*f = v
	return true
}

// rcString is the string field of a request_context (either schema's) that
// key name stands for; nil if there is none.
func rcString(o *RequestContext, name string) *string {
	switch name {
	case "request_id":
		return &o.RequestID
	case "source_channel":
		return &o.SourceChannel
	case "source_endpoint_identity":
		return &o.SourceEndpointIdentity
	case "source_sender_identity":
		return &o.SourceSenderIdentity
	case "source_thread_identity":
		return &o.SourceThreadIdentity
	case "received_at":
		return &o.ReceivedAt
	}
	return nil
}

// targetString is the string field of a route's target that key name
// stands for; nil if there is none.
func targetString(o *Target, name string) *string {
	switch name {
	case "butler":
		return &o.Butler
	case "tool":
		return &o.Tool
	}
	return nil
}

// notifyString is the string field of a notify.v1, outside its delivery and
// request_context, that key name stands for; nil if there is none.
func notifyString(o *Notify, name string) *string {
	switch name {
	case "schema_version":
		return &o.SchemaVersion
	case "origin_butler":
		return &o.OriginButler
	case "idempotency_key":
		return &o.IdempotencyKey
	}
	return nil
}

// deliveryString is the string field of a delivery that key name stands
// for; nil if there is none (claim_thread is a boolean, actions an array).
func deliveryString(o *Delivery, name string) *string {
	switch name {
	case "intent":
		return &o.Intent
	case "channel":
		return &o.Channel
	case "message":
		return &o.Message
	case "recipient":
		return &o.Recipient
	case "subject":
		return &o.Subject
	case "emoji":
		return &o.Emoji
	case "urgency":
		return &o.Urgency
	case "topic":
		return &o.Topic
	case "level":
		return &o.Level
	case "claim_thread_label":
		return &o.ClaimThreadLabel
	case "claim_session":
		return &o.ClaimSession
	case "ack_within":
		return &o.AckWithin
	case "edit_of":
		return &o.EditOf
	}
	return nil
}

// actionString is the string field of an action that key name stands for;
// nil if there is none.
func actionString(o *Action, name string) *string {
	switch name {
	case "label":
		return &o.Label
	case "data":
		return &o.Data
	}
	return nil
}

// setBool sets the boolean field that key name of obj stands for; false if
// it is not one.
func setBool(obj any, name string, v bool) bool {
	if o, ok := obj.(*Delivery); ok && name == "claim_thread" {
		o.ClaimThread = v
		return true
	}
	return false
}

// fastRoute decodes a route.v1 carrying a notify_request and reports whether
// it is sure the schema and goRules accept it.
func fastRoute(data []byte) (*Route, bool) {
	r := new(Route)
	if !decodeFast(data, shRoute, r) || !routeOK(r) {
		return nil, false
	}
	return r, true
}

// fastNotify is fastRoute for a bare notify.v1.
func fastNotify(data []byte) (*Notify, bool) {
	n := new(Notify)
	if !decodeFast(data, shNotify, n) || !notifyOK(n) {
		return nil, false
	}
	return n, true
}

func routeOK(r *Route) bool {
	rc := &r.RequestContext
	return r.SchemaVersion == RouteV1 &&
		rcOK(rc) && rc.ReceivedAt != "" && // request_id is checked by rcOK
		isName(r.Target.Butler) && r.Target.Tool == ToolRouteExecute &&
		r.Input.Context.Ingress == nil && r.Input.Context.NotifyRequest != nil &&
		notifyOK(r.Input.Context.NotifyRequest) &&
		(r.TraceContext == nil || r.TraceContext.Traceparent == "" || isTraceparent(r.TraceContext.Traceparent))
}

// rcOK checks the fields both request_context schemas share; each caller
// adds what its schema requires.
func rcOK(rc *RequestContext) bool {
	return isUUID7(rc.RequestID) &&
		(rc.SourceChannel == "" || isSourceChannel(rc.SourceChannel)) &&
		runes(rc.SourceEndpointIdentity, 0, 512) &&
		runes(rc.SourceSenderIdentity, 0, 512) &&
		runes(rc.SourceThreadIdentity, 0, 998) &&
		(rc.ReceivedAt == "" || isDateTime(rc.ReceivedAt))
}

// notifyOK reports whether the fast path is sure notify.v1 (and goRules)
// accept n. Each check below stands for one part of the schema; none has a
// side effect, so their order is only the schema's.
func notifyOK(n *Notify) bool {
	rc, d := n.RequestContext, &n.Delivery
	return notifyHeadOK(n) &&
		(rc == nil || notifyRCOK(rc)) &&
		deliveryEnumsOK(d) &&
		deliveryFieldsOK(d) &&
		actionsOK(d.Actions) &&
		intentRulesOK(d, rc)
}

// notifyHeadOK checks schema_version, origin_butler and idempotency_key.
func notifyHeadOK(n *Notify) bool {
	return n.SchemaVersion == NotifyV1 && isName(n.OriginButler) &&
		(n.IdempotencyKey == "" || isCallerKey(n.IdempotencyKey))
}

// notifyRCOK checks a notify's request_context, which request_context.v1
// requires to name its channel, endpoint and sender (request_id and
// received_at are checked by rcOK).
func notifyRCOK(rc *RequestContext) bool {
	return rcOK(rc) && rc.SourceChannel != "" && rc.SourceEndpointIdentity != "" && rc.SourceSenderIdentity != ""
}

// deliveryEnumsOK checks the delivery fields the schema gives as enums:
// intent, urgency and level, each of which may be absent.
func deliveryEnumsOK(d *Delivery) bool {
	switch d.Intent {
	case "", IntentSend, IntentReply, IntentReact, IntentEdit:
	default:
		return false
	}
	switch d.Urgency {
	case "", "low", "normal", "high":
	default:
		return false
	}
	switch d.Level {
	case "", "info", "warn", "error":
	default:
		return false
	}
	return true
}

// deliveryFieldsOK checks the delivery's other strings against their
// patterns and lengths.
func deliveryFieldsOK(d *Delivery) bool {
	return (d.Channel == "" || isChannel(d.Channel)) &&
		len(d.Message) <= MaxMessageBytes && // bytes bound runes: maxLength 65536 holds too
		runes(d.Recipient, 0, 512) && runes(d.Subject, 0, 998) && runes(d.Emoji, 0, 32) &&
		(d.Topic == "" || isName(d.Topic)) &&
		runes(d.ClaimThreadLabel, 0, 128) &&
		(d.ClaimSession == "" || isSessionTag(d.ClaimSession)) &&
		(d.AckWithin == "" || isAckWithin(d.AckWithin)) &&
		(d.EditOf == "" || isHexKey(d.EditOf))
}

// isHexKey reports whether s is a delivery key: 64 lowercase hex digits.
func isHexKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// actionsOK checks delivery.actions: absent, or one to eight buttons, each
// with a label and data of the schema's form.
func actionsOK(actions []Action) bool {
	if actions != nil && (len(actions) < 1 || len(actions) > 8) {
		return false
	}
	for _, a := range actions {
		if !runes(a.Label, 1, 64) || !isActionData(a.Data) {
			return false
		}
	}
	return true
}

// intentRulesOK checks the schema's allOf rules, which tie the delivery's
// intent to its message, emoji and request_context (rc, nil if absent). An
// absent intent is not react, so rule 1 holds for it.
func intentRulesOK(d *Delivery, rc *RequestContext) bool {
	if d.Intent != IntentReact && !hasNonSpace(d.Message) {
		return false // send and reply need a message
	}
	if (d.Intent == IntentReply || d.Intent == IntentReact) && rc == nil {
		return false // they answer a request
	}
	if d.Intent == IntentReact && (d.Emoji == "" || rc.SourceThreadIdentity == "") {
		return false // react needs an emoji and the message it reacts to
	}
	if d.Intent == IntentEdit && d.EditOf == "" {
		return false // edit names the delivery it edits
	}
	telegram := d.Channel == "telegram" || strings.HasPrefix(d.Channel, "telegram:") ||
		d.Channel == "" && rc != nil && rc.SourceChannel == "telegram"
	if d.Intent == IntentReply && telegram && rc.SourceThreadIdentity == "" {
		return false // a Telegram reply needs the message it replies to
	}
	return true
}

// runes reports whether s has lo (0 or 1) to hi runes, as JSON Schema
// counts length. Bytes bound runes from above, so most strings need no count.
func runes(s string, lo, hi int) bool {
	if len(s) < lo {
		return false
	}
	return len(s) <= hi || utf8.RuneCountInString(s) <= hi
}

// hasNonSpace stands for the pattern \S. Go's regexp takes only \t\n\f\r and
// space as \s; this also counts every Unicode space and U+FEFF (ECMA-262's
// \s), so it is stricter whichever engine the schema runs on.
func hasNonSpace(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) && r != '\uFEFF' {
			return true
		}
	}
	return false
}

// isCallerKey matches idempotency_key's ^[A-Za-z0-9._:-]{1,128}$.
func isCallerKey(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// isName matches ^[a-z][a-z0-9_-]{0,62}$ (butler, origin_butler, topic).
func isName(s string) bool {
	if len(s) < 1 || len(s) > 63 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// isChannel matches delivery.channel's pattern
// ^(type|...)(:[A-Za-z0-9][A-Za-z0-9_-]{0,62})?$, whose types are
// channelTypes, so goRules' known-type check holds too.
func isChannel(s string) bool {
	typ, id, hasID := strings.Cut(s, ":")
	known := false
	for _, t := range channelTypes {
		if typ == t {
			known = true
			break
		}
	}
	if !known {
		return false
	}
	if !hasID {
		return true
	}
	if len(id) < 1 || len(id) > 63 || !isAlnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isActionData matches ^[A-Za-z0-9_:.-]{1,64}$.
func isActionData(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != ':' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// isSessionTag is claim_session's pattern, ^[0-9a-f]{16}$.
func isSessionTag(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isAckWithin is ack_within's pattern, ^([0-9]{1,6}[smhd]){1,4}$.
func isAckWithin(s string) bool {
	parts, digits := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			if digits++; digits > 6 {
				return false
			}
		case (c == 's' || c == 'm' || c == 'h' || c == 'd') && digits > 0:
			digits = 0
			if parts++; parts > 4 {
				return false
			}
		default:
			return false
		}
	}
	return parts > 0 && digits == 0
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// sourceChannels is request_context.v1's source_channel enum, as a set.
var sourceChannels = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range schemas.SourceChannels {
		m[s] = true
	}
	return m
}()

func isSourceChannel(s string) bool { return sourceChannels[s] }

// isUUID7 matches ^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$
// (which the uuid format accepts too).
func isUUID7(s string) bool {
	if len(s) != 36 || s[14] != '7' || !strings.ContainsRune("89ab", rune(s[19])) {
		return false
	}
	return dashedHex(s, 8, 13, 18, 23)
}

func isLowerHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// dashedHex reports whether s is lower-case hex digits with a '-' at each of
// dashes (ascending) and nowhere else.
func dashedHex(s string, dashes ...int) bool {
	for i := 0; i < len(s); i++ {
		if len(dashes) > 0 && i == dashes[0] {
			if s[i] != '-' {
				return false
			}
			dashes = dashes[1:]
		} else if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

// isDateTime accepts yyyy-mm-ddThh:mm:ss[.frac](Z|+hh:mm|-hh:mm) with an
// upper-case T and Z, a real calendar day and no leap second: a narrow form
// that both the schema's date-time format and time.Parse(time.RFC3339Nano)
// accept.
func isDateTime(s string) bool {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return false
	}
	rest := s[19:]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 {
			return false
		}
		rest = rest[n:]
	}
	if rest == "Z" {
		return true
	}
	if len(rest) != 6 || rest[0] != '+' && rest[0] != '-' || rest[3] != ':' {
		return false
	}
	oh, ok1 := digits(rest[1:3])
	om, ok2 := digits(rest[4:6])
	return ok1 && ok2 && oh <= 23 && om <= 59
}

// digits parses a short run of ASCII digits.
func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// members consumes an object, calling member for each key (spelled plainly:
// no escape, nothing beyond ASCII) with d at the key's value, which member
// consumes. A key met twice is refused (encoding/json would merge the two),
// and so is an object of more keys than any envelope has.
func (d *fastDecoder) members(member func(key []byte) bool) bool {
	if d.next() != '{' {
		return false
	}
	d.i++
	if d.next() == '}' {
		d.i++
		return true
	}
	var seen [16][]byte
	n := 0
	for {
		if d.next() != '"' {
			return false
		}
		key, plain, ok := d.rawString()
		if !ok || !plain || n == len(seen) {
			return false
		}
		if slices.ContainsFunc(seen[:n], func(k []byte) bool { return bytes.Equal(k, key) }) {
			return false
		}
		seen[n] = key
		n++
		if d.next() != ':' {
			return false
		}
		d.i++
		if !member(key) {
			return false
		}
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// elements consumes an array, calling element with d at each element, which
// element consumes, and returns how many there were.
func (d *fastDecoder) elements(element func() bool) (int, bool) {
	if d.next() != '[' {
		return 0, false
	}
	d.i++
	if d.next() == ']' {
		d.i++
		return 0, true
	}
	for n := 1; ; n++ {
		if !element() {
			return n, false
		}
		switch d.next() {
		case ',':
			d.i++
		case ']':
			d.i++
			return n, true
		default:
			return n, false
		}
	}
}
