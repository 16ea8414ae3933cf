package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/schemas"
)

const (
	testUUID = "0190a0e4-1c2b-7def-8def-0123456789ab"
	testTP   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// wrapNotify puts a notify.v1 document in a route.v1, as a butler publishes it.
func wrapNotify(notify []byte) []byte {
	return fmt.Appendf(nil, `{"schema_version":"route.v1","request_context":{"request_id":%q,"received_at":"2026-11-22T09:00:00.123456Z"},`+
		`"target":{"butler":"health","tool":"route.execute"},"input":{"context":{"notify_request":%s}},"trace_context":{"traceparent":%q}}`,
		testUUID, notify, testTP)
}

// notifyWithActions uses every delivery field a send may carry.
const notifyWithActions = `{"schema_version":"notify.v1","origin_butler":"health","delivery":{"intent":"send","channel":"telegram:tg_main",
"message":"Refill the pills? Answer yes or no.","recipient":"12345","subject":"Pills","urgency":"high","topic":"meds","level":"warn",
"claim_thread":true,"claim_thread_label":"Refill","claim_session":"0123456789abcdef","ack_within":"10m","actions":[{"label":"Yes ✅","data":"refill:yes"},{"label":"No","data":"refill:no"}]}}`

// builtNotifies are notifies as the butler builds them in Go.
func builtNotifies() map[string]*Notify {
	rc := func(channel, thread string) *RequestContext {
		return &RequestContext{RequestID: NewRequestID(), SourceChannel: channel, SourceEndpointIdentity: "tg_main",
			SourceSenderIdentity: "12345", SourceThreadIdentity: thread, ReceivedAt: Now()}
	}
	return map[string]*Notify{
		"built send":  NewNotify("health", Delivery{Message: "Backup finished <ok> & \"done\"\n"}, nil),
		"built reply": NewNotify("health", Delivery{Intent: IntentReply, Message: "Done."}, rc("telegram", "12345:42")),
		"built email reply without thread": NewNotify("health", Delivery{Intent: IntentReply, Message: "Paid."},
			rc("email", "")),
		"built react": NewNotify("health", Delivery{Intent: IntentReact, Emoji: "👍"}, rc("telegram", "12345:42")),
		"built actions": NewNotify("health", Delivery{Channel: "telegram", Message: "Refill?", ClaimThread: true,
			Actions: []Action{{Label: "Yes", Data: "yes"}, {Label: "No", Data: "no"}}}, nil),
	}
}

// validNotifies are the golden notify.v1 documents, one with every delivery
// field, and the built ones.
func validNotifies(t testing.TB) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob("testdata/valid/notify_*.json")
	docs := map[string][]byte{"actions": []byte(notifyWithActions)}
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "notify_response") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.Base(f)] = b
	}
	if len(docs) < 5 {
		t.Fatalf("only %d golden notify documents", len(docs))
	}
	for name, n := range builtNotifies() {
		docs[name] = mustMarshal(t, n)
	}
	return docs
}

// validRoutes are the golden notify route, every valid notify wrapped, and
// the built notifies in the routes the butler publishes.
func validRoutes(t testing.TB) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile("testdata/valid/route_notify.json")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string][]byte{"route_notify.json": b}
	for name, n := range validNotifies(t) {
		docs["wrapped "+name] = wrapNotify(n)
	}
	for name, n := range builtNotifies() {
		r := NewRoute(n)
		r.TraceContext = &TraceContext{Traceparent: NewTraceparent()}
		docs["route "+name] = mustMarshal(t, r)
	}
	return docs
}

