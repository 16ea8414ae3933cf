// Command fakeclaude is a scripted stand-in of the Claude Code CLI in
// headless mode, for tests of what drives it (package claude, the runner).
// It speaks the stream-json protocol with the shapes the real CLI (2.1.332)
// writes, field for field; claude's tests hold it to the real transcripts
// in ../testdata.
//
// Build it under the CLI's name, from the repository root:
//
//	go build -o DIR/claude ./services/runner/claude/fakeclaude
//
// then put DIR on the session's PATH or give DIR/claude as the command.
//
// It takes the flags of `claude -p --input-format stream-json
// --output-format stream-json --verbose` and the session flags (--model,
// --permission-mode, --max-budget-usd, --mcp-config, --strict-mcp-config,
// --permission-prompt-tool, --allowedTools, --resume, …), and refuses an
// unknown flag, stream-json output without --verbose, a bad permission
// mode or budget with the real CLI's messages and status 1.
//
// Like the real CLI it writes nothing until the first user turn. Each turn
// writes system/init (session id: the --resume id, else a new UUID or the
// script's), an assistant message and a result whose total_cost_usd is the
// running total. A turn sent while one runs is queued. An interrupt is
// answered with a control_response; during a long turn it then writes the
// cut message (aborted), "[Request interrupted by user]" and a result
// error_during_execution with terminal_reason aborted_streaming. When the
// cost reaches --max-budget-usd, that turn and every later one ends with
// error_max_budget_usd. When stdin closes it finishes the turn and exits,
// with status 1 if the last turn failed; SIGTERM makes it exit 143; a line
// on stdin that is not JSON makes it exit 1.
//
// A turn's tool calls speak real MCP (streamable HTTP, protocol 2025-06-18,
// client claude-code) to the type http servers of --mcp-config, with their
// headers, connecting on first use. Each call writes the model's tool_use,
// then its tool_result. A call --allowedTools does not cover (by name:
// "Bash", "mcp__herald__reply", "mcp__herald", "mcp__herald__*") is first
// asked of the --permission-prompt-tool with {"tool_name", "input",
// "tool_use_id"}, which answers {"behavior":"allow","updatedInput":{…}} or
// {"behavior":"deny","message":"…"}; it waits for the answer as long as it
// takes. A denied call gets an error tool_result with the message and a
// permission_denials entry, and without a prompt tool it is denied "no
// permission prompt tool". An interrupt during a call ends the turn as the
// real CLI's does: "[Request interrupted by user for tool use]", then
// error_during_execution with terminal_reason aborted_tools.
//
// Environment:
//
//	FAKECLAUDE_SCRIPT  a JSON file scripting it (type script in script.go):
//	                   {"turns": [{"reply": "Hi", "cost_usd": 0.01},
//	                              {"sleep_ms": 60000, "partial": "Thinking"},
//	                              {"exit_code": 3, "stderr": "boom"}]}
//	                   Without one, every turn answers "Answer to: <prompt>".
//	                   A turn's tool calls, in this order:
//	                   "permission": {"tool_name": "Bash", "input": {"command": "touch x"}}
//	                     a built-in tool; when allowed its result is "ran touch x"
//	                   "call_tool": {"name": "reply", "arguments": {…}}, "calls": [{…}, …]
//	                     MCP tool mcp__<server>__<name>; "server" defaults
//	                     to the first of --mcp-config
//	                   "{{request_id}}" in arguments and input is the
//	                   request_id="…" of the turn's <channel> message. The
//	                   answer of a turn with tool calls is its "reply", else
//	                   "Denied: <message>" for a denied call, else "Done.".
//	FAKECLAUDE_LOG     a file it appends JSON lines to, one per happening:
//	                   {"kind":"start","argv":[…],"dir":"…","env":[…],"pid":N}
//	                   {"kind":"stdin","line":"…"}  {"kind":"eof"}
//	                   {"kind":"signal","signal":"terminated"}
//	                   {"kind":"child","pid":N}  {"kind":"exit","code":N}
//	                   {"kind":"permission","tool":"Bash","behavior":"allow"|"deny","message":"…"}
//	                   {"kind":"tool","server":"herald","name":"reply","is_error":false,"text":"…"}
//	                   argv is without the program name.
package main

import "os"

func main() {
	if os.Getenv(childEnv) == "1" {
		child()
		return
	}
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}
