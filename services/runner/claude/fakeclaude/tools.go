package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// step is one tool call of the model's: of a built-in tool (server "")
// or of MCP tool call on server.
type step struct {
	tool   string // the name the model calls, e.g. "Bash" or "mcp__herald__reply"
	server string
	call   string // the tool's name on server
	input  map[string]any
}

// outcome is what a turn's tool calls came to.
type outcome struct {
	calls       int      // tool_use blocks written
	denied      []string // the messages of the calls not allowed
	denials     []obj    // the result's permission_denials
	interrupted bool
}

// The texts the real CLI gives the model for a call an interrupt stopped:
// rejected before it ran (while its permission was asked), and stopped
// while running (testdata/interrupt_tool.jsonl).
const (
	rejectedText = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."
	stoppedText  = rejectedText + " Correction to the text above: this call was stopped while running, not refused before it ran. It may have run in part or in full, and its changes may have been written. No permission prompt was involved. Work it started elsewhere (a remote command, a background process) may still be running, so check before starting the same work again. The instruction to stop and wait still stands."
)

// steps are turn t's tool calls in order, with "{{request_id}}" in their
// input replaced by requestID.
func (f *fake) steps(t turn, requestID string) []step {
	var steps []step
	if p := t.Permission; p != nil {
		steps = append(steps, step{tool: p.ToolName, input: withRequestID(p.Input, requestID)})
	}
	calls := t.Calls
	if t.CallTool != nil {
		calls = append([]toolCall{*t.CallTool}, calls...)
	}
	for _, c := range calls {
		server := c.Server
		if server == "" && len(f.mcpServers) > 0 {
			server = f.mcpServers[0].Name
		}
		steps = append(steps, step{tool: mcpToolName(server, c.Name), server: server, call: c.Name,
			input: withRequestID(c.Arguments, requestID)})
	}
	return steps
}

func mcpToolName(server, tool string) string { return "mcp__" + server + "__" + tool }

// requestIDAttr finds the request id in a <channel> message of Herald's.
var requestIDAttr = regexp.MustCompile(`request_id="([^"]*)"`)

// requestID is the request_id attribute of prompt, "" if it has none.
func requestID(prompt string) string {
	if m := requestIDAttr.FindStringSubmatch(prompt); m != nil {
		return m[1]
	}
	return ""
}

// withRequestID is a copy of input with "{{request_id}}" replaced by id in
// every string in it.
func withRequestID(input map[string]any, id string) map[string]any {
	var replace func(v any) any
	replace = func(v any) any {
		switch v := v.(type) {
		case string:
			return strings.ReplaceAll(v, "{{request_id}}", id)
		case map[string]any:
			m := make(map[string]any, len(v))
			for k, x := range v {
				m[k] = replace(x)
			}
			return m
		case []any:
			l := make([]any, len(v))
			for i, x := range v {
				l[i] = replace(x)
			}
			return l
		}
		return v
	}
	if input == nil {
		return map[string]any{}
	}
	return replace(input).(map[string]any)
}

// runSteps plays the calls in order, up to the end or an interrupt.
func (f *fake) runSteps(steps []step) (outcome, error) {
	out := outcome{denials: []obj{}}
	for _, s := range steps {
		if err := f.runStep(s, &out); err != nil || out.interrupted {
			return out, err
		}
	}
	return out, nil
}

// runStep plays one call as the real CLI does: the model's tool_use, the
// permission question if the call needs one, the call, its tool_result.
func (f *fake) runStep(s step, out *outcome) error {
	id := toolUseID()
	f.write(f.toolUse(id, s.tool, s.input))
	out.calls++
	input := s.input
	if f.needsPermission(s.tool) {
		var v verdict
		interrupted, err := f.async(func(ctx context.Context) { v = f.askPermission(ctx, s.tool, input, id) })
		if err != nil {
			return err
		}
		if interrupted {
			f.write(f.toolResult(id, rejectedText, true))
			out.interrupted = true
			return nil
		}
		f.log.write(obj{"kind": "permission", "tool": s.tool, "behavior": v.behavior, "message": v.message})
		if v.behavior != "allow" {
			if v.unasked {
				f.write(f.permissionDenied(s.tool, id, v.message))
			}
			f.write(f.toolResult(id, v.message, true))
			out.denied = append(out.denied, v.message)
			out.denials = append(out.denials, obj{"tool_name": s.tool, "tool_use_id": id, "tool_input": s.input})
			return nil
		}
		input = v.input
	}
	if s.server == "" {
		f.write(f.toolResult(id, "ran "+firstOf(stringField(input, "command"), s.tool), false))
		return nil
	}
	var res toolOutput
	interrupted, err := f.async(func(ctx context.Context) { res = f.callMCP(ctx, s.server, s.call, input) })
	if err != nil {
		return err
	}
	if interrupted {
		f.write(f.toolResult(id, stoppedText, true))
		out.interrupted = true
		return nil
	}
	f.log.write(obj{"kind": "tool", "server": s.server, "name": s.call, "is_error": res.isError, "text": res.text})
	f.write(f.toolResult(id, res.text, res.isError))
	return nil
}

