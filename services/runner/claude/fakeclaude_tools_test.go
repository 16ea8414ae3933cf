package claude_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/heraldhq/herald/services/runner/claude"
)

// runToken is the bearer token the stand-in of Herald's MCP server takes.
const runToken = "run-token-1"

// approverDenial is what the stand-in's approve answers for every tool but
// Bash (and Hang, which it never answers).
const approverDenial = "denied by the test's approver"

// heraldMCP is a stand-in of the MCP server Herald gives a run, over
// streamable HTTP behind a bearer token: reply and notify answer "sent";
// approve allows Bash, waits for Hang until its caller gives up, and
// denies the rest. It records every call.
type heraldMCP struct {
	url string

	mu        sync.Mutex
	calls     []mcpCall
	asked     chan struct{} // a token when approve is called
	cancelled chan struct{} // closed when a Hang question is given up
}

// mcpCall is a call the stand-in got.
type mcpCall struct {
	Tool string
	Args map[string]any
}

func startHeraldMCP(t *testing.T) *heraldMCP {
	t.Helper()
	h := &heraldMCP{asked: make(chan struct{}, 16), cancelled: make(chan struct{})}
	s := server.NewMCPServer("herald", "test")
	sent := func(name string) server.ToolHandlerFunc {
		return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			h.record(name, req.GetArguments())
			return mcp.NewToolResultText("sent"), nil
		}
	}
	s.AddTool(mcp.NewTool("reply", mcp.WithString("request_id"), mcp.WithString("message")), sent("reply"))
	s.AddTool(mcp.NewTool("notify", mcp.WithString("text")), sent("notify"))
	s.AddTool(mcp.NewTool("approve", mcp.WithString("tool_name", mcp.Required()), mcp.WithObject("input"),
		mcp.WithString("tool_use_id")), h.approve)
	mcpHandler := server.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+runToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/mcp"
	return h
}

func (h *heraldMCP) approve(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := req.GetArguments()
	h.record("approve", args)
	h.asked <- struct{}{}
	answer := map[string]any{"behavior": "deny", "message": approverDenial}
	switch args["tool_name"] {
	case "Bash":
		answer = map[string]any{"behavior": "allow", "updatedInput": args["input"]}
	case "Hang":
		<-ctx.Done()
		close(h.cancelled)
	}
	b, _ := json.Marshal(answer)
	return mcp.NewToolResultText(string(b)), nil
}

func (h *heraldMCP) record(tool string, args map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, mcpCall{tool, args})
}

func (h *heraldMCP) got() []mcpCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]mcpCall(nil), h.calls...)
}

