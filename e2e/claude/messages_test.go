//go:build claude

package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// messagesAPI is a scripted stand-in for the Anthropic Messages API on
// loopback. Claude Code reaches it through ANTHROPIC_BASE_URL, so no prompt
// leaves the machine. It speaks the wire format Claude Code reads: POST
// /v1/messages answered as server-sent events when the request asks for a
// stream (message_start, ping, content_block_start, content_block_delta,
// content_block_stop, message_delta, message_stop) and as one JSON message
// otherwise, POST /v1/messages/count_tokens, and the API's error body for
// anything it does not serve.
//
// The model it plays follows scripts. A conversation whose user turn holds a
// script's prompt loads the script's tool with ToolSearch (Claude Code sends
// an MCP tool's schema only once the model asks for it), calls the tool with
// the script's input, and, once Claude Code sends the tool's result back, ends
// the turn with the script's last words. What Claude Code sent back as the
// result is kept for the test. Every other conversation gets a short answer.
type messagesAPI struct {
	URL string

	mu       sync.Mutex
	scripts  []*script
	requests []string // "POST /v1/messages (stream)" etc., in order
	// model, if set, answers a request before the scripts: its content
	// block and stop reason, or ok false to leave it to them. It may hold
	// its answer, until req.ctx ends at the latest.
	model func(req apiRequest) (content map[string]any, stop string, ok bool)
}

// script is one scripted turn of the model: find the tool, call it, say done.
type script struct {
	prompt string
	tool   string
	input  map[string]any
	final  string

	searchID, callID string
	result           string // the tool_result content Claude Code sent back
	resultIsError    bool
	answered         chan struct{} // closed when result is in
}

func newMessagesAPI(t *testing.T) *messagesAPI {
	t.Helper()
	api := &messagesAPI{}
	srv := httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(srv.Close)
	api.URL = srv.URL
	return api
}

// play registers a script: a prompt containing prompt makes the model call
// tool with input, then say final.
func (a *messagesAPI) play(prompt, tool string, input map[string]any, final string) *script {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.scripts) + 1
	s := &script{
		prompt: prompt, tool: tool, input: input, final: final,
		searchID: fmt.Sprintf("toolu_01Search%04d", n),
		callID:   fmt.Sprintf("toolu_01Call%04d", n),
		answered: make(chan struct{}),
	}
	a.scripts = append(a.scripts, s)
	return s
}

// waitResult is the tool result Claude Code sent back for s's call.
func (s *script) waitResult(within time.Duration) (string, bool, error) {
	select {
	case <-s.answered:
		return s.result, s.resultIsError, nil
	case <-time.After(within):
		return "", false, fmt.Errorf("Claude Code sent no result of %s (call %s) within %s", s.tool, s.callID, within)
	}
}

// log is every request the stand-in got, one line each.
func (a *messagesAPI) log() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.requests...)
}

