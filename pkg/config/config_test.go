package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/channel/email"
	"github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/channel/web"
	"github.com/heraldhq/herald/pkg/config"
)

const designExample = `
nats: { url: "" }
default_butler: health
max_content_chars: 16000
butlers:
  - name: health
    default_channel: telegram
    mcp_http: 127.0.0.1:7701
integrations:
  - id: tg_main
    type: telegram
    token_env: TELEGRAM_BOT_TOKEN
    api_url: https://api.telegram.org
    default_chat: "12345"
    grants: all
    inbound:
      dm_policy: pairing
      allow_from: ["12345"]
      approvers: ["12345"]
      rate_limit: { rps: 5, burst: 10 }
  - id: mail
    type: email
    smtp_url_env: SMTP_URL
    from: herald@example.com
    default_to: me@example.com
    grants: [health]
    inbound: { listen: 127.0.0.1:2525, domains: [example.com], allow_from: [me@example.com] }
  - id: web
    type: web
    listen: 127.0.0.1:8787
    grants: all
bindings:
  - { integration: tg_main, chat: "12345", butler: health }
  - { integration: mail, butler: health }
`

func TestDesignExampleParses(t *testing.T) {
	c, err := config.Parse([]byte(designExample))
	if err != nil {
		t.Fatal(err)
	}
	if c.Integration("tg_main").Inbound.RateLimit.Burst != 10 || !c.Integration("web").Grants.All || c.Integration("mail").Grants.Allows("finance") {
		t.Fatalf("parsed %+v", c.Integrations)
	}
	if c.Integration("log") == nil {
		t.Fatal("every fleet has a log integration")
	}
}

