package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIndentHint(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		line      int
		want      string
	}{
		{"a key one space short", "integrations:\n  - id: tg\n    type: telegram\n   token_env: X\n", 4, "token_env is indented 3 spaces, which matches no block around it (blocks here are indented 0, 2, 4)"},
		{"a key one space too deep", "butlers:\n  - name: health\n     default_channel: log\n", 3, "default_channel is indented 5 spaces, deeper than the line above, which opens no block (blocks here are indented 0, 2, 4)"},
		{"a tab", "nats:\n\t url: x\n", 2, "url is indented with a tab; YAML takes spaces only"},
		{"a key at an integration's dash", "butlers:\n  - name: health\nintegrations:\n  - type: telegram\n    # the bot\n    id: tg_main\n    token_env: TELEGRAM_BOT_TOKEN\n  grants: all\n", 8,
			"grants is not indented under integration tg_main (line 4): indent it like the integration's other keys, 4 spaces"},
		{"a key at a butler's dash", "butlers:\n  - name: health\n    default_channel: log\n  approvers: [\"tg:1\"]\n", 4,
			"approvers is not indented under butler health (line 2): indent it like the butler's other keys, 4 spaces"},
		{"a key at another list's dash", "x:\n  - a: 1\n  b: 2\n", 3, `b is not indented under the item of x on line 2: indent it like that item's other keys, 4 spaces, or start a new item with "- "`},
		{"a key after a plain item", "x:\n  - a\n  b: 2\n", 3, `b is not indented under the item of x on line 2: indent it like that item's other keys, 4 spaces, or start a new item with "- "`},
		{"a list at its key's column", "integrations:\n- id: tg\n  type: log\nbutlers: []\n", 0, ""},
		{"an anchor opens a block", "x: &a\n  b: 1\ny:\n  <<: *a\n", 0, ""},
		{"a nested list", "a:\n  - - x\n    - y\n  - z\n", 0, ""},
		{"a block scalar", "a: |\n  one\n    two\n b\nc: 1\n", 0, ""},
		{"a flow map over lines", "a: { b: 1,\n   c: 2 }\nd: 3\n", 0, ""},
		{"comments", "a:\n  # b\n      # c\n  d: 1 # e: f\n", 0, ""},
	} {
		line, got := indentHint(tt.doc)
		if line != tt.line || got != tt.want {
			t.Errorf("%s: line %d %q, want line %d %q", tt.name, line, got, tt.line, tt.want)
		}
	}
	// Nothing is found wrong in the YAML this repository ships.
	files, _ := filepath.Glob("../../deploy/*.yaml")
	if len(files) == 0 {
		t.Fatal("no deploy/*.yaml found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if line, h := indentHint(string(b)); h != "" {
			t.Errorf("%s:%d: %s", f, line, h)
		}
	}
}