// The parts of a Messages API request the stand-in reads.
type apiRequest struct {
	Model     string       `json:"model"`
	MaxTokens int          `json:"max_tokens"`
	Stream    bool         `json:"stream"`
	Messages  []apiMessage `json:"messages"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
	// ctx ends when Claude Code gives the request up (an interrupt aborts
	// it): a model that holds its answer waits on it.
	ctx context.Context
}

type apiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string, or a list of blocks
}

type apiBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // tool_result: a string, or a list of blocks
	IsError   bool            `json:"is_error"`
	ToolName  string          `json:"tool_name"` // tool_reference, ToolSearch's answer
}

func blocksOf(raw json.RawMessage) []apiBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []apiBlock{{Type: "text", Text: s}}
	}
	var bs []apiBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// textOf flattens a tool_result's content as the model would read it.
func textOf(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocksOf(raw) {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "tool_reference":
			parts = append(parts, "tool_reference "+b.ToolName)
		default:
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// apiError writes the API's error body.
func apiError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
}

func (a *messagesAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req apiRequest
	decodeErr := json.Unmarshal(body, &req)
	req.ctx = r.Context()
	line := r.Method + " " + r.URL.Path
	if req.Stream {
		line += " (stream)"
	}
	a.mu.Lock()
	a.requests = append(a.requests, line)
	// HERALD_STANDIN_DUMP=dir keeps each request's body there, to read
	// what Claude Code sent when a test fails.
	if os.Getenv("HERALD_STANDIN_DUMP") != "" {
		_ = os.WriteFile(fmt.Sprintf("%s/req-%03d.json", os.Getenv("HERALD_STANDIN_DUMP"), len(a.requests)), body, 0o600)
	}
	a.mu.Unlock()
	w.Header().Set("request-id", fmt.Sprintf("req_standin%06d", len(a.log())))

	if r.Method != http.MethodPost {
		apiError(w, http.StatusNotFound, "not_found_error", "the stand-in serves POST /v1/messages and /v1/messages/count_tokens only")
		return
	}
	if r.Header.Get("x-api-key") == "" && r.Header.Get("authorization") == "" {
		apiError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required")
		return
	}
	if decodeErr != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON: "+decodeErr.Error())
		return
	}
	switch r.URL.Path {
	case "/v1/messages/count_tokens":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"input_tokens": 1 + len(body)/4})
		return
	case "/v1/messages":
	default:
		apiError(w, http.StatusNotFound, "not_found_error", "the stand-in does not serve "+r.URL.Path)
		return
	}
	if req.Model == "" || req.MaxTokens <= 0 || len(req.Messages) == 0 {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "model, max_tokens and messages are required")
		return
	}
	a.mu.Lock()
	model := a.model
	a.mu.Unlock()
	content, stop, ok := map[string]any(nil), "", false
	if model != nil {
		content, stop, ok = model(req)
	}
	if !ok {
		content, stop = a.reply(req.Messages)
	}
	if req.Stream {
		stream(w, req.Model, content, stop)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(message(req.Model, content, stop, 12))
}

// reply is the model's next content block for a conversation, and why it
// stops.
func (a *messagesAPI) reply(msgs []apiMessage) (map[string]any, string) {
	results := map[string]apiBlock{}
	var prompts []string
	for _, m := range msgs {
		if m.Role != "user" {
			continue
		}
		for _, b := range blocksOf(m.Content) {
			switch b.Type {
			case "text":
				prompts = append(prompts, b.Text)
			case "tool_result":
				results[b.ToolUseID] = b
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.scripts {
		if !containsAny(prompts, s.prompt) {
			continue
		}
		if res, ok := results[s.callID]; ok {
			select {
			case <-s.answered:
			default:
				s.result, s.resultIsError = textOf(res.Content), res.IsError
				close(s.answered)
			}
			return map[string]any{"type": "text", "text": s.final}, "end_turn"
		}
		if _, ok := results[s.searchID]; ok {
			return map[string]any{"type": "tool_use", "id": s.callID, "name": s.tool, "input": s.input}, "tool_use"
		}
		return map[string]any{"type": "tool_use", "id": s.searchID, "name": "ToolSearch",
			"input": map[string]any{"query": "select:" + s.tool}}, "tool_use"
	}
	return map[string]any{"type": "text", "text": "Ready."}, "end_turn"
}

func containsAny(texts []string, sub string) bool {
	for _, t := range texts {
		if strings.Contains(t, sub) {
			return true
		}
	}
	return false
}

func usage(out int) map[string]any {
	return map[string]any{"input_tokens": 120, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

// messageSeq numbers the stand-in's messages: Claude Code takes the
// blocks of messages with one id for parts of one message, and merges them
// into one assistant turn (with their tool results in one user turn), so
// each answer has an id of its own, as the API gives it.
var messageSeq atomic.Int64

func message(model string, content map[string]any, stop string, out int) map[string]any {
	var blocks []any
	if content != nil {
		blocks = []any{content}
	} else {
		blocks = []any{}
	}
	var stopReason any
	if stop != "" {
		stopReason = stop
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_01StandIn%06d", messageSeq.Add(1)), "type": "message", "role": "assistant", "model": model,
		"content": blocks, "stop_reason": stopReason, "stop_sequence": nil, "usage": usage(out),
	}
}

// stream writes one assistant message as the API's server-sent events: the
// block opens empty and its text or tool input arrives as deltas.
func stream(w http.ResponseWriter, model string, content map[string]any, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	event := func(name string, data map[string]any) {
		var b bytes.Buffer
		data["type"] = name
		_ = json.NewEncoder(&b).Encode(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n", name, b.Bytes())
		if flusher != nil {
			flusher.Flush()
		}
	}
	event("message_start", map[string]any{"message": message(model, nil, "", 1)})
	event("ping", map[string]any{})
	var start, delta map[string]any
	switch content["type"] {
	case "tool_use":
		input, _ := json.Marshal(content["input"])
		start = map[string]any{"type": "tool_use", "id": content["id"], "name": content["name"], "input": map[string]any{}}
		delta = map[string]any{"type": "input_json_delta", "partial_json": string(input)}
	default:
		start = map[string]any{"type": "text", "text": ""}
		delta = map[string]any{"type": "text_delta", "text": content["text"]}
	}
	event("content_block_start", map[string]any{"index": 0, "content_block": start})
	event("content_block_delta", map[string]any{"index": 0, "delta": delta})
	event("content_block_stop", map[string]any{"index": 0})
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 12}})
	event("message_stop", map[string]any{})
}
