package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// script is FAKECLAUDE_SCRIPT's content. Every field is optional.
type script struct {
	// SessionID is a new session's id (default: a random UUID).
	SessionID string `json:"session_id"`
	// Model is the model without --model (default "claude-opus-5-5").
	Model string   `json:"model"`
	Tools []string `json:"tools"` // init's tools (default: a few built-in ones)
	// MCPStatus is the status of an --mcp-config server by name
	// (default "connected").
	MCPStatus map[string]string `json:"mcp_status"`
	// UnknownResume makes --resume fail as for an id with no conversation:
	// one failed result, a line on stderr, status 1, stdin unread.
	UnknownResume bool `json:"unknown_resume"`
	// IgnoreEOF keeps it running after stdin closes.
	IgnoreEOF bool `json:"ignore_eof"`
	// IgnoreSIGTERM keeps it running after SIGTERM.
	IgnoreSIGTERM bool `json:"ignore_sigterm"`
	// SpawnChild starts a child in its process group that ignores SIGTERM
	// and holds stdout open, as a stuck MCP server or tool would.
	SpawnChild bool `json:"spawn_child"`
	// Turns script the turns in order; later turns get the default.
	Turns []turn `json:"turns"`
}

// turn scripts one turn.
type turn struct {
	// Reply is the assistant's text (default "Answer to: <prompt>").
	Reply string `json:"reply"`
	// CostUSD is what the turn costs (default 0.00072, what 2.1.332
	// reckons for a short answer on Opus).
	CostUSD *float64 `json:"cost_usd"`
	// SleepMS makes a long turn: the answer comes after this long, unless
	// an interrupt ends the turn first.
	SleepMS int `json:"sleep_ms"`
	// Partial is the text an interrupted message had streamed; "" writes
	// no cut message, as when the model had not started.
	Partial string `json:"partial"`
	// BadLine is written first, as a line that is not JSON.
	BadLine string `json:"bad_line"`
	// LongLineBytes pads the assistant's line to about this many bytes.
	LongLineBytes int `json:"long_line_bytes"`
	// APIError makes the API refuse the turn (status 400) with this message.
	APIError string `json:"api_error"`
	// ExitCode, if not 0, ends the process mid-turn with this status,
	// after writing Stderr.
	ExitCode int    `json:"exit_code"`
	Stderr   string `json:"stderr"`
	// Permission is a call of a built-in tool that needs permission, made
	// first; CallTool and then Calls are calls of MCP tools. Each is
	// asked of the --permission-prompt-tool unless --allowedTools covers
	// it. "{{request_id}}" in their arguments is the request_id attribute
	// of the turn's <channel> message.
	Permission *permissionStep `json:"permission"`
	CallTool   *toolCall       `json:"call_tool"`
	Calls      []toolCall      `json:"calls"`
}

// permissionStep is the model calling a built-in tool, e.g. Bash: when
// allowed, the fake "runs" it by saying so.
type permissionStep struct {
	ToolName string         `json:"tool_name"`
	Input    map[string]any `json:"input"`
}

// toolCall is the model calling tool mcp__<server>__<name>.
type toolCall struct {
	Server    string         `json:"server"` // default: the first of --mcp-config
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

func loadScript(path string) (*script, error) {
	sc := &script{}
	if path == "" {
		return sc, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fakeclaude: FAKECLAUDE_SCRIPT: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt field would script nothing
	if err := dec.Decode(sc); err != nil {
		return nil, fmt.Errorf("fakeclaude: FAKECLAUDE_SCRIPT %s: %w", path, err)
	}
	for i, t := range sc.Turns {
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("fakeclaude: FAKECLAUDE_SCRIPT %s: turn %d: %w", path, i, err)
		}
	}
	return sc, nil
}

// check refuses tool steps that name no tool.
func (t turn) check() error {
	if t.Permission != nil && t.Permission.ToolName == "" {
		return errors.New("permission has no tool_name")
	}
	if t.CallTool != nil && t.CallTool.Name == "" {
		return errors.New("call_tool has no name")
	}
	for i, c := range t.Calls {
		if c.Name == "" {
			return fmt.Errorf("calls[%d] has no name", i)
		}
	}
	return nil
}

// turn is the script of the n-th turn (from 0).
func (sc *script) turn(n int) turn {
	if n < len(sc.Turns) {
		return sc.Turns[n]
	}
	return turn{}
}

// mcpServer is a server of --mcp-config. Only type "http" servers are
// called; the others are listed in init and nothing more.
type mcpServer struct {
	Name    string            `json:"-"`
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// mcpServers are the servers of --mcp-config values (files or JSON text),
// in the order they are written.
func mcpServers(configs []string) ([]mcpServer, error) {
	var servers []mcpServer
	for _, c := range configs {
		b := []byte(c)
		if !strings.HasPrefix(strings.TrimSpace(c), "{") {
			var err error
			if b, err = os.ReadFile(c); err != nil {
				return nil, usageError(fmt.Sprintf("Error: Invalid MCP configuration: %v", err))
			}
		}
		var cfg struct {
			MCPServers orderedServers `json:"mcpServers"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, usageError(fmt.Sprintf("Error: Invalid MCP configuration: %s: %v", c, err))
		}
		servers = append(servers, cfg.MCPServers...)
	}
	return servers, nil
}

// orderedServers are the mcpServers object's entries in order.
type orderedServers []mcpServer

func (s *orderedServers) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("mcpServers is not an object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		srv := mcpServer{Name: t.(string)}
		if err := dec.Decode(&srv); err != nil {
			return fmt.Errorf("server %s: %w", srv.Name, err)
		}
		*s = append(*s, srv)
	}
	return nil
}