// TestFastAcceptsValid: the fast path serves the common case, and decodes
// it as the schema path does.
func TestFastAcceptsValid(t *testing.T) {
	for name, b := range validRoutes(t) {
		t.Run(name, func(t *testing.T) {
			if err := Validate(schemas.Route, b); err != nil {
				t.Fatalf("the schema rejects a valid route: %v", err)
			}
			got, ok := fastRoute(b)
			if !ok {
				t.Fatalf("fast path left a valid route to the schema: %s", b)
			}
			var want Route
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("fast decode differs:\n got %+v\nwant %+v", got, &want)
			}
		})
	}
	for name, b := range validNotifies(t) {
		t.Run(name, func(t *testing.T) {
			if err := Validate(schemas.Notify, b); err != nil {
				t.Fatalf("the schema rejects a valid notify: %v", err)
			}
			got, ok := fastNotify(b)
			if !ok {
				t.Fatalf("fast path left a valid notify to the schema: %s", b)
			}
			var want Notify
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("fast decode differs:\n got %+v\nwant %+v", got, &want)
			}
		})
	}
}

// TestFastLeavesIngressToSchema: an inbound route is not the fast path's to
// judge, and DecodeRoute still takes it.
func TestFastLeavesIngressToSchema(t *testing.T) {
	b, err := os.ReadFile("testdata/valid/route_ingress.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fastRoute(b); ok {
		t.Fatal("fast path accepted an ingress route")
	}
	r, err := DecodeRoute(b)
	if err != nil || r.Input.Context.Ingress == nil {
		t.Fatalf("DecodeRoute(ingress) = %+v, %v", r, err)
	}
}

// checkFast asserts what the fast path promises for one document: if it
// accepts, the schema accepts too and json.Unmarshal decodes the same
// struct. It reports whether the fast path accepted.
func checkFast(t *testing.T, schema string, b []byte) bool {
	t.Helper()
	var got, want any
	var ok bool
	switch schema {
	case schemas.Route:
		var r *Route
		r, ok = fastRoute(b)
		got, want = r, new(Route)
	case schemas.Notify:
		var n *Notify
		n, ok = fastNotify(b)
		got, want = n, new(Notify)
	}
	if !ok {
		return false
	}
	if err := Validate(schema, b); err != nil {
		t.Errorf("fast path accepted what the schema rejects (%v):\n%s", err, b)
		return true
	}
	if err := json.Unmarshal(b, want); err != nil {
		t.Errorf("fast path accepted what json.Unmarshal rejects (%v):\n%s", err, b)
	} else if !reflect.DeepEqual(got, want) {
		t.Errorf("fast decode differs from json.Unmarshal:\n got %+v\nwant %+v\n%s", got, want, b)
	}
	return true
}

// docPath addresses a value in a decoded document: map keys and array indexes.
type docPath []any

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = deepCopy(x)
		}
		return a
	}
	return v
}

// paths lists every value in doc (objects, arrays and leaves), and the
// objects, in a fixed order.
func paths(doc any) (all, objects []docPath) {
	var walk func(v any, p docPath)
	walk = func(v any, p docPath) {
		switch v := v.(type) {
		case map[string]any:
			objects = append(objects, p)
			for _, k := range slices.Sorted(maps.Keys(v)) {
				q := append(slices.Clone(p), k)
				all = append(all, q)
				walk(v[k], q)
			}
		case []any:
			for i, x := range v {
				q := append(slices.Clone(p), i)
				all = append(all, q)
				walk(x, q)
			}
		}
	}
	walk(doc, nil)
	return all, objects
}

// edit sets (or, with del, removes) the value at p in doc, in place.
func edit(doc any, p docPath, v any, del bool) {
	switch c := lookup(doc, p[:len(p)-1]).(type) {
	case map[string]any:
		if del {
			delete(c, p[len(p)-1].(string))
		} else {
			c[p[len(p)-1].(string)] = v
		}
	case []any:
		if i := p[len(p)-1].(int); del {
			c[i] = map[string]any{} // an array element cannot go; empty it
		} else {
			c[i] = v
		}
	}
}

func nActions(n int) []any {
	a := make([]any, n)
	for i := range a {
		a[i] = map[string]any{"label": fmt.Sprint("Option ", i), "data": fmt.Sprint("opt:", i)}
	}
	return a
}

