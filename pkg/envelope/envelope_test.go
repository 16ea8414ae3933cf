package envelope_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/invalid")

// schemaOf picks the schema of a golden file by its name's prefix.
func schemaOf(name string) string {
	for _, s := range []string{schemas.NotifyResponse, schemas.RouteResponse, schemas.Notify, schemas.Route, schemas.Ingress} {
		if strings.HasPrefix(name, strings.TrimSuffix(s, ".v1.json")+"_") {
			return s
		}
	}
	return ""
}

func TestGoldenValid(t *testing.T) {
	eachGolden(t, "valid", func(t *testing.T, f string, b []byte) {
		if err := envelope.Validate(schemaOf(filepath.Base(f)), b); err != nil {
			t.Fatalf("valid envelope rejected: %v", err)
		}
	})
}

// eachGolden runs test on each envelope of testdata/dir, as a subtest named
// for the file.
func eachGolden(t *testing.T, dir string, test func(t *testing.T, file string, b []byte)) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			test(t, f, b)
		})
	}
}

// TestGoldenInvalid checks that each broken envelope is refused with exactly
// the fields named in its .golden file (sorted; run with -update to rewrite).
func TestGoldenInvalid(t *testing.T) {
	eachGolden(t, "invalid", func(t *testing.T, f string, b []byte) {
		err := envelope.Validate(schemaOf(filepath.Base(f)), b)
		var ve *envelope.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, envelope.ErrValidation) {
			t.Fatalf("want a validation error, got %v", err)
		}
		var got strings.Builder
		for _, fe := range ve.Fields {
			// The list of channel types is pkg/config's table's: a channel
			// added changes no golden file.
			got.WriteString(fe.Pointer + ": " + strings.ReplaceAll(fe.Message, strings.Join(schemas.ChannelTypes, ", "), "<channel types>") + "\n")
		}
		golden := strings.TrimSuffix(f, ".json") + ".golden"
		if *update {
			if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if got.String() != string(want) {
			t.Errorf("field errors differ (-want +got):\n-%s\n+%s", strings.ReplaceAll(string(want), "\n", "\n-"), strings.ReplaceAll(got.String(), "\n", "\n+"))
		}
	})
}

// TestRules breaks each rule of architecture.md §3 on an otherwise valid notify and
// checks the field named.
func TestRules(t *testing.T) {
	rc := func() *envelope.RequestContext {
		return &envelope.RequestContext{RequestID: envelope.NewRequestID(), SourceChannel: "telegram", SourceEndpointIdentity: "tg_main", SourceSenderIdentity: "12345", SourceThreadIdentity: "12345:7"}
	}
	tests := []struct {
		name  string
		build func() *envelope.Notify
		want  string // pointer of the failing field; "" means valid
	}{
		{"send ok", func() *envelope.Notify { return envelope.NewNotify("health", envelope.Delivery{Message: "hi"}, nil) }, ""},
		{"empty message", func() *envelope.Notify { return envelope.NewNotify("health", envelope.Delivery{}, nil) }, "/delivery/message"},
		{"message over 64 KiB", func() *envelope.Notify {
			return envelope.NewNotify("health", envelope.Delivery{Message: strings.Repeat("é", 40000)}, nil)
		}, "/delivery/message"},
		{"reply without request_context", func() *envelope.Notify {
			return envelope.NewNotify("health", envelope.Delivery{Intent: "reply", Channel: "email", Message: "ok"}, nil)
		}, "/request_context"},
		{"telegram reply without thread", func() *envelope.Notify {
			c := rc()
			c.SourceThreadIdentity = ""
			return envelope.NewNotify("health", envelope.Delivery{Intent: "reply", Channel: "telegram", Message: "ok"}, c)
		}, "/request_context/source_thread_identity"},
		{"email reply without thread is fine", func() *envelope.Notify {
			c := rc()
			c.SourceThreadIdentity, c.SourceChannel = "", "email"
			return envelope.NewNotify("health", envelope.Delivery{Intent: "reply", Message: "ok"}, c)
		}, ""},
		{"react without emoji", func() *envelope.Notify {
			return envelope.NewNotify("health", envelope.Delivery{Intent: "react"}, rc())
		}, "/delivery/emoji"},
		{"react needs no message", func() *envelope.Notify {
			return envelope.NewNotify("health", envelope.Delivery{Intent: "react", Emoji: "👍"}, rc())
		}, ""},
		{"unknown channel", func() *envelope.Notify {
			return envelope.NewNotify("health", envelope.Delivery{Channel: "pigeon", Message: "hi"}, nil)
		}, "/delivery/channel"},
		{"unknown intent", func() *envelope.Notify {
			return envelope.NewNotify("health", envelope.Delivery{Intent: "yell", Message: "hi"}, nil)
		}, "/delivery/intent"},
		{"wrong schema_version", func() *envelope.Notify {
			n := envelope.NewNotify("health", envelope.Delivery{Message: "hi"}, nil)
			n.SchemaVersion = "notify.v0"
			return n
		}, "/schema_version"},
		{"request_id not a UUIDv7", func() *envelope.Notify {
			c := rc()
			c.RequestID = "8c5f1b1e-4b7e-4a1a-9d8e-3f2a1b0c9d8e"
			return envelope.NewNotify("health", envelope.Delivery{Intent: "reply", Channel: "telegram", Message: "ok"}, c)
		}, "/request_context/request_id"},
		{"bad urgency", func() *envelope.Notify {
			return envelope.NewNotify("health", envelope.Delivery{Message: "hi", Urgency: "panic"}, nil)
		}, "/delivery/urgency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := envelope.Check(schemas.Notify, tt.build())
			if tt.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var ve *envelope.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a validation error naming %s, got %v", tt.want, err)
			}
			if !strings.Contains(strings.Join(ve.Pointers(), " "), tt.want) {
				t.Fatalf("error %q does not name %s", err, tt.want)
			}
			if got := envelope.ErrorBodyFrom(err); got.Class != "validation_error" || got.Retryable {
				t.Fatalf("wire error = %+v, want class validation_error, not retryable", got)
			}
		})
	}
}