// config writes an --mcp-config naming the stand-in "herald", with token.
func (h *heraldMCP) config(t *testing.T, dir, token string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"herald": map[string]any{
		"type": "http", "url": h.url, "headers": map[string]string{"Authorization": "Bearer " + token}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// channelTurn is a user turn as Herald's runner writes it.
const channelTurn = `<channel source="herald" chat="c1" request_id="req-42" user="ada">` + "\nplease make x\n</channel>"

// toolTurn is what a turn with tool calls showed: the calls by name, with
// their results, and the turn's result.
type toolTurn struct {
	uses    []claude.ToolUse
	results []claude.ToolResult
	denied  []string // a system/permission_denied's tool_name
	result  *claude.Result
}

// playToolTurn sends channelTurn and reads its events to the result.
func playToolTurn(t *testing.T, s *claude.Session) toolTurn {
	t.Helper()
	if err := s.Send(channelTurn); err != nil {
		t.Fatal(err)
	}
	var tt toolTurn
	var before []claude.Event
	tt.result, before = until[*claude.Result](t, s)
	for _, ev := range before {
		switch ev := ev.(type) {
		case *claude.Assistant:
			tt.uses = append(tt.uses, ev.ToolUses...)
		case *claude.User:
			tt.results = append(tt.results, ev.ToolResults...)
		case *claude.Other:
			var pd struct {
				ToolName string `json:"tool_name"`
			}
			if ev.Subtype == "permission_denied" && json.Unmarshal(ev.Raw, &pd) == nil {
				tt.denied = append(tt.denied, pd.ToolName)
			}
		}
	}
	for i, u := range tt.uses {
		if !strings.HasPrefix(u.ID, "toolu_") {
			t.Errorf("tool_use %s has id %q, not toolu_…", u.Name, u.ID)
		}
		if i < len(tt.results) && tt.results[i].ToolUseID != u.ID {
			t.Errorf("tool_result %d answers %q, not tool_use %s's %q", i, tt.results[i].ToolUseID, u.Name, u.ID)
		}
	}
	return tt
}

// The model's tool calls reach the MCP server named in --mcp-config, with
// its token; those --allowedTools does not cover are asked of the
// --permission-prompt-tool first, and run only if it allows them.
func TestFakeclaudeToolCalls(t *testing.T) {
	const reply = `"call_tool": {"name": "reply", "arguments": {"request_id": "{{request_id}}", "message": "hi"}}`
	bash := map[string]any{"command": "touch x", "description": "make x"}
	tests := []struct {
		name       string
		turn       string // a turn of the script
		noPrompter bool   // without --permission-prompt-tool
		wantCalls  []mcpCall
		wantUses   []string
		wantResult []claude.ToolResult // without ToolUseID
		wantDenied []string            // system/permission_denied
		denials    []string            // the result's permission_denials
		wantText   string
		wantLog    []logEntry
	}{{
		name: "an allowed reply and an approved Bash",
		turn: `{"permission": {"tool_name": "Bash", "input": {"command": "touch x", "description": "make x"}}, ` + reply + `}`,
		wantCalls: []mcpCall{
			{"approve", map[string]any{"tool_name": "Bash", "input": bash}},
			{"reply", map[string]any{"request_id": "req-42", "message": "hi"}},
		},
		wantUses:   []string{"Bash", "mcp__herald__reply"},
		wantResult: []claude.ToolResult{{Content: "ran touch x"}, {Content: "sent"}},
		wantText:   "Done.",
		wantLog: []logEntry{
			{Kind: "permission", Tool: "Bash", Behavior: "allow"},
			{Kind: "tool", Server: "herald", Name: "reply", Text: "sent"},
		},
	}, {
		name: "a tool --allowedTools does not cover is asked about, and denied",
		turn: `{"call_tool": {"name": "notify", "arguments": {"text": "for {{request_id}}"}}}`,
		wantCalls: []mcpCall{
			{"approve", map[string]any{"tool_name": "mcp__herald__notify", "input": map[string]any{"text": "for req-42"}}},
		},
		wantUses:   []string{"mcp__herald__notify"},
		wantResult: []claude.ToolResult{{Content: approverDenial, IsError: true}},
		wantText:   "Denied: " + approverDenial,
		denials:    []string{"mcp__herald__notify"},
		wantLog:    []logEntry{{Kind: "permission", Tool: "mcp__herald__notify", Behavior: "deny", Message: approverDenial}},
	}, {
		name:       "a built-in tool denied by the approver, with the turn's reply",
		turn:       `{"permission": {"tool_name": "Write", "input": {"file_path": "x"}}, "reply": "I could not."}`,
		wantCalls:  []mcpCall{{"approve", map[string]any{"tool_name": "Write", "input": map[string]any{"file_path": "x"}}}},
		wantUses:   []string{"Write"},
		wantResult: []claude.ToolResult{{Content: approverDenial, IsError: true}},
		wantText:   "I could not.",
		denials:    []string{"Write"},
		wantLog:    []logEntry{{Kind: "permission", Tool: "Write", Behavior: "deny", Message: approverDenial}},
	}, {
		name:       "no permission prompt tool",
		turn:       `{"permission": {"tool_name": "Bash", "input": {"command": "touch x"}}}`,
		noPrompter: true,
		wantUses:   []string{"Bash"},
		wantResult: []claude.ToolResult{{Content: "no permission prompt tool", IsError: true}},
		wantDenied: []string{"Bash"},
		wantText:   "Denied: no permission prompt tool",
		denials:    []string{"Bash"},
		wantLog:    []logEntry{{Kind: "permission", Tool: "Bash", Behavior: "deny", Message: "no permission prompt tool"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startHeraldMCP(t)
			o, logPath := fake(t, `{"turns": [`+tc.turn+`]}`)
			o.MCPConfig, o.StrictMCPConfig = h.config(t, o.Dir, runToken), true
			o.AllowedTools = []string{"mcp__herald__reply"}
			if !tc.noPrompter {
				o.PermissionPromptTool = "mcp__herald__approve"
			}
			s := start(t, o)
			tt := playToolTurn(t, s)

			// approve is asked about the tool_use the model wrote.
			calls := h.got()
			for _, c := range calls {
				if c.Tool != "approve" {
					continue
				}
				id, _ := c.Args["tool_use_id"].(string)
				if !hasUse(tt.uses, c.Args["tool_name"], id) {
					t.Errorf("approve was asked about tool_use %q, which the model did not write (%v)", id, tt.uses)
				}
				delete(c.Args, "tool_use_id")
			}
			if diff := cmp.Diff(tc.wantCalls, calls); diff != "" {
				t.Errorf("the MCP server's calls (-want +got):\n%s", diff)
			}
			var uses []string
			for _, u := range tt.uses {
				uses = append(uses, u.Name)
			}
			if diff := cmp.Diff(tc.wantUses, uses); diff != "" {
				t.Errorf("tool_use names (-want +got):\n%s", diff)
			}
			results := tt.results
			for i := range results {
				results[i].ToolUseID = ""
			}
			if diff := cmp.Diff(tc.wantResult, results); diff != "" {
				t.Errorf("tool_results (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDenied, tt.denied); diff != "" {
				t.Errorf("system/permission_denied events (-want +got):\n%s", diff)
			}
			r := tt.result
			if r.Err() != nil || r.Result != tc.wantText || r.NumTurns != 1+len(tc.wantUses) {
				t.Errorf("result: %v, text %q, num_turns %d; want success %q, %d", r.Err(), r.Result, r.NumTurns, tc.wantText, 1+len(tc.wantUses))
			}
			var denials []string
			for _, d := range r.PermissionDenials {
				denials = append(denials, d.ToolName)
			}
			if diff := cmp.Diff(tc.denials, denials); diff != "" {
				t.Errorf("permission_denials (-want +got):\n%s", diff)
			}
			var logged []logEntry
			for _, e := range readLog(t, logPath) {
				if e.Kind == "permission" || e.Kind == "tool" {
					logged = append(logged, e)
				}
			}
			if diff := cmp.Diff(tc.wantLog, logged); diff != "" {
				t.Errorf("fakeclaude's log (-want +got):\n%s", diff)
			}
		})
	}
}

func hasUse(uses []claude.ToolUse, name any, id string) bool {
	for _, u := range uses {
		if u.Name == name && u.ID == id {
			return true
		}
	}
	return false
}

// A server that refuses the session's token gets no call: the model sees
// an error tool_result that says why.
func TestFakeclaudeToolCallRefused(t *testing.T) {
	h := startHeraldMCP(t)
	o, logPath := fake(t, `{"turns": [{"call_tool": {"name": "reply", "arguments": {"message": "hi"}}}]}`)
	o.MCPConfig, o.AllowedTools = h.config(t, o.Dir, "not-the-token"), []string{"mcp__herald__reply"}
	s := start(t, o)
	tt := playToolTurn(t, s)
	if calls := h.got(); len(calls) != 0 {
		t.Errorf("the server got calls %v", calls)
	}
	const why = "authorization required"
	if len(tt.results) != 1 || !tt.results[0].IsError || !strings.Contains(tt.results[0].Content, why) {
		t.Errorf("tool_results %+v, want one error saying %q", tt.results, why)
	}
	if tools := logOf(readLog(t, logPath), "tool"); len(tools) != 1 || !tools[0].IsError || !strings.Contains(tools[0].Text, why) {
		t.Errorf("logged calls %+v, want one error saying %q", tools, why)
	}
}

// A permission question waits for its answer as long as it takes; an
// interrupt meanwhile is acknowledged, gives the question up and ends the
// turn, and the session goes on.
func TestFakeclaudeInterruptDuringPermission(t *testing.T) {
	h := startHeraldMCP(t)
	o, _ := fake(t, `{"turns": [{"permission": {"tool_name": "Hang", "input": {}}}, {"reply": "Next."}]}`)
	o.MCPConfig, o.PermissionPromptTool = h.config(t, o.Dir, runToken), "mcp__herald__approve"
	s := start(t, o)
	if err := s.Send(channelTurn); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.asked:
	case <-time.After(hangGuard):
		t.Fatal("approve was never asked")
	}
	if err := s.Interrupt(t.Context()); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	r, before := until[*claude.Result](t, s)
	if !r.Interrupted() || r.TerminalReason != "aborted_tools" || r.Err() == nil {
		t.Errorf("result %s, terminal_reason %q, err %v; want an interrupted turn (aborted_tools)", r.Subtype, r.TerminalReason, r.Err())
	}
	var notes []string
	for _, ev := range before {
		if u, ok := ev.(*claude.User); ok {
			for _, tr := range u.ToolResults {
				if !tr.IsError {
					t.Errorf("the interrupted call's tool_result is not an error: %q", tr.Content)
				}
			}
			if u.Text != "" {
				notes = append(notes, u.Text)
			}
		}
	}
	if want := []string{"[Request interrupted by user for tool use]"}; !cmp.Equal(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	select {
	case <-h.cancelled:
	case <-time.After(hangGuard):
		t.Error("the approve call was not given up")
	}
	if err := s.Send("and now?"); err != nil {
		t.Fatal(err)
	}
	if r, _ := until[*claude.Result](t, s); r.Result != "Next." {
		t.Errorf("the next turn answered %q, want %q", r.Result, "Next.")
	}
}