// fieldValues holds, per field name, values that matter there: valid ones, so
// that mutations reach the allOf rules' corners and not only type errors,
// and ones just off (a pattern, a format, an enum, a length limit counted in
// runes).
var fieldValues = map[string][]any{
	"schema_version": {"route.v1", "notify.v1", "notify.v2", "route.V1"},
	"request_id": {testUUID, "0190a0e4-1c2b-7abc-bdef-0123456789ab", "0190A0E4-1C2B-7DEF-8DEF-0123456789AB",
		"0190a0e4-1c2b-4def-8def-0123456789ab", "0190a0e4-1c2b-7def-cdef-0123456789ab", "0190a0e4-1c2b-7def-8def-0123456789a",
		"0190a0e41c2b7def8def0123456789ab0000", "0190a0e4-1c2b-7def-8def-0123456789ag"},
	"received_at": {"2026-11-22T09:00:00Z", "2024-02-29T23:59:59.5+01:00", "2026-11-22T10:00:00-23:59",
		"2026-11-22t09:00:00z", "2026-11-22T09:00:00", "2026-11-22 09:00:00Z", "2025-02-29T09:00:00Z", "2026-04-31T09:00:00Z",
		"2026-11-22T24:00:00Z", "2026-11-22T23:59:60Z", "2026-11-22T09:00:00.Z", "2026-11-22T09:00:00+24:00",
		"2026-11-22T09:00:00+0100", "2026-13-01T09:00:00Z", "2026-11-22T09:00:00,5Z", "+026-11-22T09:00:00Z", "2026-11-22T09:00:00Z "},
	"source_channel":           {"telegram", "email", "web", "slack", "cli", "log", "Telegram"},
	"source_endpoint_identity": {"tg_main", strings.Repeat("é", 512), strings.Repeat("é", 513)},
	"source_sender_identity":   {"12345", strings.Repeat("👍", 512), strings.Repeat("a", 513)},
	"source_thread_identity":   {"12345:42", strings.Repeat("é", 998), strings.Repeat("é", 999)},
	"butler":                   {"health", "a", "z" + strings.Repeat("_-9", 20) + "xy", "z" + strings.Repeat("_-9", 21), "1health", "heAlth"},
	"tool":                     {"route.execute", "route.Execute"},
	"prompt":                   {"p", " "},
	"origin_butler":            {"health", "finance", "fin ance", "-health"},
	"intent":                   {"send", "reply", "react", "SEND", "send "},
	"channel": {"telegram", "telegram:tg_main", "email", "log", "email:mail", "slack", "web", "webhook:a-b_c",
		"log:" + strings.Repeat("A", 63), "log:" + strings.Repeat("A", 64), "pigeon", "telegram:", "telegram:_x", "telegramx",
		"Telegram", "telegram:tg main", "email:mail:x", "mcp"},
	"message": {"hi", " x ", "\t\u00a0y", strings.Repeat("é", 32768), strings.Repeat("é", 32769),
		strings.Repeat("a", 65537)},
	"recipient":          {"me@example.com", strings.Repeat("é", 512), strings.Repeat("é", 513)},
	"subject":            {"Report", strings.Repeat("é", 998), strings.Repeat("é", 999)},
	"emoji":              {"👍", strings.Repeat("👍", 32), strings.Repeat("é", 33)},
	"urgency":            {"low", "normal", "high", "urgent"},
	"topic":              {"analysis", "a-b_c", "Analysis"},
	"level":              {"info", "warn", "error", "debug"},
	"claim_thread":       {true, false},
	"claim_thread_label": {"Refill", strings.Repeat("é", 128), strings.Repeat("é", 129)},
	"claim_session":      {"0123456789abcdef", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", ""},
	"ack_within":         {"30s", "1h30m", "7d", "1d2h3m4s", "1d2h3m4s5s", "1234567s", "m", "10", "10x", "", "1h "},
	"actions":            {nActions(1), nActions(8), nActions(9)},
	"label":              {"Yes", strings.Repeat("é", 64), strings.Repeat("👍", 65)},
	"data":               {"yes", "ok:1.2-x_Y", strings.Repeat("a", 64), strings.Repeat("a", 65), "a b", "yes!"},
	"traceparent": {testTP, "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"},
	"request_context": {
		map[string]any{"request_id": testUUID, "source_channel": "telegram", "source_endpoint_identity": "tg_main", "source_sender_identity": "1", "source_thread_identity": "1:2"},
		map[string]any{"request_id": testUUID, "source_channel": "telegram", "source_endpoint_identity": "tg_main", "source_sender_identity": "1"},
		map[string]any{"request_id": testUUID, "source_channel": "email", "source_endpoint_identity": "a@b", "source_sender_identity": "c@d", "received_at": "2026-11-22T09:00:00Z"},
		map[string]any{"request_id": testUUID, "received_at": "2026-11-22T09:00:00Z"},
	},
	"trace_context":  {map[string]any{}, map[string]any{"traceparent": testTP}},
	"delivery":       {map[string]any{"message": "hi"}, map[string]any{"intent": "react", "emoji": "👍"}, map[string]any{}},
	"notify_request": {map[string]any{"schema_version": "notify.v1", "origin_butler": "health", "delivery": map[string]any{"message": "hi"}}},
	"ingress":        {map[string]any{"schema_version": "ingress.v1"}},
	"context":        {map[string]any{}},
	"input":          {map[string]any{"context": map[string]any{}}},
	"target":         {map[string]any{"butler": "health", "tool": "route.execute"}},
	"x":              {"y"},
}

// badValues holds values that break something almost anywhere: wrong types, null,
// empty and blank strings.
var badValues = []any{
	nil, json.Number("0"), json.Number("1.5"), true, false, map[string]any{}, []any{}, []any{"x"},
	"", " ", "  \n\t", "\u00a0", "\v", "\ufeff", "x", "a\n",
}

// keyEdits are textual mutations: keys spelled in another case or with an
// escape, raw bytes and escapes in strings, and data around the document.
func keyEdits(b []byte) [][]byte {
	var out [][]byte
	for _, n := range slices.Sorted(maps.Keys(fieldValues)) {
		k := []byte(`"` + n + `":`)
		i := bytes.Index(b, k)
		if i < 0 {
			continue
		}
		out = append(out,
			slices.Concat(b[:i], []byte(`"`+strings.ToUpper(n[:1])+n[1:]+`":`), b[i+len(k):]),
			slices.Concat(b[:i], []byte(`"`+strings.ToUpper(n)+`":`), b[i+len(k):]),
			slices.Concat(b[:i], []byte(`"\u00`+hex.EncodeToString([]byte(n[:1]))+n[1:]+`":`), b[i+len(k):]),
		)
		if j := i + len(k); j < len(b) && b[j] == '"' {
			for _, v := range []string{"\xff", `\ud83d`, `\u0000`, `\"`} {
				out = append(out, slices.Concat(b[:j+1], []byte(v), b[j+1:]))
			}
		}
	}
	return append(out,
		append(slices.Clone(b), 'x'),
		append(slices.Clone(b), "{}"...),
		append(slices.Clone(b), " \n\t"...),
		append([]byte("\xef\xbb\xbf"), b...),
		append([]byte(" "), b...),
		b[:len(b)-1],
	)
}

// marshalDup encodes doc as json.Marshal does, but with the key k a second
// time, last, in the object at p: the schema sees only that value, while
// encoding/json merges it into the first.
func marshalDup(t *testing.T, doc any, p docPath, k string, v any) []byte {
	var enc func(x any, at docPath) []byte
	enc = func(x any, at docPath) []byte {
		switch x := x.(type) {
		case map[string]any:
			b := []byte{'{'}
			for i, key := range slices.Sorted(maps.Keys(x)) {
				if i > 0 {
					b = append(b, ',')
				}
				b = slices.Concat(b, mustMarshal(t, key), []byte{':'}, enc(x[key], append(slices.Clone(at), key)))
			}
			if slices.Equal(at, p) {
				b = slices.Concat(b, []byte{','}, mustMarshal(t, k), []byte{':'}, mustMarshal(t, v))
			}
			return append(b, '}')
		case []any:
			b := []byte{'['}
			for i, y := range x {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, enc(y, append(slices.Clone(at), i))...)
			}
			return append(b, ']')
		}
		return mustMarshal(t, x)
	}
	return enc(doc, docPath{})
}

