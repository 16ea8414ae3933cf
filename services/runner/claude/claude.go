// Package claude runs Claude Code headless for one conversation: it starts
// `claude -p --input-format stream-json --output-format stream-json --verbose`
// in a process group of its own, writes user turns and interrupts to its
// stdin, and reads its stdout as typed events. Unix only (process groups).
//
// The map:
//
//   - options.go: Options (what to start), Options.Validate, Options.Argv
//     (the command line) and the environment a session inherits.
//   - session.go: Start, and a Session's Send, Interrupt, Next and Close.
//   - event.go: Decode and the events Next returns: Init, Assistant, User,
//     Result, ControlResponse, Other, and BadLine for a line that is none.
//   - reader.go: stdout split into lines, each bounded by MaxLineBytes.
//   - errors.go: the sentinel errors and ExitError.
//   - fakeclaude/: a scripted stand-in of the CLI for tests.
//   - testdata/: transcripts of the real CLI (2.1.332), which the decoder's
//     tests read and fakeclaude's output is held to.
//
// What the CLI does, as 2.1.332 behaves (see testdata/README.md):
//
//   - It writes nothing before the first user turn. Each turn starts with a
//     system/init event (the session id, model, tools, MCP servers and their
//     status), then assistant and user messages, and ends with one result.
//     Turns sent while one runs are queued, each with its own result.
//   - A result's total_cost_usd is the process's running total, not the
//     turn's. A failed turn is is_error true: subtype error_max_budget_usd
//     (errors "Reached maximum budget ($X)"), error_during_execution (an
//     interrupt, an unknown --resume id), or success with is_error true and
//     the text "API Error: …" when the API refused.
//   - An interrupt is answered by a control_response, then the turn ends
//     with a result error_during_execution whose terminal_reason is
//     aborted_streaming or aborted_tools; when idle, only the response.
//   - When stdin closes it finishes the running turn and exits: status 0,
//     or 1 when the last turn failed. SIGTERM ends it with status 143.
//   - --resume of an unknown id writes one failed result and exits 1
//     without reading stdin; a line on stdin that is not JSON makes it exit 1.
package claude
