//go:build claude

package claude

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMessagesAPIPlaysScript holds the stand-in to the wire format and the
// script: ToolSearch, then the tool, then the last words, each answer a
// well-formed event stream, and the tool's result kept.
func TestMessagesAPIPlaysScript(t *testing.T) {
	api := newMessagesAPI(t)
	sc := api.play("Tell my human: hi", "mcp__assistant__notify", map[string]any{"message": "hi"}, "Sent it.")

	user := map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "<system-reminder>x</system-reminder>"},
		map[string]any{"type": "text", "text": "Tell my human: hi"},
	}}
	convo := []any{user}

	// Turn 1: the model loads the tool.
	events, block := post(t, api, convo)
	wantEvents := []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if strings.Join(events, " ") != strings.Join(wantEvents, " ") {
		t.Fatalf("events %v, want %v", events, wantEvents)
	}
	if block["name"] != "ToolSearch" || block["input"].(map[string]any)["query"] != "select:mcp__assistant__notify" {
		t.Fatalf("turn 1 block %v, want ToolSearch select:mcp__assistant__notify", block)
	}
	convo = append(convo,
		map[string]any{"role": "assistant", "content": []any{block}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": block["id"],
			"content": []any{map[string]any{"type": "tool_reference", "tool_name": "mcp__assistant__notify"}}}}})

	// Turn 2: it calls the tool.
	_, block = post(t, api, convo)
	if block["name"] != "mcp__assistant__notify" || block["input"].(map[string]any)["message"] != "hi" {
		t.Fatalf("turn 2 block %v, want the notify call", block)
	}
	convo = append(convo,
		map[string]any{"role": "assistant", "content": []any{block}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": block["id"],
			"content": "Notification sent via log:log (delivery_id dlv_1)"}}})

	// Turn 3: it says its last words, and the result is kept.
	if _, block = post(t, api, convo); block["text"] != "Sent it." {
		t.Fatalf("turn 3 block %v, want the text Sent it.", block)
	}
	if got, isErr, err := sc.waitResult(time.Second); err != nil || isErr || got != "Notification sent via log:log (delivery_id dlv_1)" {
		t.Errorf("result %q (error %v, %v)", got, isErr, err)
	}

	// No key: the API's error body.
	req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/messages", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Type  string                `json:"type"`
		Error struct{ Type string } `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusUnauthorized || body.Type != "error" || body.Error.Type != "authentication_error" {
		t.Errorf("no key: %d %+v (%v), want 401 authentication_error", resp.StatusCode, body, err)
	}
}

// post sends a streamed Messages request and returns the event names and the
// content block the deltas assemble.
func post(t *testing.T, api *messagesAPI, messages []any) ([]string, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "claude-test", "max_tokens": 1024, "stream": true, "messages": messages})
	req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/messages", strings.NewReader(string(b)))
	req.Header.Set("x-api-key", "k")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	var (
		events []string
		block  map[string]any
		input  strings.Builder
	)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			events = append(events, name)
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string         `json:"type"`
			ContentBlock map[string]any `json:"content_block"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("data %q: %v", data, err)
		}
		if ev.Type != events[len(events)-1] {
			t.Fatalf("event %q carries type %q", events[len(events)-1], ev.Type)
		}
		switch ev.Type {
		case "content_block_start":
			block = ev.ContentBlock
		case "content_block_delta":
			var raw struct {
				Delta struct {
					Text        string `json:"text"`
					PartialJSON string `json:"partial_json"`
				} `json:"delta"`
			}
			_ = json.Unmarshal([]byte(data), &raw)
			block["text"] = raw.Delta.Text
			input.WriteString(raw.Delta.PartialJSON)
		}
	}
	if input.Len() > 0 {
		var in map[string]any
		if err := json.Unmarshal([]byte(input.String()), &in); err != nil {
			t.Fatalf("tool input %q: %v", input.String(), err)
		}
		block["input"] = in
		delete(block, "text")
	}
	return events, block
}