// TestFastNeverLooser mutates valid documents in many ways and checks, for
// every one, that what the fast path accepts the schema accepts too, decoded
// the same.
func TestFastNeverLooser(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := slices.Sorted(maps.Keys(fieldValues))
	notifies := validNotifies(t)
	for _, tc := range []struct {
		schema     string
		docs       map[string][]byte
		systematic []string // mutated field by field; the others only at random
		random     int
		// minAccepted is well under what the fast path accepts today
		// (about 600 of each).
		minAccepted int
	}{
		{schemas.Route, validRoutes(t), []string{"route_notify.json", "wrapped actions", "route built reply", "route built react"}, 1500, 400},
		{schemas.Notify, notifies, slices.DeleteFunc(slices.Collect(maps.Keys(notifies)), func(name string) bool {
			return strings.HasPrefix(name, "built ") && name != "built email reply without thread"
		}), 1000, 400},
	} {
		var total, accepted int
		try := func(b []byte) {
			total++
			if checkFast(t, tc.schema, b) {
				accepted++
			}
		}
		var bases []any
		for _, name := range slices.Sorted(maps.Keys(tc.docs)) {
			b := tc.docs[name]
			var doc any
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber()
			if err := d.Decode(&doc); err != nil {
				t.Fatal(err)
			}
			bases = append(bases, doc)
			try(b)
			if !slices.Contains(tc.systematic, name) {
				continue
			}
			for _, m := range keyEdits(b) {
				try(m)
			}
			mutate := func(p docPath, v any, del bool) {
				m := deepCopy(doc)
				edit(m, p, v, del)
				try(mustMarshal(t, m))
			}
			// Every value: dropped, or set to each bad value and each value
			// of its name.
			all, objects := paths(doc)
			for _, p := range all {
				mutate(p, nil, true)
				for _, v := range badValues {
					mutate(p, v, false)
				}
				if k, ok := p[len(p)-1].(string); ok {
					for _, v := range fieldValues[k] {
						mutate(p, v, false)
					}
				}
			}
			// Every object: each name it lacks added, with each of its values,
			// and each key it has repeated.
			for _, o := range objects {
				obj := lookup(doc, o).(map[string]any)
				for _, n := range names {
					if _, ok := obj[n]; !ok {
						for _, v := range fieldValues[n] {
							mutate(append(slices.Clone(o), n), v, false)
						}
					}
				}
				for _, k := range slices.Sorted(maps.Keys(obj)) {
					for _, v := range append([]any{"x", map[string]any{}}, fieldValues[k]...) {
						try(marshalDup(t, doc, o, k, v))
					}
				}
			}
		}
		// Random combinations, to reach the allOf rules' corners (reply
		// without a channel from a Telegram request without a thread, ...).
		for range tc.random {
			m := deepCopy(bases[rng.IntN(len(bases))])
			for range 1 + rng.IntN(4) {
				all, objects := paths(m)
				switch r := rng.IntN(10); {
				case r < 3 && len(all) > 0:
					edit(m, all[rng.IntN(len(all))], nil, true)
				case r < 8:
					n := names[rng.IntN(len(names))]
					var v any = badValues[rng.IntN(len(badValues))]
					if rng.IntN(10) < 8 {
						v = deepCopy(fieldValues[n][rng.IntN(len(fieldValues[n]))])
					}
					edit(m, append(slices.Clone(objects[rng.IntN(len(objects))]), n), v, false)
				case len(all) > 0:
					edit(m, all[rng.IntN(len(all))], deepCopy(badValues[rng.IntN(len(badValues))]), false)
				}
			}
			b := mustMarshal(t, m)
			switch rng.IntN(10) {
			case 0:
				edits := keyEdits(b)
				b = edits[rng.IntN(len(edits))]
			case 1:
				_, objects := paths(m)
				o := objects[rng.IntN(len(objects))]
				if keys := slices.Sorted(maps.Keys(lookup(m, o).(map[string]any))); len(keys) > 0 {
					k := keys[rng.IntN(len(keys))]
					vs := append([]any{"x", map[string]any{}}, fieldValues[k]...)
					b = marshalDup(t, m, o, k, deepCopy(vs[rng.IntN(len(vs))]))
				}
			}
			try(b)
		}
		t.Logf("%s: %d documents, %d accepted by the fast path", tc.schema, total, accepted)
		// The checks prove something only if the fast path accepts a fair
		// share of the mutants: the valid ones without duplicate or escaped
		// keys, empty strings, odd spaces or odd dates.
		if accepted < tc.minAccepted {
			t.Errorf("%s: the fast path accepted only %d documents, want at least %d", tc.schema, accepted, tc.minAccepted)
		}
	}
}

