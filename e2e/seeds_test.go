package e2e

import (
	"testing"
)

// TestSeed002Notify: seed 002's prompts pass level and context; they are
// accepted as they are, map onto urgency and topic, and the log channel
// keeps the level.
func TestSeed002Notify(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	for _, tt := range []struct {
		args         map[string]any
		level, topic string
	}{
		{map[string]any{"channel": "log", "message": "BP high", "level": "warn", "context": "safety"}, "WARN", "safety"},
		{map[string]any{"channel": "log", "message": "disk full", "level": "error", "context": "Daily Ops Report"}, "ERROR", "daily-ops-report"},
		{map[string]any{"channel": "log", "message": "hi", "level": "loud"}, "INFO", ""},
		{map[string]any{"channel": "log", "message": "kept low", "level": "warn", "urgency": "low", "topic": "workflow", "context": "ignored"}, "WARN", "workflow"},
	} {
		res := f.notify("health", tt.args)
		if res.IsError || !sentRE.MatchString(text(res)) {
			t.Fatalf("%v: %s", tt.args, text(res))
		}
		recs := f.logs.records(map[string]string{"logger": "llm_notify", "message": tt.args["message"].(string)})
		if len(recs) != 1 {
			t.Fatalf("%v: %d llm_notify records", tt.args, len(recs))
		}
		r := recs[0]
		topic, _ := r["topic"].(string)
		if r["level"] != tt.level || topic != tt.topic {
			t.Errorf("%v: logged at %v with topic %q, want %s and %q", tt.args, r["level"], topic, tt.level, tt.topic)
		}
	}
}

// TestSeed000IntegrationIDs: integration ids as seed 000 writes them, with
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
	res := f.notify("health", map[string]any{"channel": "telegram:int_gXuDla4UZipcm2tg3McPX", "message": "from seed 000"})
	if m := sentRE.FindStringSubmatch(text(res)); res.IsError || m == nil || m[1] != "telegram:int_gXuDla4UZipcm2tg3McPX" {
		t.Fatalf("notify: %s", text(res))
	}
}
