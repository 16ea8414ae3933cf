package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// transcript decodes a recording of the real CLI (testdata/README.md).
func transcript(t *testing.T, name string) []Event {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []Event
	if err := readLines(f, MaxLineBytes, func(ev Event) { evs = append(evs, ev) }); err != nil {
		t.Fatal(err)
	}
	return evs
}

// summary is what a caller reads of an event, on one line.
func summary(ev Event) string {
	switch e := ev.(type) {
	case *Init:
		return fmt.Sprintf("init session=%s model=%s mode=%s tools=%d mcp=%v", e.SessionID, e.Model, e.PermissionMode, len(e.Tools), e.MCPServers)
	case *Assistant:
		var uses []string
		for _, u := range e.ToolUses {
			uses = append(uses, u.Name+" "+u.ID+" "+string(u.Input))
		}
		return fmt.Sprintf("assistant %q uses=%v aborted=%v api_error=%d", short(e.Text), uses, e.Aborted, e.APIErrorStatus)
	case *User:
		var res []string
		for _, r := range e.ToolResults {
			res = append(res, fmt.Sprintf("%s error=%v %q", r.ToolUseID, r.IsError, short(r.Content)))
		}
		return fmt.Sprintf("user %q results=%v", e.Text, res)
	case *Result:
		return fmt.Sprintf("result %s is_error=%v interrupted=%v result=%q errors=%q cost=%v turns=%d terminal=%s denials=%d err=%v",
			e.Subtype, e.IsError, e.Interrupted(), short(e.Result), e.Errors, e.TotalCostUSD, e.NumTurns, e.TerminalReason, len(e.PermissionDenials), e.Err())
	case *ControlResponse:
		return fmt.Sprintf("control_response %s %s %s err=%v", e.RequestID, e.Subtype, e.Response, e.Err())
	case *Other:
		return fmt.Sprintf("other %s/%s", e.Type, e.Subtype)
	case *BadLine:
		return fmt.Sprintf("bad %q len=%d err=%v", e.Excerpt, e.Len, e.Err)
	}
	return fmt.Sprintf("%T", ev)
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func TestDecodeRealTranscripts(t *testing.T) {
	const (
		session  = "ee8d06b6-369b-44bb-80d2-5fd73ec70d28"
		initOpus = "init session=" + session + " model=claude-opus-5-5 mode=default tools=22 mcp=[]"
	)
	tests := []struct {
		file string
		want []string
	}{
		{"turns.jsonl", []string{
			initOpus,
			`assistant "Answer to: <system-reminder>\nAttribution…" uses=[] aborted=false api_error=0`,
			`result success is_error=false interrupted=false result="Answer to: <system-reminder>\nAttribution…" errors=[] cost=0.00072 turns=1 terminal=completed denials=0 err=<nil>`,
			initOpus,
			`control_response req_interrupt_1 success {"still_queued":[]} err=<nil>`,
			`assistant "Thinking " uses=[] aborted=true api_error=0`,
			`user "[Request interrupted by user]" results=[]`,
			`result error_during_execution is_error=true interrupted=true result="" errors=["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=null"] cost=0.00126 turns=2 terminal=aborted_streaming denials=0 err=claude: turn failed: interrupted`,
			`control_response req_interrupt_2 success {"still_queued":[]} err=<nil>`,
			`control_response req_bogus_3 error  err=claude: control request refused: Unsupported control request subtype: no_such_thing (unsupported_request)`,
			initOpus,
			`assistant "Answer to: [Request interrupted by user]…" uses=[] aborted=false api_error=0`,
			`result success is_error=false interrupted=false result="Answer to: [Request interrupted by user]…" errors=[] cost=0.00198 turns=1 terminal=completed denials=0 err=<nil>`,
			initOpus,
			`assistant "Answer to: Content as blocks" uses=[] aborted=false api_error=0`,
			`result success is_error=false interrupted=false result="Answer to: Content as blocks" errors=[] cost=0.0027 turns=1 terminal=completed denials=0 err=<nil>`,
		}},
		{"tool.jsonl", []string{
			"init session=8aa276e5-5b53-438b-961b-654ed4a5ed3d model=claude-sonnet-4-5 mode=default tools=29 mcp=[{herald connected} {broken failed}]",
			`assistant "" uses=[Read toolu_01Read0001 {"file_path":"/home/user/project/note.txt"}] aborted=false api_error=0`,
			`user "" results=[toolu_01Read0001 error=false "1\thello from the file\n2\t"]`,
			`assistant "The file says hello." uses=[] aborted=false api_error=0`,
			`result success is_error=false interrupted=false result="The file says hello." errors=[] cost=0.00108 turns=2 terminal=completed denials=0 err=<nil>`,
		}},
		{"permission_denied.jsonl", []string{
			"init session=8aafc4f7-82d4-40b8-ab2b-842df3cd1513 model=claude-opus-5-5 mode=default tools=22 mcp=[]",
			`assistant "" uses=[Bash toolu_01Call0001 {"command":"touch made"}] aborted=false api_error=0`,
			"other system/permission_denied",
			`user "" results=[toolu_01Call0001 error=true "touch in '/home/user/project/made' needs…"]`,
			`assistant "The file says hello." uses=[] aborted=false api_error=0`,
			`result success is_error=false interrupted=false result="The file says hello." errors=[] cost=0.00144 turns=2 terminal=completed denials=1 err=<nil>`,
		}},
		{"interrupt_tool.jsonl", []string{
			"init session=e7a132dc-e907-4d9f-9ab3-c71b39a25af6 model=claude-opus-5-5 mode=default tools=22 mcp=[]",
			`assistant "" uses=[Bash toolu_01Call0001 {"command":"for i in 1 2 3 4 5 6 7 8 9 10; do date > /dev/null; sleep 3; done"}] aborted=false api_error=0`,
			`control_response req_interrupt_tool success {"still_queued":[]} err=<nil>`,
			`user "" results=[toolu_01Call0001 error=true "The user doesn't want to proceed with th…"]`,
			`user "[Request interrupted by user for tool use]" results=[]`,
			`result error_during_execution is_error=true interrupted=true result="" errors=["[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use"] cost=0.00072 turns=3 terminal=aborted_tools denials=0 err=claude: turn failed: interrupted`,
		}},
		{"budget.jsonl", []string{
			"init session=2364f722-f012-4036-a81a-df34e6179a98 model=claude-opus-5-5 mode=default tools=22 mcp=[]",
			`assistant "Answer to: <system-reminder>\nAttribution…" uses=[] aborted=false api_error=0`,
			`result error_max_budget_usd is_error=true interrupted=false result="" errors=["Reached maximum budget ($0.5)"] cost=8.00024 turns=1 terminal=budget_exhausted denials=0 err=claude: turn failed: error_max_budget_usd: Reached maximum budget ($0.5)`,
			"init session=2364f722-f012-4036-a81a-df34e6179a98 model=claude-opus-5-5 mode=default tools=22 mcp=[]",
			`result error_max_budget_usd is_error=true interrupted=false result="" errors=["Reached maximum budget ($0.5)"] cost=8.00024 turns=1 terminal=budget_exhausted denials=0 err=claude: turn failed: error_max_budget_usd: Reached maximum budget ($0.5)`,
		}},
		{"api_error.jsonl", []string{
			"init session=2335468e-734f-49fb-a921-c46d5da4f58a model=claude-opus-5-5 mode=default tools=22 mcp=[]",
			`assistant "API Error: 400 stand-in refuses this req…" uses=[] aborted=false api_error=400`,
			`result success is_error=true interrupted=false result="API Error: 400 stand-in refuses this req…" errors=[] cost=0 turns=1 terminal=api_error denials=0 err=claude: turn failed: API Error: 400 stand-in refuses this request`,
		}},
		{"resume_unknown.jsonl", []string{
			`result error_during_execution is_error=true interrupted=false result="" errors=["No conversation found with session ID: 11111111-2222-4333-8444-555555555555"] cost=0 turns=0 terminal= denials=0 err=claude: turn failed: error_during_execution: No conversation found with session ID: 11111111-2222-4333-8444-555555555555`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var got []string
			for _, ev := range transcript(t, tt.file) {
				got = append(got, summary(ev))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events of %s (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

// Every decoded event keeps its line, for logs and fields the types lack.
func TestDecodeKeepsRaw(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	for i, l := range lines {
		var raw json.RawMessage
		switch e := Decode(l).(type) {
		case *Init:
			raw = e.Raw
		case *Assistant:
			raw = e.Raw
		case *User:
			raw = e.Raw
		case *Result:
			raw = e.Raw
		case *ControlResponse:
			raw = e.Raw
		case *Other:
			raw = e.Raw
		default:
			t.Fatalf("line %d: %s", i+1, summary(e))
		}
		if !bytes.Equal(raw, l) {
			t.Errorf("line %d: Raw is not the line", i+1)
		}
	}
	// Raw is a copy: the reader reuses its buffer.
	line := []byte(`{"type":"stream_event","event":{}}`)
	ev := Decode(line).(*Other)
	copy(line, "XXXXXXXX")
	if string(ev.Raw) != `{"type":"stream_event","event":{}}` {
		t.Errorf("Raw changed with the line: %s", ev.Raw)
	}
}

func TestDecodeBadLines(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"not JSON", "Loading MCP servers…", "not JSON"},
		{"no type", `{"subtype":"init"}`, `no "type"`},
		{"an array", `[1,2]`, "not JSON"},
		{"a typed event of the wrong shape", `{"type":"result","total_cost_usd":"a lot"}`, `a "result" event that does not decode`},
		{"content neither string nor blocks", `{"type":"assistant","message":{"content":42}}`, `a "assistant" event that does not decode`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, ok := Decode([]byte(tt.line)).(*BadLine)
			if !ok {
				t.Fatalf("Decode(%q) is not a BadLine", tt.line)
			}
			if !errors.Is(b.Err, ErrBadLine) || !strings.Contains(b.Err.Error(), tt.want) {
				t.Errorf("Err = %v, want ErrBadLine saying %q", b.Err, tt.want)
			}
			if b.Excerpt != tt.line || b.Len != len(tt.line) {
				t.Errorf("Excerpt, Len = %q, %d; want the line, %d", b.Excerpt, b.Len, len(tt.line))
			}
		})
	}
	t.Run("a huge line is excerpted", func(t *testing.T) {
		line := strings.Repeat("é", 100_000) // two bytes each: the cut must not split one
		b := Decode([]byte(line)).(*BadLine)
		if b.Len != len(line) || len(b.Excerpt) > ExcerptBytes+len("…") || !utf8.ValidString(b.Excerpt) || !strings.HasSuffix(b.Excerpt, "…") {
			t.Errorf("Excerpt of a %d-byte line is %d bytes (valid UTF-8 %v): %q", len(line), len(b.Excerpt), utf8.ValidString(b.Excerpt), b.Excerpt)
		}
	})
}

func TestResultErr(t *testing.T) {
	r := &Result{Subtype: ResultErrorMaxTurns, IsError: true}
	if err := r.Err(); !errors.Is(err, ErrTurn) || !strings.Contains(err.Error(), "error_max_turns") {
		t.Errorf("Err of a bare %s result = %v", r.Subtype, err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, name := range []string{"turns.jsonl", "tool.jsonl", "api_error.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			f.Add(l)
		}
	}
	f.Add([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}}`))
	f.Add([]byte("\xff{"))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev := Decode(line)
		if b, ok := ev.(*BadLine); ok {
			if !utf8.ValidString(b.Excerpt) || len(b.Excerpt) > ExcerptBytes+len("…") {
				t.Errorf("excerpt %q", b.Excerpt)
			}
			return
		}
		// Anything else is a JSON object, as json.Unmarshal reads it.
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Errorf("Decode made %s of a line json.Unmarshal refuses: %v", summary(ev), err)
		}
	})
}
