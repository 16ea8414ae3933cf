package envelope_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/envelope"
)

// TestSeed003Sentences: notify servers commonly answer a send without message
// "Missing required 'message' parameter..." and an unknown channel
// "Unsupported channel 'sms'..."; Herald's error message starts with the same
// words, keeps the class, and still names the failing field.
func TestSeed003Sentences(t *testing.T) {
	for _, tt := range []struct {
		name, doc, prefix, field string
	}{
		{"no message", `{"schema_version":"notify.v1","origin_butler":"health","delivery":{"intent":"send"}}`,
			"Missing required 'message' parameter", "/delivery/message: is required"},
		{"blank message", `{"schema_version":"notify.v1","origin_butler":"health","delivery":{"intent":"reply","message":"  ","channel":"email"},"request_context":{"request_id":"` + envelope.NewRequestID() + `","source_channel":"email","source_endpoint_identity":"mail","source_sender_identity":"a@example.com"}}`,
			"Missing required 'message' parameter", "/delivery/message: must not be empty"},
		{"sms", `{"schema_version":"notify.v1","origin_butler":"health","delivery":{"channel":"sms","message":"hi"}}`,
			"Unsupported channel 'sms'", `/delivery/channel: unknown channel type "sms"`},
		{"sms with an integration", `{"schema_version":"notify.v1","origin_butler":"health","delivery":{"channel":"sms:twilio","message":"hi"}}`,
			"Unsupported channel 'sms'", `/delivery/channel: unknown channel type "sms"`},
		{"both", `{"schema_version":"notify.v1","origin_butler":"health","delivery":{"channel":"sms"}}`,
			"Missing required 'message' parameter; Unsupported channel 'sms'; invalid notify.v1", "/delivery/message: is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := envelope.DecodeNotify([]byte(tt.doc))
			body := envelope.ErrorBodyFrom(err)
			if body.Class != "validation_error" || !strings.HasPrefix(body.Message, tt.prefix) || !strings.Contains(body.Message, tt.field) {
				t.Fatalf("error %+v, want validation_error starting %q and naming %q", body, tt.prefix, tt.field)
			}
		})
	}
	// Other mistakes keep Herald's sentence alone.
	_, err := envelope.DecodeNotify([]byte(`{"schema_version":"notify.v1","origin_butler":"health","delivery":{"message":"hi","urgency":"panic"}}`))
	if msg := envelope.ErrorBodyFrom(err).Message; !strings.HasPrefix(msg, "invalid notify.v1: /delivery/urgency") {
		t.Fatalf("error %q", msg)
	}
}