func stringField(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// toolsInterrupted ends a turn an interrupt stopped during a tool call.
func (f *fake) toolsInterrupted(start time.Time, out outcome) {
	f.write(f.userText("[Request interrupted by user for tool use]"))
	f.write(f.result("error_during_execution", true, time.Since(start), obj{"stop_reason": "tool_use",
		"terminal_reason": "aborted_tools", "num_turns": out.calls + 2, "permission_denials": out.denials,
		"errors": []string{"[ede_diagnostic] result_type=user last_content_type=n/a stop_reason=tool_use"}}))
	f.lastFailed = true
}

// needsPermission says whether a call of tool is asked about: not when
// --allowedTools covers it, or in bypassPermissions mode. Rules are
// matched by name: "Bash", "mcp__herald__reply", "mcp__herald" or
// "mcp__herald__*" (every tool of the server); a rule with a pattern,
// "Bash(git log *)", covers nothing here.
func (f *fake) needsPermission(tool string) bool {
	if f.flags.last("--permission-mode") == "bypassPermissions" {
		return false
	}
	for _, v := range f.flags["--allowedTools"] {
		for _, rule := range splitRules(v) {
			server, isServer := strings.CutSuffix(rule, "__*")
			if !isServer && strings.HasPrefix(rule, "mcp__") && !strings.Contains(rule[len("mcp__"):], "__") {
				server, isServer = rule, true
			}
			if rule == tool || isServer && strings.HasPrefix(tool, server+"__") {
				return false
			}
		}
	}
	return true
}

// splitRules splits an --allowedTools value as the CLI does: on commas
// and spaces outside parentheses.
func splitRules(v string) []string {
	var rules []string
	depth, start := 0, 0
	for i, r := range v {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case (r == ',' || r == ' ') && depth == 0:
			if s := v[start:i]; s != "" {
				rules = append(rules, s)
			}
			start = i + 1
		}
	}
	if s := v[start:]; s != "" {
		rules = append(rules, s)
	}
	return rules
}

// verdict is the permission prompt tool's answer.
type verdict struct {
	behavior string         // "allow" or "deny"
	input    map[string]any // on allow: what the call runs with
	message  string         // on deny: why
	unasked  bool           // denied with nobody asked
}

// askPermission asks the --permission-prompt-tool whether tool may run
// with input, waiting as long as its answer takes.
func (f *fake) askPermission(ctx context.Context, tool string, input map[string]any, id string) verdict {
	prompt := f.flags.last("--permission-prompt-tool")
	if prompt == "" {
		return verdict{behavior: "deny", message: "no permission prompt tool", unasked: true}
	}
	rest, _ := strings.CutPrefix(prompt, "mcp__")
	server, name, ok := strings.Cut(rest, "__")
	if !ok || !strings.HasPrefix(prompt, "mcp__") {
		return verdict{behavior: "deny", message: fmt.Sprintf("fakeclaude: --permission-prompt-tool %s is not mcp__<server>__<tool>", prompt)}
	}
	res := f.callMCP(ctx, server, name, map[string]any{"tool_name": tool, "input": input, "tool_use_id": id})
	if res.isError {
		return verdict{behavior: "deny", message: res.text}
	}
	var a struct {
		Behavior     string         `json:"behavior"`
		UpdatedInput map[string]any `json:"updatedInput"`
		Message      string         `json:"message"`
	}
	if err := json.Unmarshal([]byte(res.text), &a); err != nil || a.Behavior != "allow" && a.Behavior != "deny" {
		return verdict{behavior: "deny", message: fmt.Sprintf(`fakeclaude: %s answered %q, not {"behavior":"allow"|"deny",…}`, prompt, res.text)}
	}
	if a.Behavior == "deny" {
		return verdict{behavior: "deny", message: a.Message}
	}
	if a.UpdatedInput == nil {
		a.UpdatedInput = input
	}
	return verdict{behavior: "allow", input: a.UpdatedInput}
}