func TestUnknownFieldInRoute(t *testing.T) {
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "hi"}, nil))
	b, _ := json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["input"].(map[string]any)["context"].(map[string]any)["notify_request"].(map[string]any)["sender"] = "root"
	b, _ = json.Marshal(m)
	_, err := envelope.DecodeRoute(b)
	var ve *envelope.ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Pointer != "/input/context/notify_request/sender" {
		t.Fatalf("want the unknown field named by its pointer, got %v", err)
	}
}

func TestNewRequestIDIsUUIDv7(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	prev := ""
	for range 1000 {
		id := envelope.NewRequestID()
		if !re.MatchString(id) {
			t.Fatalf("%q is not a UUIDv7", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		if id[:13] < prev[:min(13, len(prev))] {
			t.Fatalf("ids do not sort by time: %s after %s", id, prev)
		}
		prev = id
	}
}

// TestIdempotencyKeyIsStable: the key of a notify is the same from release to
// release (the ledger and JetStream's duplicate window hold keys written by
// the version before): pinned for one fixed notify.
func TestIdempotencyKeyIsStable(t *testing.T) {
	rc := &envelope.RequestContext{RequestID: "0190f3c2-7a1b-7c3d-8e4f-0123456789ab", SourceChannel: "telegram", SourceEndpointIdentity: "tg", SourceSenderIdentity: "1", SourceThreadIdentity: "1:2"}
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Intent: "reply", Channel: "telegram:tg_main", Recipient: "42", Message: "Done: **3** files 🦀", Emoji: ""}, rc))
	const want = "be088a8842924381057427ab61ed2a0f39e2279d315746196dc882e60e931566"
	if got := r.IdempotencyKey(); got != want {
		t.Errorf("key %s, want %s", got, want)
	}
}

func TestIdempotencyKey(t *testing.T) {
	rc := &envelope.RequestContext{RequestID: envelope.NewRequestID(), SourceChannel: "telegram", SourceEndpointIdentity: "tg", SourceSenderIdentity: "1", SourceThreadIdentity: "1:2"}
	reply := func(msg string) *envelope.Route {
		return envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Intent: "reply", Channel: "telegram", Message: msg}, rc))
	}
	send := func(msg string) *envelope.Route {
		return envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: msg}, nil))
	}
	if first, again := reply("ok"), reply("ok"); first.IdempotencyKey() != again.IdempotencyKey() {
		t.Error("the same reply to the same request must be one delivery")
	}
	if reply("ok").IdempotencyKey() == reply("ok!").IdempotencyKey() {
		t.Error("two different replies to one request must be two deliveries")
	}
	if first, again := send("backup done"), send("backup done"); first.IdempotencyKey() == again.IdempotencyKey() {
		t.Error("two separate sends must be two deliveries")
	}
	r := send("x")
	b, _ := json.Marshal(r)
	again, err := envelope.DecodeRoute(b)
	if err != nil || again.IdempotencyKey() != r.IdempotencyKey() {
		t.Errorf("a re-published route must keep its key (err %v)", err)
	}
	other := envelope.NewRoute(envelope.NewNotify("finance", envelope.Delivery{Message: "x"}, nil))
	other.RequestContext.RequestID = r.RequestContext.RequestID
	if other.IdempotencyKey() == r.IdempotencyKey() {
		t.Error("the origin butler must be part of the key")
	}
}

