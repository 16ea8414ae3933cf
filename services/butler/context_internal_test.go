package butler

import (
	"testing"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
)

// TestDefaultContext: notify's context defaults to "llm" on the log
// channel only, named or the butler's default; a context or topic given
// wins, and a notify elsewhere gets no topic it did not ask for.
func TestDefaultContext(t *testing.T) {
	cfg := config.Default()
	cfg.Butlers = append(cfg.Butlers, config.Butler{Name: "tg", DefaultChannel: "web"})
	rc := map[string]any{"request_id": envelope.NewRequestID(), "source_channel": "web", "source_endpoint_identity": "web", "source_sender_identity": "web:v", "source_thread_identity": "v:1"}
	for _, tt := range []struct {
		name, butler string
		args         map[string]any
		topic        string
	}{
		{"the default channel is the log", config.DefaultButlerName, map[string]any{"message": "m"}, "llm"},
		{"the log named", "tg", map[string]any{"message": "m", "channel": "log"}, "llm"},
		{"the log named by integration", "tg", map[string]any{"message": "m", "channel": "log:log"}, "llm"},
		{"a context given", config.DefaultButlerName, map[string]any{"message": "m", "context": "Daily Report"}, "daily-report"},
		{"a topic given", config.DefaultButlerName, map[string]any{"message": "m", "topic": "safety"}, "safety"},
		{"a context that is no category", config.DefaultButlerName, map[string]any{"message": "m", "context": map[string]any{"stage": "x"}}, "llm"},
		{"another default channel", "tg", map[string]any{"message": "m"}, ""},
		{"another channel named", config.DefaultButlerName, map[string]any{"message": "m", "channel": "web"}, ""},
		{"a reply goes where the message came from", config.DefaultButlerName, map[string]any{"intent": "reply", "message": "m", "request_context": rc}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &Butler{name: tt.butler}
			b.cfg.Store(cfg)
			n, err := b.buildNotify(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if n.Delivery.Topic != tt.topic {
				t.Errorf("topic %q, want %q", n.Delivery.Topic, tt.topic)
			}
		})
	}
}