func lookup(doc any, p docPath) any {
	for _, k := range p {
		switch c := doc.(type) {
		case map[string]any:
			doc = c[k.(string)]
		case []any:
			doc = c[k.(int)]
		}
	}
	return doc
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIsDateTime: what the fast path takes as a date-time, the schema's
// format and time.Parse(time.RFC3339Nano) take too.
func TestIsDateTime(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"2026-11-22T10:00:00Z", true},
		{"2026-11-22T10:00:00+01:00", true},
		{"2026-11-22T10:00:00.123456789-05:30", true},
		{"2024-02-29T23:59:59.1Z", true},
		{"2000-02-29T00:00:00Z", true},
		{"0000-01-01T00:00:00Z", true},
		{"9999-12-31T23:59:59.999999999999Z", true},
		{"2026-11-22T10:00:00-00:00", true},
		{"2026-12-31T23:59:59+23:59", true},
		{"1900-02-29T00:00:00Z", false},
		{"2025-02-29T00:00:00Z", false},
		{"2024-02-30T00:00:00Z", false},
		{"2026-06-31T00:00:00Z", false},
		{"2026-00-10T00:00:00Z", false},
		{"2026-11-00T00:00:00Z", false},
		{"2026-11-22T10:00:60Z", false}, // the schema takes some leap seconds; time.Parse none
		{"2026-11-22T23:59:60Z", false},
		{"2026-11-22t10:00:00Z", false},
		{"2026-11-22T10:00:00z", false},
		{"2026-11-22T10:00:00", false},
		{"2026-11-22T10:00:00.Z", false},
		{"2026-11-22T10:00:00+1:00", false},
		{"2026-11-22T10:00:00+24:00", false},
		{"2026-11-22T10:00:00+01:60", false},
		{"2026-11-22T10:00:00+01:00 ", false},
		{"2026-11-22T1:00:00Z", false},
		{"+026-11-22T10:00:00Z", false},
		{"2026-11-22T10:+0:00Z", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isDateTime(tt.s); got != tt.want {
			t.Errorf("isDateTime(%q) = %v, want %v", tt.s, got, tt.want)
		}
		if !tt.want {
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, tt.s); err != nil {
			t.Errorf("isDateTime takes %q, time.Parse does not: %v", tt.s, err)
		}
		rc := fmt.Appendf(nil, `{"request_id":%q,"source_channel":"web","source_endpoint_identity":"w","source_sender_identity":"v","received_at":%q}`, testUUID, tt.s)
		if err := Validate(schemas.RequestContext, rc); err != nil {
			t.Errorf("isDateTime takes %q, the schema does not: %v", tt.s, err)
		}
	}
}

