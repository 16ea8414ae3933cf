package config_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
)

const approversYAML = `butlers:
  - name: health
    approvers: [tg_main:111, "sl:U0BOSS"]
    quorum:
      - { tools: "^(Bash|Write)$", count: 2 }
  - { name: finance }
integrations:
  - id: tg_main
    type: webhook
    secret_env: HOOK_SECRET
    grants: all
    inbound: { enabled: true, approvers: ["111", "222"] }
  - id: sl
    type: webhook
    secret_env: HOOK_SECRET
    grants: [health]
    inbound: { enabled: true, approvers: [U0BOSS] }
`

// TestButlerApprovers: a butler's approvers narrow who may answer its
// prompts; without them every approver of its integrations may; a quorum
// applies to the tools it matches.
func TestButlerApprovers(t *testing.T) {
	cfg, err := config.Parse([]byte(approversYAML))
	if err != nil {
		t.Fatal(err)
	}
	health, finance, tg, sl := cfg.Butler("health"), cfg.Butler("finance"), cfg.Integration("tg_main"), cfg.Integration("sl")
	for _, tt := range []struct {
		b    *config.Butler
		in   *config.Integration
		who  string
		want bool
	}{
		{health, tg, "111", true},
		{health, tg, "222", false}, // an approver of tg_main, not of health
		{health, sl, "u0boss", true},
		{finance, tg, "222", true}, // no list: every approver of its integrations
		{finance, tg, "333", false},
	} {
		if got := tt.b.MayApprove(tt.in, tt.who); got != tt.want {
			t.Errorf("%s may be answered by %s on %s: %v, want %v", tt.b.Name, tt.who, tt.in.ID, got, tt.want)
		}
	}
	if health.QuorumFor("Bash") != 2 || health.QuorumFor("Read") != 1 || health.QuorumFor("BashX") != 1 {
		t.Errorf("quorum: Bash %d, Read %d, BashX %d; want 2, 1, 1", health.QuorumFor("Bash"), health.QuorumFor("Read"), health.QuorumFor("BashX"))
	}
}

// TestButlerApproversMistakes: each mistake is named at its key.
func TestButlerApproversMistakes(t *testing.T) {
	for _, tt := range []struct{ from, to, want string }{
		{"tg_main:111,", "tg_main-111,", `butlers[0].approvers[0] "tg_main-111" must be <integration>:<sender>`},
		{"tg_main:111,", "tg_main:333,", "butlers[0].approvers[0]: 333 is not an approver of integration tg_main"},
		{"tg_main:111,", "nope:111,", `butlers[0].approvers[0]: integration "nope" is not configured`},
		{"count: 2", "count: 3", "butlers[0].quorum[0].count 3 can never be reached: only 2 approver(s)"},
		{`"^(Bash|Write)$"`, `"(Bash"`, "butlers[0].quorum[0].tools"},
	} {
		_, err := config.Parse([]byte(strings.Replace(approversYAML, tt.from, tt.to, 1)))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s -> %s: %v, want %q", tt.from, tt.to, err, tt.want)
		}
	}
}
