package e2e

import (
	"strings"
	"testing"
)

// TestSeed002Notify: prompts that pass notify a level and a context are
// accepted as they are, map onto urgency and topic, and the log channel
// keeps the level. A notify to the log channel with no context has context
// "llm".
func TestSeed002Notify(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	for _, tt := range []struct {
		args         map[string]any
		level, topic string
	}{
		{map[string]any{"channel": "log", "message": "BP high", "level": "warn", "context": "safety"}, "WARN", "safety"},
		{map[string]any{"channel": "log", "message": "disk full", "level": "error", "context": "Daily Ops Report"}, "ERROR", "daily-ops-report"},
		{map[string]any{"channel": "log", "message": "hi", "level": "loud"}, "INFO", "llm"},
		{map[string]any{"channel": "log", "message": "no category", "context": map[string]any{"stage": "analysis"}}, "INFO", "llm"},
		{map[string]any{"channel": "log", "message": "kept low", "level": "warn", "urgency": "low", "topic": "workflow", "context": "ignored"}, "WARN", "workflow"},
	} {
		res := f.notify("health", tt.args)
		if res.IsError || !sentRE.MatchString(text(res)) {
			t.Fatalf("%v: %s", tt.args, text(res))
		}
		recs := f.logs.Records(map[string]string{"logger": "llm_notify", "message": tt.args["message"].(string)})
		if len(recs) != 1 {
			t.Fatalf("%v: %d llm_notify records", tt.args, len(recs))
		}
		r := recs[0]
		topic, _ := r["topic"].(string)
		category, _ := r["context"].(string)
		if r["level"] != tt.level || topic != tt.topic || category != tt.topic {
			t.Errorf("%v: logged at %v with topic %q and context %q, want %s and %q", tt.args, r["level"], topic, category, tt.level, tt.topic)
		}
	}
}

// TestSeed000IntegrationIDs: generated integration ids, with
// letters of both cases, are configured and named in a notify's channel.
func TestSeed000IntegrationIDs(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integrations = append(f.cfg.Integrations, f.cfg.Integrations[0])
	in := &f.cfg.Integrations[len(f.cfg.Integrations)-1]
	in.ID, in.Inbound.Enabled = "int_gXuDla4UZipcm2tg3McPX", false
	if err := f.cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	f.start("switchboard", "messenger")
	res := f.notify("health", map[string]any{"channel": "telegram:int_gXuDla4UZipcm2tg3McPX", "message": "to a generated id"})
	if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil || m[1] != "telegram:int_gXuDla4UZipcm2tg3McPX" {
		t.Fatalf("notify: %s", text(res))
	}
}

// TestSeed002ContextOnTheDefaultLog: a butler whose default channel is the
// log gives context "llm" to a notify that names no channel and no context.
// (Elsewhere a topic shows, in a Slack footer or a webhook's payload, so the
// default is the log channel's alone: services/butler's TestDefaultContext.)
func TestSeed002ContextOnTheDefaultLog(t *testing.T) {
	f := newFleet(t)
	f.cfg.Butler("finance").DefaultChannel = "log"
	f.start("switchboard", "messenger")
	res := f.notify("finance", map[string]any{"message": "to the default log"})
	if res.IsError {
		t.Fatal(text(res))
	}
	if recs := f.logs.Records(map[string]string{"logger": "llm_notify", "message": "to the default log"}); len(recs) != 1 || recs[0]["context"] != "llm" || recs[0]["topic"] != "llm" {
		t.Fatalf("records %v, want one with context (and topic) llm", recs)
	}
}

// TestSeed003Errors: notify servers commonly answer a send without message and an
// unknown channel with "Missing required 'message' parameter..." and
// "Unsupported channel 'sms'..."; Herald's error message starts so, with its
// class and the field at fault.
func TestSeed003Errors(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.mcp("health", "")
	for _, tt := range []struct {
		args          map[string]any
		prefix, field string
	}{
		{map[string]any{"channel": "telegram"}, "Missing required 'message' parameter", "/delivery/message: is required"},
		{map[string]any{"message": ""}, "Missing required 'message' parameter", "/delivery/message"},
		{map[string]any{"channel": "sms", "message": "hi"}, "Unsupported channel 'sms'", "/delivery/channel: unknown channel type"},
	} {
		res := callNotify(t, c, tt.args)
		body := structured[struct {
			Status string `json:"status"`
			Error  struct {
				Class, Message string
			} `json:"error"`
		}](t, res)
		if !res.IsError || body.Status != "error" || body.Error.Class != "validation_error" ||
			!strings.HasPrefix(body.Error.Message, tt.prefix) || !strings.Contains(body.Error.Message, tt.field) {
			t.Errorf("notify %v: %+v", tt.args, body)
		}
		if !strings.Contains(text(res), "(validation_error): "+tt.prefix) {
			t.Errorf("notify %v answers %q", tt.args, text(res))
		}
	}
}
