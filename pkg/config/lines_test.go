package config

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

const linesDoc = `x-common: &common
  grants: all
nats:
  url: nats://x:4222
butlers:
  - name: health
    approvers:
      - tg:1
      - tg:2
  - { name: finance, mcp_http: ":1" }
integrations:
  - id: hook
    type: webhook
    recipients:
      ops.eu: https://example.com/h
    quiet_hours:
      from: "22:00"
  - id: tg
    <<: *common
`

// TestLineOfMessage: a message of Validate is placed at the line of the
// deepest key of its leading path the file has: a value's line, a list
// item's, the key of a block or list; the integration's own line for its
// channel's settings where the message names no key of them.
func TestLineOfMessage(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(linesDoc), &doc); err != nil {
		t.Fatal(err)
	}
	root := doc.Content[0]
	for _, tt := range []struct {
		msg  string
		line int
	}{
		{`nats.url "x" is not a URL`, 4},
		{`butlers[0].name "health" is used twice`, 6},
		{"butlers[0].approvers must be a list", 7},
		{`butlers[0].approvers[1]: integration "tg" is not configured`, 9},
		{`butlers[1].mcp_http ":1" is butler "health"'s too`, 10},
		{"butlers[1].default_channel: no telegram integration is granted", 10}, // not written: the item's line
		{"butlers[5].name is missing", 5},                                      // no such item: the list's key
		{"integrations[0].quiet_hours.tz is required", 16},                     // not written: its block's key
		{`integrations[0].quiet_hours.from "25:00" is not a time of day`, 17},
		{"integrations[0] (webhook hook): recipients.ops.eu is not a URL", 15}, // a key with a dot in it
		{"integrations[0] (webhook hook): needs secret_env, the variable", 12}, // no key: the integration
		{"integrations[1].grants[0] names butler", 2},                          // through a merge key
		{`default_butler "x" is not a configured butler`, 0},                   // not in the file
		{"nothing. at all", 0},
	} {
		_, path := subjectOf(tt.msg)
		if got := lineOf(root, path); got != tt.line {
			t.Errorf("%s: line %d, want %d", tt.msg, got, tt.line)
		}
	}
	if got := lineOf(nil, "nats.url"); got != 0 {
		t.Errorf("no file: line %d, want none", got)
	}
}
