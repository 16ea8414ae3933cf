package logchannel_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/logchannel"
)

func TestConformance(t *testing.T) {
	var buf *bytes.Buffer
	delivertest.Run(t, delivertest.Harness{
		New: func(t *testing.T) deliver.Sender {
			buf = &bytes.Buffer{}
			s, err := logchannel.New(config.Integration{ID: "log", Type: "log"}, deliver.Env{Logger: slog.New(slog.NewJSONHandler(buf, nil))})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) == nil && rec["logger"] == logchannel.LoggerName {
					out = append(out, rec["message"].(string))
				}
			}
			return out
		},
		// A log line is one message to nobody in particular: no chunks,
		// recipients, threads, reactions or provider faults.
		Features: delivertest.Features{},
	})
}

// The log channel takes no inbound messages (it has no receiver), so
// delivertest.RunReceiver does not apply to it.

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"two\nlines", `two\nlines`},
		{"fake\r\ntime=now level=ERROR", `fake\r\ntime=now level=ERROR`},
		{"\x1b[31mred", `\u001b[31mred`},
		{"tab\there", `tab\there`},
		{"back\\slash", `back\\slash`},
		{"line\u2028separator", `line\u2028separator`},
		{"not \xffutf-8", "not \ufffdutf-8"},
		{"late\x00", `late\u0000`},
	}
	for _, tt := range tests {
		if got := logchannel.Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestUrgencyLevels(t *testing.T) {
	for urgency, level := range map[string]string{"low": "INFO", "normal": "INFO", "high": "WARN"} {
		var buf bytes.Buffer
		s, _ := logchannel.New(config.Integration{ID: "log"}, deliver.Env{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
		if _, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "send", Butler: "b", Message: "m", Urgency: urgency}); err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		_ = json.Unmarshal(buf.Bytes(), &rec)
		if rec["level"] != level {
			t.Errorf("urgency %s logged at %v, want %s", urgency, rec["level"], level)
		}
	}
}
