package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Event is one line of Claude Code's output: *Init, *Assistant, *User,
// *Result, *ControlResponse or *Other, or *BadLine for a line that is none.
type Event interface{ event() }

// Init starts each turn (system/init): what the session runs with.
type Init struct {
	SessionID      string          `json:"session_id"`
	Model          string          `json:"model"`
	CWD            string          `json:"cwd"`
	PermissionMode string          `json:"permissionMode"`
	Tools          []string        `json:"tools"`
	MCPServers     []MCPServer     `json:"mcp_servers"`
	Version        string          `json:"claude_code_version"`
	Raw            json.RawMessage `json:"-"`
}

// MCPServer is an MCP server of the session and its status: "connected",
// "failed", "pending", "needs-auth".
type MCPServer struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// Assistant is a message of the model.
type Assistant struct {
	SessionID string
	MessageID string
	Model     string
	// Text is the message's text blocks, joined by blank lines.
	Text     string
	ToolUses []ToolUse
	// ParentToolUseID is the tool call a subagent's message belongs to,
	// "" for the session's own.
	ParentToolUseID string
	// Aborted is a message an interrupt cut short: Text is what had
	// arrived by then.
	Aborted bool
	// APIErrorStatus is the HTTP status of an API error that Claude Code
	// reports as this message (its Text says what failed), 0 otherwise.
	APIErrorStatus int
	Raw            json.RawMessage
}

// ToolUse is a call of a tool by the model.
type ToolUse struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// User is a message on the user's side that Claude Code writes: tool
// results, and its notes such as "[Request interrupted by user]". The
// turns sent with Send are not echoed.
type User struct {
	SessionID       string
	Text            string
	ToolResults     []ToolResult
	ParentToolUseID string
	Raw             json.RawMessage
}

// ToolResult is what a tool call gave the model.
type ToolResult struct {
	ToolUseID string
	Content   string // its text blocks, joined by newlines
	IsError   bool
}

// Result ends a turn.
type Result struct {
	// Subtype is "success" or one of the error subtypes below; an API
	// error is "success" with IsError set.
	Subtype string `json:"subtype"`
	IsError bool   `json:"is_error"`
	// Result is the turn's last text; failed turns other than API errors
	// have none, and say why in Errors.
	Result    string   `json:"result"`
	Errors    []string `json:"errors"`
	SessionID string   `json:"session_id"`
	// TotalCostUSD is the process's running total, not this turn's.
	TotalCostUSD  float64 `json:"total_cost_usd"`
	NumTurns      int     `json:"num_turns"`
	DurationMS    int64   `json:"duration_ms"`
	DurationAPIMS int64   `json:"duration_api_ms"`
	StopReason    string  `json:"stop_reason"`
	// TerminalReason is why the turn ended: "completed", "aborted_streaming",
	// "aborted_tools", "budget_exhausted", "api_error", …
	TerminalReason    string             `json:"terminal_reason"`
	APIErrorStatus    int                `json:"api_error_status"`
	PermissionDenials []PermissionDenial `json:"permission_denials"`
	Raw               json.RawMessage    `json:"-"`
}

// The subtypes of Result.
const (
	ResultSuccess              = "success"
	ResultErrorDuringExecution = "error_during_execution"
	ResultErrorMaxTurns        = "error_max_turns"
	ResultErrorMaxBudgetUSD    = "error_max_budget_usd"
)

// PermissionDenial is a tool call that was not allowed during the turn.
type PermissionDenial struct {
	ToolName  string          `json:"tool_name"`
	ToolUseID string          `json:"tool_use_id"`
	ToolInput json.RawMessage `json:"tool_input"`
}

// Interrupted is a turn that an interrupt ended.
func (r *Result) Interrupted() bool { return strings.HasPrefix(r.TerminalReason, "aborted") }

// Err is nil for a turn that succeeded, and otherwise an ErrTurn that says
// why, in words a person can be shown.
func (r *Result) Err() error {
	switch {
	case !r.IsError:
		return nil
	case r.Interrupted():
		return fmt.Errorf("%w: interrupted", ErrTurn)
	case r.Result != "":
		return fmt.Errorf("%w: %s", ErrTurn, r.Result)
	case len(r.Errors) > 0:
		return fmt.Errorf("%w: %s: %s", ErrTurn, r.Subtype, strings.Join(r.Errors, "; "))
	}
	return fmt.Errorf("%w: %s", ErrTurn, r.Subtype)
}

// ControlResponse answers a control request (Session.Interrupt gets its
// own; Next returns those nobody waits for).
type ControlResponse struct {
	RequestID string `json:"request_id"`
	Subtype   string `json:"subtype"` // "success" or "error"
	// Response is the answer's payload on success.
	Response  json.RawMessage `json:"response"`
	Error     string          `json:"error"`
	ErrorCode string          `json:"error_code"`
	Raw       json.RawMessage `json:"-"`
}

// Err is nil for a success, and otherwise an ErrControl with Claude Code's
// reason.
func (c *ControlResponse) Err() error {
	if c.Subtype == "success" {
		return nil
	}
	if c.ErrorCode != "" {
		return fmt.Errorf("%w: %s (%s)", ErrControl, c.Error, c.ErrorCode)
	}
	return fmt.Errorf("%w: %s", ErrControl, c.Error)
}

