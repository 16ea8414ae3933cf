package config_test

import (
	"errors"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
)

// TestEveryProblemInOneRun: unknown keys, values of the wrong kind and
// mistakes of meaning are all reported by one Parse, each at its line and
// key, in the order of the file.
func TestEveryProblemInOneRun(t *testing.T) {
	const file = `nats:
  replicas: three
max_content_chars: [1]
butlers:
  - name: health
    mcp_http: localhost
    default_chanel: log
integrations:
  - id: tg
    type: telegram
    token_env: TG_TOKEN
    grants: [health, ghost]
  - id: tg
    type: telegram
    token_env: TG_TOKEN
    grants: all
  - id: hook
    type: webhook
    grants: all
`
	const want = `invalid configuration:
  line 2: nats.replicas must be a whole number, not "three"
  line 3: max_content_chars must be a whole number, not a list
  line 6: butlers[0].mcp_http "localhost" is not host:port, like 127.0.0.1:8790 or :8790
  line 7: butlers[0].default_chanel is not a setting; did you mean default_channel?
  line 12: integrations[0].grants[1] names butler "ghost", which is not configured
  line 13: integrations[1].id "tg" is used twice
  line 17: integrations[2] (webhook hook): needs secret_env, the variable holding its Standard Webhooks secret (whsec_ followed by base64; make one with: echo whsec_$(openssl rand -base64 32))
  line 17: integrations[2] (webhook hook): needs recipients to send to, or an inbound block to receive`
	_, err := config.Parse([]byte(file))
	if !errors.Is(err, config.ErrInvalid) || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

// TestWrongKindsAllReported: every value of the wrong kind is named, not
// only the first, including those of Herald's own forms (durations, rates,
// grants), with what to write instead.
func TestWrongKindsAllReported(t *testing.T) {
	const file = `notify_timeout: soon
channels: { enabled: maybe }
integrations:
  - id: w
    type: telegram
    token_env: TG_TOKEN
    grants: everyone
    rate_limit_out: { per_chat: fast, burst: x }
    inbound:
      allow_from: "*"
      rate_limit: { rps: [5] }
  - id: w2
    id: w3
    type: telegram
    token_env: TG_TOKEN
`
	const want = `invalid configuration:
  line 1: notify_timeout "soon" is not a duration like 30s, 2m, 8h or 7d
  line 2: channels.enabled must be true or false, not "maybe"
  line 7: integrations[0].grants must be "all" or a list of butler names, not "everyone"
  line 8: integrations[0].rate_limit_out.per_chat "fast" is not a rate like 1/s, 20/min or 30/s, or off
  line 8: integrations[0].rate_limit_out.burst must be a whole number, not "x"
  line 10: integrations[0].inbound.allow_from must be a list (items on lines of their own led by "- ", or [a, b]), not "*"
  line 11: integrations[0].inbound.rate_limit.rps must be a number, like 5 or 0.5, not a list
  line 13: integrations[1].id is written twice (first on line 12); keep one`
	_, err := config.Parse([]byte(file))
	if !errors.Is(err, config.ErrInvalid) || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

// TestMistakeNotRepeated: a key misspelt in an integration is named once,
// not again as the setting it leaves out ("needs secret_env"); a mistake
// elsewhere is still named in the same run.
func TestMistakeNotRepeated(t *testing.T) {
	const file = `default_butler: nobody
integrations:
  - id: w
    type: webhook
    secert_env: S
    recipients: { ops: "https://example.com/h" }
`
	const want = `invalid configuration:
  line 1: default_butler "nobody" is not a configured butler
  line 5: integrations[0].secert_env is not a setting; did you mean secret_env?`
	_, err := config.Parse([]byte(file))
	if !errors.Is(err, config.ErrInvalid) || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}