func TestErrorBodyFrom(t *testing.T) {
	tests := []struct {
		err       error
		class     string
		retryable bool
	}{
		{envelope.ErrValidation, "validation_error", false},
		{errors.Join(errors.New("x"), envelope.ErrTargetUnavailable), "target_unavailable", true},
		{&envelope.RetryAfterError{Wait: 1}, "overload_rejected", true},
		{errors.New("boom"), "internal_error", false},
		// The outermost wrap decides, whatever class the cause carries.
		{fmt.Errorf("%w: publishing: %w", envelope.ErrTargetUnavailable, &envelope.ValidationError{}), "target_unavailable", true},
		{fmt.Errorf("%w: bad field: %w", envelope.ErrValidation, envelope.ErrTargetUnavailable), "validation_error", false},
		{fmt.Errorf("chunk 2 of 3: %w", fmt.Errorf("%w: telegram down: %w", envelope.ErrTargetUnavailable, context.DeadlineExceeded)), "target_unavailable", true},
		{fmt.Errorf("waiting: %w", context.DeadlineExceeded), "timeout", true},
		{fmt.Errorf("%w: relayed", &envelope.ErrorBody{Class: "forbidden", Message: "no"}), "forbidden", false},
	}
	for _, tt := range tests {
		got := envelope.ErrorBodyFrom(tt.err)
		if got.Class != tt.class || got.Retryable != tt.retryable {
			t.Errorf("ErrorBodyFrom(%v) = %+v, want %s retryable=%v", tt.err, got, tt.class, tt.retryable)
		}
	}
}

// FuzzDecodeRoute feeds arbitrary bytes to decode + validate: it must never
// panic, and whatever it accepts must re-encode to something it accepts again.
func FuzzDecodeRoute(f *testing.F) {
	addSeeds(f, "testdata/valid/route_notify.json", "testdata/invalid/route_wrong_tool.json")
	f.Add([]byte(`{"schema_version":"route.v1"}`))
	f.Add([]byte(`[]`))
	fuzzDecode(f, envelope.DecodeRoute, func(t *testing.T, b []byte, r *envelope.Route) {
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := envelope.DecodeRoute(again); err != nil {
			t.Fatalf("accepted %s but not its re-encoding %s: %v", b, again, err)
		}
	})
}

// FuzzDecodeNotify does the same for notify.v1 alone.
func FuzzDecodeNotify(f *testing.F) {
	addSeeds(f, "testdata/*/notify_*.json")
	fuzzDecode(f, envelope.DecodeNotify, func(t *testing.T, _ []byte, n *envelope.Notify) {
		if n.SchemaVersion != envelope.NotifyV1 {
			t.Fatalf("accepted schema_version %q", n.SchemaVersion)
		}
	})
}

// FuzzDecodeIngress: whatever a channel hands in, decoding never panics and
// what it accepts keeps its lineage.
func FuzzDecodeIngress(f *testing.F) {
	addSeeds(f, "testdata/*/ingress_*.json")
	fuzzDecode(f, envelope.DecodeIngress, func(t *testing.T, b []byte, in *envelope.Ingress) {
		if in.NativeID == "" || in.RequestContext.SourceSenderIdentity == "" {
			t.Fatalf("accepted an ingress without native_id or sender: %s", b)
		}
		for k := range in.Meta {
			if k == "" || strings.ContainsFunc(k, func(r rune) bool {
				return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
			}) {
				t.Fatalf("accepted meta key %q", k)
			}
		}
	})
}

// fuzzDecode fuzzes decode: it never panics, refuses only with a validation
// error, and accepts only what check finds sound.
func fuzzDecode[T any](f *testing.F, decode func([]byte) (T, error), check func(t *testing.T, b []byte, v T)) {
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decode(b)
		if err != nil {
			if !errors.Is(err, envelope.ErrValidation) {
				t.Fatalf("decode error is not a validation error: %v", err)
			}
			return
		}
		check(t, b, v)
	})
}

// addSeeds adds the files the patterns match to f's seed corpus; a pattern
// that matches none is an error.
func addSeeds(f *testing.F, patterns ...string) {
	f.Helper()
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		if len(files) == 0 {
			f.Fatalf("no seed file matches %s", p)
		}
		for _, g := range files {
			b, err := os.ReadFile(g)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

func TestInboundRouteKeepsTheRequestID(t *testing.T) {
	in := envelope.NewIngress("tg_main", "telegram", "tg_main", "12345", "12345:42", "hi", "777:1", map[string]string{"chat_id": "12345"})
	r := envelope.NewInboundRoute("health", in)
	if err := envelope.Check(schemas.Route, r); err != nil {
		t.Fatal(err)
	}
	if r.RequestContext.RequestID != in.RequestContext.RequestID {
		t.Fatal("a reply names the inbound request_id; the route must carry it")
	}
}
