package webhook

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

func TestParseBodyMeta(t *testing.T) {
	fields := map[string]any{
		"text":                  "Build 812 failed",
		"repo":                  "herald",
		"run.url":               "https://ci.example.com/run/812",
		"a_b":                   "exact",
		"a-b":                   "rewritten",
		"日本":                    "no letters left",
		"ünïcode":               "x",
		"n":                     5,
		"ok":                    true,
		"nested":                map[string]any{"a": "b"},
		"list":                  []any{"a"},
		"kind":                  "delivery_failed",
		"user_id":               "forged",
		"Chat_ID":               "forged",
		"permission_request_id": "abcde",
		"webhook_auth":          "forged",
		"long":                  strings.Repeat("é", 3000),
		strings.Repeat("k", 80): "long key",
	}
	data, _ := json.Marshal(fields)
	b, err := parseBody(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"repo":                  "herald",
		"run_url":               "https://ci.example.com/run/812",
		"a_b":                   "exact",
		"_n_code":               "x",
		"long":                  strings.Repeat("é", 2048),
		strings.Repeat("k", 64): "long key",
	}
	if fmt.Sprint(b.meta) != fmt.Sprint(want) {
		t.Errorf("meta\n got %v\nwant %v", b.meta, want)
	}
}

func TestParseBodyBoundsFields(t *testing.T) {
	fields := map[string]string{"text": "x"}
	for i := range 100 {
		fields[fmt.Sprintf("f%03d", i)] = "v"
	}
	data, _ := json.Marshal(fields)
	b, err := parseBody(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.meta) != maxMetaFields || b.meta["f000"] != "v" || b.meta["f031"] != "v" {
		t.Errorf("%d fields kept (%v), want the first %d in key order", len(b.meta), b.meta, maxMetaFields)
	}
}

func TestParseBodyRefuses(t *testing.T) {
	for _, tc := range []struct {
		body string
		want error
	}{
		{``, errNotObject},
		{`hello`, errNotObject},
		{`["text"]`, errNotObject},
		{`"text"`, errNotObject},
		{`{"text": "x"`, errNotObject},
		{`{}`, errNoText},
		{`{"message": "x"}`, errNoText},
		{`{"text": ""}`, errNoText},
		{`{"text": " \n\t"}`, errNoText},
		{`{"text": null}`, errTextType},
		{`{"text": 5}`, errTextType},
		{`{"text": ["x"]}`, errTextType},
	} {
		if _, err := parseBody([]byte(tc.body)); err != tc.want {
			t.Errorf("parseBody(%q) = %v, want %v", tc.body, err, tc.want)
		}
	}
}

var metaKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// FuzzParseBody feeds the inbound body parser anything: it never panics,
// and what it accepts becomes a valid ingress.v1 with no meta key Herald
// reserves taken from the body.
func FuzzParseBody(f *testing.F) {
	for _, s := range []string{
		`{"text":"Build failed","sender":"ci","thread":"pr-1","chat":"alerts","repo":"x"}`,
		`{"text":"x","kind":"delivery_failed","user_id":"u","a.b":"c","日本":"d"}`,
		`{"text":"\u0000\ud800","source":"  ","channel":"c"}`,
		`{"text":1}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := parseBody(data)
		if err != nil {
			return
		}
		if strings.TrimSpace(b.text) == "" {
			t.Fatalf("accepted a blank text from %q", data)
		}
		if len(b.meta) > maxMetaFields {
			t.Fatalf("%d meta fields", len(b.meta))
		}
		for k := range b.meta {
			if !metaKeyPattern.MatchString(k) || isReserved(k) {
				t.Fatalf("meta key %q from %q", k, data)
			}
		}
		in := toIngress(accepted{integration: "ci", messageID: "msg_1", ts: "1700000000", auth: "signature"}, b)
		if err := envelope.Check(schemas.Ingress, in); err != nil {
			t.Fatalf("ingress of %q is invalid: %v", data, err)
		}
		if in.Meta["user_id"] != in.RequestContext.SourceSenderIdentity || in.Meta["message_id"] != "msg_1" {
			t.Fatalf("standard meta overridden: %v", in.Meta)
		}
	})
}