// Other is any other event: a system event other than init
// ("permission_denied", "status", …), "stream_event", a control request.
type Other struct {
	Type    string
	Subtype string
	Raw     json.RawMessage
}

// BadLine is a line of output that is not an event; the reader goes on
// with the next.
type BadLine struct {
	Excerpt string // its start, at most ExcerptBytes and valid UTF-8
	Len     int    // its length in bytes
	Err     error  // ErrBadLine or ErrLineTooLong, wrapped
}

func (*Init) event()            {}
func (*Assistant) event()       {}
func (*User) event()            {}
func (*Result) event()          {}
func (*ControlResponse) event() {}
func (*Other) event()           {}
func (*BadLine) event()         {}

// ExcerptBytes bounds the excerpt of a BadLine.
const ExcerptBytes = 200

// Decode is the event of one line of output (without its newline). The
// event keeps a copy of the line in Raw.
func Decode(line []byte) Event {
	line = bytes.TrimSpace(line)
	var head struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return badLine(line, fmt.Errorf("%w: not JSON: %v", ErrBadLine, err))
	}
	if head.Type == "" {
		return badLine(line, fmt.Errorf("%w: no \"type\"", ErrBadLine))
	}
	raw := json.RawMessage(bytes.Clone(line))
	var ev Event
	var err error
	switch {
	case head.Type == "system" && head.Subtype == "init":
		e := &Init{Raw: raw}
		ev, err = e, json.Unmarshal(line, e)
	case head.Type == "assistant":
		ev, err = decodeAssistant(raw)
	case head.Type == "user":
		ev, err = decodeUser(raw)
	case head.Type == "result":
		e := &Result{Raw: raw}
		ev, err = e, json.Unmarshal(line, e)
	case head.Type == "control_response":
		e := &ControlResponse{Raw: raw}
		w := struct {
			Response *ControlResponse `json:"response"`
		}{e}
		ev, err = e, json.Unmarshal(line, &w)
	default:
		ev = &Other{Type: head.Type, Subtype: head.Subtype, Raw: raw}
	}
	if err != nil {
		return badLine(line, fmt.Errorf("%w: a %q event that does not decode: %v", ErrBadLine, head.Type, err))
	}
	return ev
}

// wireMessage is an assistant or user line.
type wireMessage struct {
	SessionID       string `json:"session_id"`
	ParentToolUseID string `json:"parent_tool_use_id"`
	Aborted         bool   `json:"aborted"`
	APIErrorStatus  int    `json:"api_error_status"`
	Message         struct {
		ID      string          `json:"id"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"` // a string, or blocks
	} `json:"message"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // tool_result: a string, or blocks
	IsError   bool            `json:"is_error"`
}

// blocks is a message's content as blocks; a string is one text block.
func blocks(content json.RawMessage) ([]wireBlock, error) {
	if len(content) == 0 || string(content) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []wireBlock{{Type: "text", Text: s}}, nil
	}
	var bs []wireBlock
	err := json.Unmarshal(content, &bs)
	return bs, err
}

// texts joins the text blocks of bs with sep.
func texts(bs []wireBlock, sep string) string {
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, sep)
}

func decodeAssistant(raw json.RawMessage) (*Assistant, error) {
	var w wireMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	bs, err := blocks(w.Message.Content)
	if err != nil {
		return nil, err
	}
	e := &Assistant{SessionID: w.SessionID, MessageID: w.Message.ID, Model: w.Message.Model, Text: texts(bs, "\n\n"),
		ParentToolUseID: w.ParentToolUseID, Aborted: w.Aborted, APIErrorStatus: w.APIErrorStatus, Raw: raw}
	for _, b := range bs {
		if b.Type == "tool_use" {
			e.ToolUses = append(e.ToolUses, ToolUse{ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
	return e, nil
}

func decodeUser(raw json.RawMessage) (*User, error) {
	var w wireMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	bs, err := blocks(w.Message.Content)
	if err != nil {
		return nil, err
	}
	e := &User{SessionID: w.SessionID, Text: texts(bs, "\n\n"), ParentToolUseID: w.ParentToolUseID, Raw: raw}
	for _, b := range bs {
		if b.Type != "tool_result" {
			continue
		}
		content, err := blocks(b.Content)
		if err != nil {
			return nil, err
		}
		e.ToolResults = append(e.ToolResults, ToolResult{ToolUseID: b.ToolUseID, Content: texts(content, "\n"), IsError: b.IsError})
	}
	return e, nil
}

func badLine(line []byte, err error) *BadLine {
	return &BadLine{Excerpt: excerpt(line), Len: len(line), Err: err}
}

// excerpt is the start of line, short enough to log and show a person,
// and valid UTF-8.
func excerpt(line []byte) string {
	head := line[:min(len(line), ExcerptBytes+utf8.UTFMax)]
	s := strings.ToValidUTF8(string(head), "\uFFFD")
	if len(s) <= ExcerptBytes && len(head) == len(line) {
		return s
	}
	cut := min(len(s), ExcerptBytes)
	for cut < len(s) && cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
