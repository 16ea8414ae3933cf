package envelope

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// answers are route_response.v1 documents as Herald sends them: delivered,
// uncertain with a skipped chunk, failed, rejected, and one hand-written with
// escapes, an empty array and an exponent.
func answers(t testing.TB) map[string][]byte {
	t.Helper()
	r := NewRoute(NewNotify("health", Delivery{Message: "hi"}, nil))
	ok := &NotifyResponse{SchemaVersion: NotifyResponseV1, RequestContext: RequestRef{r.RequestContext.RequestID}, Status: StatusOK,
		Delivery: &DeliveryResult{Channel: "telegram:tg_main", DeliveryID: DeliveryID("k"), MessageIDs: []string{"12345:1", "12345:2"}}}
	uncertain := &NotifyResponse{SchemaVersion: NotifyResponseV1, RequestContext: RequestRef{r.RequestContext.RequestID}, Status: StatusOK,
		Delivery: &DeliveryResult{Channel: "email", DeliveryID: DeliveryID("k"), MessageIDs: []string{"<a@b>", ""},
			Outcome: "uncertain", Note: "a messenger stopped while email was taking part 2 <of> this & \"that\""}}
	failed := &NotifyResponse{SchemaVersion: NotifyResponseV1, RequestContext: RequestRef{r.RequestContext.RequestID}, Status: StatusError,
		Error: &ErrorBody{Class: ErrTargetUnavailable.Error(), Message: "Telegram said 502 — try later", Retryable: true}}
	docs := map[string][]byte{
		"hand-written": []byte(` { "schema_version" : "route_response.v1", "request_context": {"request_id": "r\u00e9q"},
			"status": "ok", "result": {"notify_response": {"schema_version": "notify_response.v1", "request_context": {},
			"status": "ok", "delivery": {"channel": "log", "delivery_id": "", "message_ids": []}}},
			"timing": {"duration_ms": -1.5E+2} }`),
		"empty result": []byte(`{"schema_version":"route_response.v1","request_context":{"request_id":"x"},"status":"ok","result":{}}`),
	}
	for name, nr := range map[string]*NotifyResponse{"delivered": ok, "uncertain": uncertain, "failed": failed} {
		b, err := json.Marshal(Answer(r, nr))
		if err != nil {
			t.Fatal(err)
		}
		docs[name] = b
	}
	b, err := json.Marshal(Reject(r.RequestContext.RequestID, errors.New("no such butler")))
	if err != nil {
		t.Fatal(err)
	}
	docs["rejected"] = b
	return docs
}

// checkFastResponse: whatever the fast decoder accepts, json.Unmarshal
// decodes the same. It reports whether the fast decoder accepted.
func checkFastResponse(t *testing.T, b []byte) bool {
	t.Helper()
	var got RouteResponse
	if !decodeFastResponse(b, &got) {
		return false
	}
	var want RouteResponse
	if err := json.Unmarshal(b, &want); err != nil {
		t.Errorf("fast decoder accepted what json.Unmarshal rejects (%v):\n%s", err, b)
	} else if !reflect.DeepEqual(&got, &want) {
		t.Errorf("fast decode differs from json.Unmarshal:\n got %+v\nwant %+v\n%s", &got, &want, b)
	}
	return true
}

// TestFastResponseDecodesAnswers: the answers Herald sends take the fast
// path and decode as json.Unmarshal decodes them.
func TestFastResponseDecodesAnswers(t *testing.T) {
	for name, b := range answers(t) {
		t.Run(name, func(t *testing.T) {
			if !checkFastResponse(t, b) {
				t.Fatalf("fast decoder refused an answer:\n%s", b)
			}
			if _, err := DecodeTrustedResponse(b); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFastResponseLeavesTheRest: what the fast decoder is not sure of goes
// to json.Unmarshal, which decides as it always did.
func TestFastResponseLeavesTheRest(t *testing.T) {
	for name, doc := range map[string]string{
		"null":             `{"schema_version":"route_response.v1","result":null}`,
		"case":             `{"Schema_Version":"route_response.v1"}`,
		"twice":            `{"status":"ok","status":"error"}`,
		"unknown":          `{"status":"ok","extra":1}`,
		"leading zero":     `{"timing":{"duration_ms":01}}`,
		"out of range":     `{"timing":{"duration_ms":1e999}}`,
		"string number":    `{"timing":{"duration_ms":"1"}}`,
		"trailing":         `{"status":"ok"} x`,
		"unterminated":     `{"status":"ok`,
		"control":          "{\"status\":\"o\nk\"}",
		"retryable string": `{"error":{"retryable":"yes"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if checkFastResponse(t, []byte(doc)) {
				t.Errorf("fast decoder accepted %s", doc)
			}
		})
	}
	// Left to json.Unmarshal, a case-folded key still decodes as before.
	r, err := DecodeTrustedResponse([]byte(`{"Schema_Version":"route_response.v1","STATUS":"ok"}`))
	if err != nil || r.Status != StatusOK {
		t.Fatalf("DecodeTrustedResponse = %+v, %v", r, err)
	}
	if _, err := DecodeTrustedResponse([]byte(`{"schema_version":"route.v1"}`)); err == nil || !strings.Contains(err.Error(), "route_response.v1") {
		t.Fatalf("a route taken for an answer: %v", err)
	}
}

// FuzzFastResponse holds the fast decoder to json.Unmarshal on any input.
func FuzzFastResponse(f *testing.F) {
	for _, b := range answers(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkFastResponse(t, b)
	})
}

// BenchmarkDecodeResponse compares the fast decoder with json.Unmarshal on
// the answer to a delivered notify.
func BenchmarkDecodeResponse(b *testing.B) {
	data := answers(b)["delivered"]
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r RouteResponse
			if !decodeFastResponse(data, &r) {
				b.Fatal("fast decoder refused the answer")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r RouteResponse
			if err := json.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