// TestTraceIDMatchesPattern: TraceID answers as the regexp it replaced did.
func TestTraceIDMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$`)
	old := func(tp string) string {
		m := re.FindStringSubmatch(tp)
		if m == nil || m[1] == "00000000000000000000000000000000" || m[2] == "0000000000000000" || tp[:2] == "ff" {
			return ""
		}
		return m[1]
	}
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []string{"", testTP, "ff" + testTP[2:], "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", testTP + "\n", "\n" + testTP}
	alphabet := "0123456789abcdefABCDEFg-\n é"
	for range 20000 {
		b := []byte(NewTraceparent())
		for range 1 + rng.IntN(3) {
			switch i := rng.IntN(len(b)); rng.IntN(3) {
			case 0:
				b[i] = alphabet[rng.IntN(len(alphabet))]
			case 1:
				b = slices.Delete(b, i, i+1)
			default:
				b = slices.Insert(b, i, alphabet[rng.IntN(len(alphabet))])
			}
		}
		cases = append(cases, string(b))
	}
	for _, tp := range cases {
		if got, want := TraceID(tp), old(tp); got != want {
			t.Fatalf("TraceID(%q) = %q, the regexp says %q", tp, got, want)
		}
	}
}

// TestFastSchemasUnchanged: fast.go mirrors these three schemas. When one
// changes (beyond titles and descriptions, and the channel lists, which
// fast.go reads from the schemas themselves), check fast.go against it, then
// update the sum here.
func TestFastSchemasUnchanged(t *testing.T) {
	const want = "8a51e4234ae06e925fae78be92ecd288e5e4dde257b70f93bf6a7726d110fc36"
	h := sha256.New()
	for _, name := range []string{schemas.Route, schemas.Notify, schemas.RequestContext} {
		b, err := schemas.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		h.Write(mustMarshal(t, withoutLists(withoutProse(doc))))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("schemas changed (sum %s, was %s): check fast.go still mirrors them, then update the sum", got, want)
	}
}

// withoutLists replaces the lists `make schemas` writes from the channel
// registry (delivery.channel's pattern, the source_channel enums) by a
// placeholder: fast.go takes them from the schemas, so a channel added
// changes nothing it mirrors.
func withoutLists(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			switch obj, _ := x.(map[string]any); {
			case k == "source_channel" && obj["enum"] != nil:
				m[k] = "<source channels>"
			case k == "channel" && obj["pattern"] != nil:
				m[k] = "<channel pattern>"
			default:
				m[k] = withoutLists(x)
			}
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = withoutLists(x)
		}
		return a
	}
	return v
}

// withoutProse drops title and description, which do not change what a
// schema accepts.
func withoutProse(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			if k != "title" && k != "description" {
				m[k] = withoutProse(x)
			}
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, x := range v {
			a[i] = withoutProse(x)
		}
		return a
	}
	return v
}

// FuzzFastRoute: whatever the bytes, the fast path accepts only what the
// schema accepts, decoded the same.
func FuzzFastRoute(f *testing.F) {
	for _, b := range validRoutes(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkFast(t, schemas.Route, b)
	})
}

// FuzzFastNotify does the same for notify.v1.
func FuzzFastNotify(f *testing.F) {
	for _, b := range validNotifies(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkFast(t, schemas.Notify, b)
	})
}

// BenchmarkDecodeRoute compares the fast path with the schema path on a
// typical 1 KB route: a Telegram reply with lineage and trace.
func BenchmarkDecodeRoute(b *testing.B) {
	rc := &RequestContext{RequestID: NewRequestID(), SourceChannel: "telegram", SourceEndpointIdentity: "tg_main",
		SourceSenderIdentity: "12345", SourceThreadIdentity: "12345:42", ReceivedAt: Now()}
	msg := strings.Repeat("Your blood pressure log for this week is ready: 7 readings, all in range. ", 5)
	r := NewRoute(NewNotify("health", Delivery{Intent: IntentReply, Channel: "telegram", Message: msg, Topic: "analysis"}, rc))
	r.TraceContext = &TraceContext{Traceparent: NewTraceparent()}
	data, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("route of %d bytes", len(data))
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := fastRoute(data); !ok {
				b.Fatal("fast path refused the route")
			}
		}
	})
	b.Run("schema", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := Validate(schemas.Route, data); err != nil {
				b.Fatal(err)
			}
			var r Route
			if err := json.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestShapeKeysAreFields: decodeFast refuses every key the tables lack, so
// each key the tables allow must be a field of the struct its shape decodes
// into, spelled the same, and each key's child shape must be that field's
// type. A struct that loses a field, or a table that gains a key no struct
// has, fails here instead of decoding quietly.
func TestShapeKeysAreFields(t *testing.T) {
	types := map[shape]reflect.Type{
		shRoute: reflect.TypeFor[Route](), shRouteRC: reflect.TypeFor[RequestContext](),
		shTarget: reflect.TypeFor[Target](), shInput: reflect.TypeFor[Input](),
		shContext: reflect.TypeFor[InputContext](), shNotify: reflect.TypeFor[Notify](),
		shNotifyRC: reflect.TypeFor[RequestContext](), shDelivery: reflect.TypeFor[Delivery](),
		shActions: reflect.TypeFor[[]Action](), shAction: reflect.TypeFor[Action](),
		shTrace: reflect.TypeFor[TraceContext](),
	}
	deref := func(rt reflect.Type) reflect.Type {
		for rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		return rt
	}
	for sh := range shapeKeys {
		fields := shapeKeys[sh].fields
		if fields == nil {
			continue
		}
		rt, ok := types[shape(sh)]
		if !ok {
			t.Fatalf("shape %d has keys but no struct in this test", sh)
		}
		byName := map[string]reflect.StructField{}
		for f := range rt.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			byName[name] = f
		}
		for _, k := range fields {
			f, ok := byName[k.name]
			if !ok {
				t.Errorf("%s has no field for key %q, which the fast path allows", rt, k.name)
				continue
			}
			if k.child > shLeaf {
				if want := types[k.child]; deref(f.Type) != want {
					t.Errorf("%s.%s is %s, but key %q is scanned as %s", rt, f.Name, f.Type, k.name, want)
				}
			} else if kind := deref(f.Type).Kind(); kind != reflect.String && kind != reflect.Bool {
				t.Errorf("%s.%s is %s, but key %q is scanned as a string or boolean", rt, f.Name, f.Type, k.name)
			}
		}
	}
}

// TestFastDecodesEveryKey: one route that uses every key the fast path
// allows, each with a value of its own, decodes on the fast path exactly as
// json.Unmarshal decodes it, so no key the tables allow is dropped or set
// into the wrong field.
func TestFastDecodesEveryKey(t *testing.T) {
	rc := `{"request_id":"` + testUUID + `","source_channel":"telegram","source_endpoint_identity":"tg_main",` +
		`"source_sender_identity":"12345","source_thread_identity":"12345:42","received_at":"2026-11-22T09:00:00.123456Z"}`
	doc := []byte(`{"schema_version":"route.v1","request_context":` + rc + `,` +
		`"target":{"butler":"health","tool":"route.execute"},"input":{"prompt":"Say it","context":{"notify_request":` +
		`{"schema_version":"notify.v1","origin_butler":"health","delivery":{"intent":"reply","channel":"telegram:tg_main",` +
		`"message":"Refill the pills?","recipient":"12345","subject":"Pills","emoji":"👍","urgency":"high","topic":"meds",` +
		`"level":"warn","claim_thread":true,"claim_thread_label":"Refill","claim_session":"0123456789abcdef","ack_within":"10m","edit_of":"` + strings.Repeat("ab", 32) + `","actions":[{"label":"Yes","data":"refill:yes"},` +
		`{"label":"No \u2014 not yet","data":"refill:no"}]},"request_context":` + rc + `,"idempotency_key":"refill-2026.11:a_1"}}},` +
		`"trace_context":{"traceparent":"` + testTP + `"}}`)
	var tree any
	if err := json.Unmarshal(doc, &tree); err != nil {
		t.Fatal(err)
	}
	// Every key of every shape is in the document.
	used := map[string]bool{}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				used[k] = true
				walk(x, at+"/"+k)
			}
		case []any:
			for _, x := range v {
				walk(x, at)
			}
		}
	}
	walk(tree, "")
	for sh := range shapeKeys {
		for _, f := range shapeKeys[sh].fields {
			if !used[f.name] {
				t.Errorf("the document lacks key %q of shape %d", f.name, sh)
			}
		}
	}
	if !checkFast(t, schemas.Route, doc) {
		t.Fatalf("the fast path left the document to the schema:\n%s", doc)
	}
}
