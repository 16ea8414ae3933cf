package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIndentHint(t *testing.T) {
	for _, tt := range []struct{ name, doc, want string }{
		{"a key one space short", "integrations:\n  - id: tg\n    type: telegram\n   token_env: X\n", "line 4 is indented 3 spaces, which matches no block"},
		{"a key one space too deep", "butlers:\n  - name: health\n     default_channel: log\n", "line 3 is indented 5 spaces, deeper than the line above"},
		{"a tab", "nats:\n\t url: x\n", "line 2 is indented with a tab"},
		{"an anchor opens a block", "x: &a\n  b: 1\ny:\n  <<: *a\n", ""},
		{"a nested list", "a:\n  - - x\n    - y\n  - z\n", ""},
		{"a block scalar", "a: |\n  one\n    two\n b\nc: 1\n", ""},
		{"a flow map over lines", "a: { b: 1,\n   c: 2 }\nd: 3\n", ""},
		{"comments", "a:\n  # b\n      # c\n  d: 1 # e: f\n", ""},
	} {
		got := indentHint(tt.doc)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
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
		if h := indentHint(string(b)); h != "" {
			t.Errorf("%s: %s", f, h)
		}
	}
}