func TestDefault(t *testing.T) {
	c := config.Default()
	if len(c.Butlers) != 1 || c.Butlers[0].Name != "assistant" || c.Butlers[0].DefaultChannel != "log" {
		t.Fatalf("default butlers %+v", c.Butlers)
	}
	if w := c.Integration("web"); w == nil || w.Settings.(*web.Settings).Listen != "127.0.0.1:8787" || !w.Inbound.Enabled {
		t.Fatalf("default web chat %+v", w)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	in, err := c.Resolve("assistant", "log")
	if err != nil || in.Channel() != "log:log" {
		t.Fatalf("resolve log: %v %v", in, err)
	}
}

func TestInvalid(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "butlers: [{name: a, default_chanel: log}]", "line 1: butlers[0].default_chanel is not a setting; did you mean default_channel?"},
		{"a channel's key misspelt", "integrations:\n  - id: t\n    type: telegram\n    token_envv: X", "line 4: integrations[0].token_envv is not a setting; did you mean token_env?"},
		{"another channel's key", "integrations:\n  - id: t\n    type: telegram\n    smtp_url_env: X", "line 4: integrations[0].smtp_url_env is not a setting"},
		{"a channel's inbound key misspelt", "integrations:\n  - id: m\n    type: email\n    from: a@b.c\n    inbound:\n      listn: 127.0.0.1:2525", "line 6: integrations[0].inbound.listn is not a setting; did you mean listen?"},
		{"a channel's key checked at load", "integrations: [{id: t, type: telegram, api_url: api.telegram.org}]", "api_url"},
		{"two butlers on one address", "butlers: [{name: a, mcp_http: 127.0.0.1:7701}, {name: b, mcp_http: 127.0.0.1:7701}]", `butlers[1].mcp_http 127.0.0.1:7701 is butler "a"'s too`},
		{"bad butler name", "butlers: [{name: Health}]", `butlers[0].name "Health"`},
		{"duplicate butler", "butlers: [{name: a}, {name: a}]", "used twice"},
		{"unknown type", "integrations: [{id: x, type: sms}]", `type "sms"`},
		{"default channel not granted", "butlers: [{name: a, default_channel: telegram}]\nintegrations: [{id: t, type: telegram, grants: [b]}]", "default_channel"},
		{"grants unknown butler", "integrations: [{id: t, type: telegram, grants: [ghost]}]", `butler "ghost"`},
		{"grants typo", "integrations: [{id: t, type: telegram, grants: everyone}]", `"all"`},
		{"email without from", "integrations: [{id: m, type: email}]", "needs from"},
		{"bad dm policy", "integrations: [{id: t, type: telegram, inbound: {dm_policy: open}}]", "dm_policy"},
		{"binding to nowhere", "bindings: [{integration: nope, butler: assistant}]", `integration "nope"`},
		{"bad timeout", "notify_timeout: soon", "duration"},
		{"non-ASCII integration id", "integrations: [{id: \"int_\u017fx\", type: log}]", "integrations[0].id"},
		{"webhook without a secret", "integrations: [{id: ci, type: webhook, recipients: {ops: https://example.com/h}}]", "secret_env"},
		{"webhook recipient not a URL", "integrations: [{id: ci, type: webhook, secret_env: S, recipients: {ops: ftp://x}}]", "recipients.ops"},
		{"webhook default not a recipient", "integrations: [{id: ci, type: webhook, secret_env: S, recipients: {ops: https://example.com/h}, default_recipient: dev}]", "default_recipient"},
		{"webhook with pairing", "integrations: [{id: ci, type: webhook, secret_env: S, inbound: {dm_policy: pairing}}]", "pairing"},
		{"slack receiving without a signing secret", "integrations: [{id: sl, type: slack, token_env: T, inbound: {}}]", "signing_secret_env"},
		{"bad on_uncertain", "integrations: [{id: t, type: telegram, on_uncertain: maybe}]", "on_uncertain"},
		{"retry_for too short", "delivery: { retry_for: 10ms }", "delivery.retry_for"},
		{"retry_for past the queues", "delivery: { retry_for: 200h }", "delivery.retry_for"},
		{"bad outbound rate", "integrations: [{id: t, type: telegram, rate_limit_out: {per_chat: fast}}]", "1/s"},
		{"typing where there is none", "integrations: [{id: sl, type: slack, token_env: T, typing: true}]", "integrations[0].typing: slack has no typing indicator"},
		{"file store too small", "nats: { files_max_bytes: 1000 }", "nats.files_max_bytes must be"},
		{"file store under a butler's files", "nats: { files_max_bytes: 100000000 }\nbutlers: [{name: health, files: {max_bytes: 200000000}}]", "less than butlers[0].files.max_bytes"},
		{"transcribe without a url", "transcribe: { model: whisper-1 }", "transcribe.url is missing"},
		{"transcribe url not http", "transcribe: { url: ftp://whisper }", "transcribe.url"},
		{"transcribe key in the url", "transcribe: { url: \"https://sk:x@api.openai.com/v1\" }", "transcribe.api_key_env"},
		{"transcribe key pasted in", "transcribe: { url: https://api.openai.com/v1, api_key_env: sk-proj-abc }", "transcribe.api_key_env"},
		{"transcribe language", "transcribe: { url: https://api.openai.com/v1, language: English }", "transcribe.language"},
		{"ack reaction on mail", "integrations: [{id: m, type: email, smtp: {host: h}, from: a@b.c, ack_reaction: \"👀\"}]", "integrations[0].ack_reaction: email has no reactions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.yaml))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrInvalid naming %q", err, tt.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	c, err := config.Parse([]byte(`
butlers: [{name: health}, {name: finance}]
integrations:
  - { id: tg_a, type: telegram, grants: [finance] }
  - { id: tg_b, type: telegram, grants: [health] }
  - { id: tg_off, type: telegram, grants: all, disabled: true }
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		butler, channel, want string
		err                   error
	}{
		{"health", "telegram", "telegram:tg_b", nil},
		{"finance", "telegram", "telegram:tg_a", nil},
		{"health", "telegram:tg_a", "", config.ErrNotGranted},
		{"health", "telegram:tg_off", "", config.ErrNoIntegration},
		{"health", "email", "", config.ErrNoIntegration},
		{"health", "fax", "", config.ErrUnknownChannel},
	}
	for _, tt := range tests {
		in, err := c.Resolve(tt.butler, tt.channel)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Resolve(%s, %s) = %v, want %v", tt.butler, tt.channel, err, tt.err)
			}
			continue
		}
		if err != nil || in.Channel() != tt.want {
			t.Errorf("Resolve(%s, %s) = %v, %v; want %s", tt.butler, tt.channel, in, err, tt.want)
		}
	}
}

func TestEnvOverrides(t *testing.T) {
	c, err := config.Parse([]byte("integrations: [{id: t, type: telegram}, {id: m, type: email, from: a@b.c, smtp_url_file: /x}]"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NATS_URL": "nats://bus:4222", "TELEGRAM_API_URL": "http://127.0.0.1:8081", "SMTP_URL": "smtp://u:p@h:587"}
	c.ApplyEnv(func(k string) string { return env[k] })
	if c.NATS.URL != "nats://bus:4222" || c.Integration("t").Settings.(*telegram.Settings).APIURL != "http://127.0.0.1:8081" || c.Integration("m").Settings.(*email.Settings).SMTPURLEnv != "SMTP_URL" {
		t.Fatalf("overrides not applied: %+v", c)
	}
	if c.Integration("t").Settings.(*telegram.Settings).TokenEnv != "TELEGRAM_BOT_TOKEN" {
		t.Fatal("telegram token defaults to TELEGRAM_BOT_TOKEN")
	}
}

func TestInboundIsOnWhenConfigured(t *testing.T) {
	c, err := config.Parse([]byte(`
integrations:
  - { id: tg_out, type: telegram }
  - { id: tg_in, type: telegram, inbound: { allow_from: ["1"] } }
  - { id: tg_off, type: telegram, inbound: { enabled: false, allow_from: ["1"] } }
  - { id: web, type: web, listen: 127.0.0.1:0 }
`))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"tg_out": false, "tg_in": true, "tg_off": false, "web": true} {
		if got := c.Integration(id).Inbound.Enabled; got != want {
			t.Errorf("%s inbound enabled = %v, want %v", id, got, want)
		}
	}
}

// TestTranscribe: the endpoint is the URL given, or its base with
// /audio/transcriptions added; the model defaults to whisper-1.
func TestTranscribe(t *testing.T) {
	c, err := config.Parse([]byte("transcribe: { url: \"http://127.0.0.1:9000/v1/\", api_key_env: GROQ_API_KEY, language: de }"))
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Transcribe
	if tr.Endpoint() != "http://127.0.0.1:9000/v1/audio/transcriptions" || tr.ModelName() != "whisper-1" || tr.Language != "de" || tr.APIKeyEnv != "GROQ_API_KEY" {
		t.Errorf("transcribe %+v: endpoint %s, model %s", tr, tr.Endpoint(), tr.ModelName())
	}
	full := config.Transcribe{URL: "https://api.groq.com/openai/v1/audio/transcriptions", Model: "whisper-large-v3"}
	if full.Endpoint() != full.URL || full.ModelName() != "whisper-large-v3" {
		t.Errorf("endpoint %s, model %s", full.Endpoint(), full.ModelName())
	}
}

func TestReliabilityKeys(t *testing.T) {
	c, err := config.Parse([]byte(`
delivery: { retry_for: 20s }
integrations:
  - id: t
    type: telegram
    on_uncertain: skip
    rate_limit_out: { per_chat: 2/s, per_group: off, per_bot: 10/1m, burst: 4 }
  - { id: u, type: telegram }
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(c.Delivery.RetryFor); got != 20*time.Second {
		t.Errorf("retry_for %s", got)
	}
	in := c.Integration("t")
	want := config.OutLimits{PerChat: config.OutRate{N: 2, Per: time.Second, Set: true}, PerGroup: config.OutRate{Set: true}, PerBot: config.OutRate{N: 10, Per: time.Minute, Set: true}, Burst: 4}
	if in.OnUncertain != "skip" || in.RateLimitOut != want {
		t.Errorf("on_uncertain %q, rate_limit_out %+v", in.OnUncertain, in.RateLimitOut)
	}
	// Defaults: resend, 24h, and limits left to the channel.
	def, _ := config.Parse(nil)
	if u := c.Integration("u"); u.OnUncertain != "resend" || u.RateLimitOut != (config.OutLimits{}) || time.Duration(def.Delivery.RetryFor) != 24*time.Hour {
		t.Errorf("defaults: on_uncertain %q, rate_limit_out %+v, retry_for %s", u.OnUncertain, u.RateLimitOut, time.Duration(def.Delivery.RetryFor))
	}
}
