package main

import (
	"crypto/rand"
	"fmt"
	"strconv"
	"time"
)

// The events, with the real CLI's field names and JSON types. Fields the
// real CLI writes that no client of fakeclaude reads are left out.

type obj = map[string]any

func (f *fake) init() obj {
	servers := []obj{}
	for _, s := range f.mcpServers {
		servers = append(servers, obj{"name": s.Name, "status": f.mcpStatus(s.Name), "source": "dynamic"})
	}
	tools := f.script.Tools
	if tools == nil {
		tools = []string{"Task", "Bash", "Edit", "Read", "ToolSearch", "WebFetch", "WebSearch", "Write"}
	}
	mode := f.flags.last("--permission-mode")
	if mode == "" {
		mode = "default"
	}
	return obj{"type": "system", "subtype": "init", "cwd": f.dir, "session_id": f.sessionID,
		"tools": tools, "mcp_servers": servers, "model": f.model, "permissionMode": mode,
		"slash_commands": []string{}, "claude_code_version": "2.1.332", "output_style": "default",
		"agents": []string{}, "skills": []string{}, "plugins": []obj{}, "uuid": uuid(),
		"analytics_disabled": true}
}

func usage(in, out int) obj {
	return obj{"input_tokens": in, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

// mcpStatus is what init says of server name.
func (f *fake) mcpStatus(name string) string {
	if s, ok := f.script.MCPStatus[name]; ok {
		return s
	}
	return "connected"
}

func (f *fake) assistant(text string, aborted bool) obj {
	return f.assistantContent([]obj{{"type": "text", "text": text}}, aborted)
}

// toolUse is the model calling tool name with input, as call id.
func (f *fake) toolUse(id, name string, input map[string]any) obj {
	if input == nil {
		input = map[string]any{}
	}
	return f.assistantContent([]obj{{"type": "tool_use", "id": id, "name": name, "input": input}}, false)
}

func (f *fake) assistantContent(content []obj, aborted bool) obj {
	a := obj{"type": "assistant", "message": obj{
		"content": content, "id": "msg_fake" + strconv.Itoa(f.turns),
		"model": f.model, "role": "assistant", "stop_reason": nil, "stop_sequence": nil, "type": "message",
		"usage": usage(120, 1)},
		"parent_tool_use_id": nil, "session_id": f.sessionID, "uuid": uuid(), "timestamp": timestamp()}
	if aborted {
		a["aborted"] = true
	}
	return a
}

// apiErrorMessage is how the real CLI reports a request the API refused.
func (f *fake) apiErrorMessage(msg string) obj {
	return obj{"type": "assistant", "message": obj{
		"content": []obj{{"type": "text", "text": "API Error: 400 " + msg}}, "id": uuid(),
		"model": "<synthetic>", "role": "assistant", "stop_reason": "stop_sequence", "stop_sequence": "",
		"type": "message", "usage": usage(0, 0)},
		"parent_tool_use_id": nil, "session_id": f.sessionID, "uuid": uuid(), "timestamp": timestamp(),
		"error": "unknown", "is_api_error_message": true, "api_error_status": 400, "api_error_type": "invalid_request_error"}
}

func (f *fake) userText(text string) obj {
	return obj{"type": "user", "message": obj{"role": "user", "content": []obj{{"type": "text", "text": text}}},
		"parent_tool_use_id": nil, "session_id": f.sessionID, "uuid": uuid(), "timestamp": timestamp()}
}

// toolResult is what call id gave the model; like the real CLI's, its
// content is a string, and is_error is there only when true.
func (f *fake) toolResult(id, content string, isError bool) obj {
	block := obj{"type": "tool_result", "tool_use_id": id, "content": content}
	if isError {
		block["is_error"] = true
	}
	return obj{"type": "user", "message": obj{"role": "user", "content": []obj{block}},
		"parent_tool_use_id": nil, "session_id": f.sessionID, "uuid": uuid(), "timestamp": timestamp()}
}

// permissionDenied is how the real CLI reports a call its own rules
// refused, with nobody asked.
func (f *fake) permissionDenied(tool, id, message string) obj {
	return obj{"type": "system", "subtype": "permission_denied", "tool_name": tool, "tool_use_id": id,
		"message": message, "uuid": uuid(), "session_id": f.sessionID}
}

// result ends a turn; extra sets or, with a nil value, removes fields.
func (f *fake) result(subtype string, isError bool, took time.Duration, extra obj) obj {
	r := obj{"type": "result", "subtype": subtype, "is_error": isError,
		"duration_ms": took.Milliseconds(), "duration_api_ms": took.Milliseconds(), "num_turns": 1,
		"stop_reason": "end_turn", "session_id": f.sessionID, "total_cost_usd": f.cost,
		"usage": usage(120, 12), "modelUsage": obj{}, "permission_denials": []obj{},
		"terminal_reason": "completed", "uuid": uuid()}
	for k, v := range extra {
		if v == nil && k != "stop_reason" {
			delete(r, k)
			continue
		}
		r[k] = v
	}
	return r
}

func controlSuccess(id string) obj {
	return obj{"type": "control_response", "response": obj{"subtype": "success", "request_id": id,
		"response": obj{"still_queued": []string{}}}}
}

func controlError(id, msg, code string) obj {
	return obj{"type": "control_response", "response": obj{"subtype": "error", "request_id": id,
		"error": msg, "error_code": code}}
}

func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// toolUseID is a new tool_use id, of the API's shape.
func toolUseID() string { return "toolu_01" + rand.Text()[:22] }

func timestamp() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }
