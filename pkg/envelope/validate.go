package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/heraldhq/herald/schemas"
)

// MaxMessageBytes bounds delivery.message (64 KiB).
const MaxMessageBytes = 64 << 10

// channelTypes are the channel types a notify may name.
var channelTypes = schemas.ChannelTypes

// FieldError is one failing field, named by JSON pointer ("" is the root).
type FieldError struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// ValidationError lists every failing field of an envelope, sorted by pointer.
// It is an ErrValidation.
type ValidationError struct {
	Schema string
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		p := f.Pointer
		if p == "" {
			p = "/"
		}
		parts[i] = p + ": " + f.Message
	}
	msg := fmt.Sprintf("invalid %s: %s", strings.TrimSuffix(e.Schema, ".json"), strings.Join(parts, "; "))
	if lead := e.lead(); lead != "" {
		return lead + "; " + msg
	}
	return msg
}

// lead is the sentence notify servers commonly start their error with, for
// the two mistakes it names, so a caller written against one recognises them:
// "Missing required 'message' parameter" and "Unsupported channel 'sms'".
// Herald's list of failing fields follows it.
func (e *ValidationError) lead() string {
	var out []string
	for _, f := range e.Fields {
		if strings.HasSuffix(f.Pointer, "/delivery/message") && (f.Message == "is required" || f.Message == "must not be empty") {
			out = append(out, "Missing required 'message' parameter")
			break
		}
	}
	for _, f := range e.Fields {
		if rest, ok := strings.CutPrefix(f.Message, unknownChannel); ok && strings.HasSuffix(f.Pointer, "/delivery/channel") {
			if q, err := strconv.QuotedPrefix(rest); err == nil {
				typ, _ := strconv.Unquote(q)
				out = append(out, "Unsupported channel '"+typ+"'")
				break
			}
		}
	}
	return strings.Join(out, "; ")
}

// unknownChannel starts the message of a channel type Herald does not have.
const unknownChannel = "unknown channel type "

// Unwrap makes a ValidationError an ErrValidation.
func (e *ValidationError) Unwrap() error { return ErrValidation }

// Pointers lists the failing fields.
func (e *ValidationError) Pointers() []string {
	out := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		out[i] = f.Pointer
	}
	return out
}

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
	printer     = message.NewPrinter(language.English)
)

func schemaFor(name string) (*jsonschema.Schema, error) {
	compileOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		files, err := schemas.FS.ReadDir(".")
		if err != nil {
			compileErr = err
			return
		}
		for _, f := range files {
			b, err := schemas.FS.ReadFile(f.Name())
			if err != nil {
				compileErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				compileErr = fmt.Errorf("schema %s: %w", f.Name(), err)
				return
			}
			if err := c.AddResource(schemas.BaseURI+f.Name(), doc); err != nil {
				compileErr = err
				return
			}
		}
		compiled = map[string]*jsonschema.Schema{}
		for _, f := range files {
			s, err := c.Compile(schemas.BaseURI + f.Name())
			if err != nil {
				compileErr = fmt.Errorf("schema %s: %w", f.Name(), err)
				return
			}
			compiled[f.Name()] = s
		}
	})
	if compileErr != nil {
		return nil, fmt.Errorf("%w: compiling schemas: %w", ErrInternal, compileErr)
	}
	s, ok := compiled[name]
	if !ok {
		return nil, fmt.Errorf("%w: no schema %q", ErrInternal, name)
	}
	return s, nil
}

// Validate checks data against the named schema (schemas.Notify, ...) and,
// for notify and route, the rules a schema cannot say. The error is a
// *ValidationError naming every failing field.
func Validate(schema string, data []byte) error {
	s, err := schemaFor(schema)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return &ValidationError{Schema: schema, Fields: []FieldError{{Message: "not valid JSON: " + err.Error()}}}
	}
	var fields []FieldError
	if err := s.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return fmt.Errorf("%w: validating %s: %w", ErrInternal, schema, err)
		}
		fields = leaves(ve, nil)
	}
	fields = append(fields, goRules(schema, doc)...)
	if len(fields) == 0 {
		return nil
	}
	return &ValidationError{Schema: schema, Fields: tidy(fields)}
}

// leaves flattens the validator's error tree to its leaf errors, each with the
// pointer of the field at fault.
func leaves(ve *jsonschema.ValidationError, out []FieldError) []FieldError {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			out = leaves(c, out)
		}
		return out
	}
	ptr := pointer(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			out = append(out, FieldError{Pointer: ptr + "/" + escape(m), Message: "is required"})
		}
	case *kind.AdditionalProperties:
		msg := "is not a known field; remove it"
		if strings.HasSuffix(ptr, "/meta") {
			msg = "is not a valid meta key: use letters, digits and _ only"
		}
		for _, p := range k.Properties {
			out = append(out, FieldError{Pointer: ptr + "/" + escape(p), Message: msg})
		}
	case *kind.Const:
		out = append(out, FieldError{Pointer: ptr, Message: fmt.Sprintf("must be %s", mustJSON(k.Want))})
	case *kind.Pattern, *kind.Format:
		out = append(out, FieldError{Pointer: ptr, Message: describePattern(ptr, ve.ErrorKind)})
	case *kind.MinLength:
		if strings.HasSuffix(ptr, "/message") {
			out = append(out, FieldError{Pointer: ptr, Message: "must not be empty"})
			break
		}
		out = append(out, FieldError{Pointer: ptr, Message: ve.ErrorKind.LocalizedString(printer)})
	default:
		out = append(out, FieldError{Pointer: ptr, Message: ve.ErrorKind.LocalizedString(printer)})
	}
	return out
}

