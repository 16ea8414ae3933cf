package claude_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeclaude writes what the real CLI writes: every event kind it emits is
// in the real transcripts (testdata), and each of its fields, down to
// message blocks, has a name and JSON type the real CLI uses there.
func TestFakeclaudeMatchesTheRealCLI(t *testing.T) {
	real := map[string]map[string][]string{}
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		addShapes(t, real, b)
	}

	const headless = "-p --input-format stream-json --output-format stream-json --verbose"
	user := func(text string) string {
		return fmt.Sprintf(`{"type":"user","message":{"role":"user","content":%q}}`, text)
	}
	control := func(id, subtype string) string {
		return fmt.Sprintf(`{"type":"control_request","request_id":%q,"request":{"subtype":%q}}`, id, subtype)
	}
	h := startHeraldMCP(t)
	tools := headless + " --mcp-config=" + h.config(t, t.TempDir(), runToken) + " --allowedTools=mcp__herald__reply"
	runs := []struct {
		args, script string
		stdin        []string
	}{
		{headless, `{"turns": [{"reply": "Hi"}, {"sleep_ms": 600000, "partial": "Thinking "}, {"api_error": "refused"}]}`,
			[]string{user("hello"), user("think slowly"), control("i1", "interrupt"), control("i2", "interrupt"),
				control("b3", "no_such_thing"), user("third")}},
		{headless + " --max-budget-usd 0.5", `{"turns": [{"cost_usd": 0.6}]}`, []string{user("costly"), user("again")}},
		{headless + " --resume 11111111-2222-4333-8444-555555555555", `{"unknown_resume": true}`, nil},
		{tools + " --permission-prompt-tool mcp__herald__approve",
			`{"turns": [{"permission": {"tool_name": "Bash", "input": {"command": "touch x"}},
			             "call_tool": {"name": "reply", "arguments": {"message": "hi"}}},
			            {"permission": {"tool_name": "Write", "input": {"file_path": "x"}}}]}`,
			[]string{user("do it"), user("write it")}},
		{tools + " --permission-prompt-tool mcp__herald__approve", `{"turns": [{"permission": {"tool_name": "Hang"}}]}`,
			[]string{user("wait"), control("i1", "interrupt")}},
		{tools, `{"turns": [{"permission": {"tool_name": "Bash", "input": {"command": "touch x"}}}]}`,
			[]string{user("do it")}},
	}
	fake := map[string]map[string][]string{}
	for _, r := range runs {
		dir := t.TempDir()
		script := filepath.Join(dir, "script.json")
		if err := os.WriteFile(script, []byte(r.script), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), filepath.Join(fakeDir, "claude"), strings.Fields(r.args)...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "FAKECLAUDE_SCRIPT="+script)
		cmd.Stdin = strings.NewReader(strings.Join(r.stdin, "\n") + "\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, _ := cmd.Output() // some end with status 1, as the real CLI's
		if len(out) == 0 {
			t.Fatalf("fakeclaude %s wrote nothing; stderr: %s", r.args, stderr.String())
		}
		addShapes(t, fake, out)
	}

	var kinds []string
	for kind, paths := range fake {
		kinds = append(kinds, kind)
		realPaths, ok := real[kind]
		if !ok {
			t.Errorf("fakeclaude writes %s events; the real CLI's transcripts have none", kind)
			continue
		}
		for path, types := range paths {
			for _, typ := range types {
				if !slices.Contains(realPaths[path], typ) {
					t.Errorf("%s: fakeclaude writes %s as %s; the real CLI as %v", kind, path, typ, realPaths[path])
				}
			}
		}
	}
	slices.Sort(kinds)
	want := []string{"assistant", "control_response/error", "control_response/success", "result/error_during_execution",
		"result/error_max_budget_usd", "result/success", "system/init", "system/permission_denied", "user"}
	if !slices.Equal(kinds, want) {
		t.Errorf("fakeclaude wrote kinds %v, want %v", kinds, want)
	}
}

// addShapes records, by event kind, the JSON type of each field path of
// every line in b.
func addShapes(t *testing.T, into map[string]map[string][]string, b []byte) {
	t.Helper()
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var ev map[string]any
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("not a JSON object: %.200s", line)
		}
		kind, _ := ev["type"].(string)
		switch kind {
		case "system", "result":
			kind += "/" + fmt.Sprint(ev["subtype"])
		case "control_response":
			resp, _ := ev["response"].(map[string]any)
			kind += "/" + fmt.Sprint(resp["subtype"])
		}
		if into[kind] == nil {
			into[kind] = map[string][]string{}
		}
		walk(into[kind], "", ev, 0)
	}
}

func walk(into map[string][]string, path string, v any, depth int) {
	add := func(p, typ string) {
		if !slices.Contains(into[p], typ) {
			into[p] = append(into[p], typ)
		}
	}
	if depth > 4 {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := strings.TrimPrefix(path+"."+k, ".")
			add(p, jsonType(x))
			if k == "input" || k == "tool_input" {
				continue // a tool's schema shapes its input, not the CLI
			}
			walk(into, p, x, depth+1)
		}
	case []any:
		for _, x := range v {
			add(path+"[]", jsonType(x))
			walk(into, path+"[]", x, depth+1)
		}
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	}
	return "object"
}