func describePattern(ptr string, k jsonschema.ErrorKind) string {
	switch {
	case strings.HasSuffix(ptr, "/request_id"):
		return "must be a UUIDv7 (lower-case, version 7)"
	case strings.HasSuffix(ptr, "/message"):
		return "must not be empty"
	case strings.HasSuffix(ptr, "/origin_butler"), strings.HasSuffix(ptr, "/butler"):
		return "must be a butler name matching ^[a-z][a-z0-9_-]{0,62}$"
	case strings.HasSuffix(ptr, "/received_at"):
		return "must be an RFC 3339 date-time with offset"
	}
	return k.LocalizedString(printer)
}

// goRules are the rules of architecture.md §3 a schema cannot say well.
func goRules(schema string, doc any) []FieldError {
	var out []FieldError
	check := func(prefix string, notify any) {
		d, _ := dig(notify, "delivery").(map[string]any)
		if msg, ok := d["message"].(string); ok && len(msg) > MaxMessageBytes {
			out = append(out, FieldError{Pointer: prefix + "/delivery/message", Message: fmt.Sprintf("is %d bytes; the limit is %d (64 KiB)", len(msg), MaxMessageBytes)})
		}
		if ch, ok := d["channel"].(string); ok {
			typ, _, _ := strings.Cut(ch, ":")
			if !slices.Contains(channelTypes, typ) {
				out = append(out, FieldError{Pointer: prefix + "/delivery/channel", Message: fmt.Sprintf(unknownChannel+"%q (known: %s)", typ, strings.Join(channelTypes, ", "))})
			}
		}
	}
	switch schema {
	case schemas.Notify:
		check("", doc)
	case schemas.Route:
		if n := dig(doc, "input", "context", "notify_request"); n != nil {
			check("/input/context/notify_request", n)
		}
	}
	return out
}

// tidy sorts (validator order is not stable), drops duplicates, and lets a
// specific message replace the generic one for the same field.
func tidy(fields []FieldError) []FieldError {
	specific := map[string]bool{}
	for _, f := range fields {
		if strings.HasPrefix(f.Message, unknownChannel) {
			specific[f.Pointer] = true
		}
	}
	fields = slices.DeleteFunc(fields, func(f FieldError) bool {
		return specific[f.Pointer] && !strings.HasPrefix(f.Message, unknownChannel)
	})
	slices.SortFunc(fields, func(a, b FieldError) int {
		if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(fields)
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, s := range loc {
		b.WriteString("/")
		b.WriteString(escape(s))
	}
	return b.String()
}

func escape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// DecodeNotify validates data as notify.v1 and decodes it. The common case
// is decided by fastNotify: plain Go that accepts only what the schema and
// goRules accept, decoded as json.Unmarshal decodes it. Anything it is not
// sure of (a null, an empty string, a duplicate key, every invalid notify)
// goes through Validate, so errors are the schema's.
func DecodeNotify(data []byte) (*Notify, error) {
	if n, ok := fastNotify(data); ok {
		return n, nil
	}
	if err := Validate(schemas.Notify, data); err != nil {
		return nil, err
	}
	var n Notify
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrValidation, err)
	}
	return &n, nil
}

// DecodeRoute validates data as route.v1 and decodes it. A route carrying a
// notify_request, as butlers publish it, is decided by fastRoute: plain Go
// that accepts only what the schema and goRules accept, decoded as
// json.Unmarshal decodes it. Anything it is not sure of (an ingress, a null,
// an empty string, a duplicate key, every invalid route) goes through
// Validate, so errors are the schema's.
func DecodeRoute(data []byte) (*Route, error) {
	if r, ok := fastRoute(data); ok {
		return r, nil
	}
	if err := Validate(schemas.Route, data); err != nil {
		return nil, err
	}
	var r Route
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrValidation, err)
	}
	return &r, nil
}

// DecodeTrustedRoute decodes a route.v1 that a Herald service built and
// published on a subject only that service may publish to (HERALD_DELIVER:
// the switchboard; HERALD_INBOX: the switchboard). Its schema was checked
// where it entered Herald (the switchboard validates every route a butler
// sends, the messenger every ingress a receiver builds), so the hot path
// does not check it again; what decoding can tell is still checked. A notify
// route takes decodeFast, which decodes as json.Unmarshal does.
func DecodeTrustedRoute(data []byte) (*Route, error) {
	var r Route
	if !decodeFast(data, shRoute, &r) {
		// An ingress, or a notify the fast decoder is not sure of.
		r = Route{}
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrValidation, err)
		}
	}
	if r.SchemaVersion != RouteV1 {
		return nil, fmt.Errorf("%w: schema_version %q, want %s", ErrValidation, r.SchemaVersion, RouteV1)
	}
	return &r, nil
}

// DecodeTrustedResponse decodes a route_response.v1 the messenger published
// (on HERALD_RESULT, or to the butler waiting for it: only it may), without
// checking its schema again.
func DecodeTrustedResponse(data []byte) (*RouteResponse, error) {
	var r RouteResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrValidation, err)
	}
	if r.SchemaVersion != RouteResponseV1 {
		return nil, fmt.Errorf("%w: schema_version %q, want %s", ErrValidation, r.SchemaVersion, RouteResponseV1)
	}
	return &r, nil
}

// Check validates an envelope built in Go against its schema.
func Check(schema string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInternal, err)
	}
	return Validate(schema, b)
}

// DecodeIngress validates data as ingress.v1 and decodes it.
func DecodeIngress(data []byte) (*Ingress, error) {
	if err := Validate(schemas.Ingress, data); err != nil {
		return nil, err
	}
	var in Ingress
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrValidation, err)
	}
	return &in, nil
}
