package process

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// UsageFunc prints text, a command's help, with fs's flags put in before its
// examples, to fs's output. Every --help has one shape (Usage:, a paragraph,
// Flags:, Examples:; docs/architecture.md, "Commands and configuration",
// shows it). The flags come from fs so that help and flags cannot drift
// apart; the examples work as printed beside a `herald dev`, and e2e's
// TestCommands runs them all.
func UsageFunc(fs *flag.FlagSet, text string) func() {
	return func() { writeHelp(fs.Output(), text, fs) }
}

// writeHelp writes text with fs's flags (if it has any) before its
// "Example:" or "Examples:" block.
func writeHelp(w io.Writer, text string, fs *flag.FlagSet) {
	head, tail := text, ""
	for _, heading := range []string{"\nExample:\n", "\nExamples:\n"} {
		if i := strings.Index(text, heading); i >= 0 {
			head, tail = text[:i+1], text[i+1:]
			break
		}
	}
	var flags strings.Builder
	writeFlags(&flags, fs)
	if flags.Len() > 0 {
		head = strings.TrimRight(head, "\n") + "\n\nFlags:\n" + flags.String()
		if tail != "" {
			head += "\n"
		}
	}
	fmt.Fprint(w, head, tail)
}

// flagArgs names the value of each flag that takes one, the same in every
// command: --config FILE, --butler NAME, --timeout D, ...
var flagArgs = map[string]string{
	"butler":          "NAME",
	"channel":         "CHANNEL",
	"compose-file":    "FILE",
	"config":          "FILE",
	"delivery-id":     "ID",
	"emoji":           "EMOJI",
	"env-file":        "FILE",
	"every":           "D",
	"http-listen":     "ADDR",
	"integration":     "ID",
	"intent":          "INTENT",
	"kind":            "KINDS",
	"limit":           "N",
	"name":            "NAME",
	"recipient":       "ADDRESS",
	"request-context": "JSON",
	"request-id":      "ID",
	"since":           "WHEN",
	"subject":         "TEXT",
	"timeout":         "D",
	"ttl":             "D",
	"urgency":         "LEVEL",
	"url":             "URL",
	"wait":            "D",
}

// helpWidth is the width help text is wrapped to.
const helpWidth = 80

// writeFlags writes fs's flags, one per entry, names aligned and
// descriptions wrapped to helpWidth:
//
//	--timeout D   how long to wait for NATS (default 10s)
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	type entry struct{ name, text string }
	var entries []entry
	col := 0
	fs.VisitAll(func(f *flag.Flag) {
		name := "--" + f.Name
		if arg := flagArg(f); arg != "" {
			name += " " + arg
		}
		text := f.Usage
		if def := flagDefault(f); def != "" && !strings.Contains(text, "(default") {
			text += " (default " + def + ")"
		}
		entries = append(entries, entry{name, text})
		col = max(col, len(name))
	})
	// A long name does not push every description right: its own starts
	// on the next line.
	col = min(col, 22)
	indent := strings.Repeat(" ", 2+col+3)
	for _, e := range entries {
		lines := wrap(e.text, helpWidth-len(indent))
		if len(e.name) > col {
			fmt.Fprintf(w, "  %s\n%s%s\n", e.name, indent, lines[0])
		} else {
			fmt.Fprintf(w, "  %-*s   %s\n", col, e.name, lines[0])
		}
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "%s%s\n", indent, l)
		}
	}
}

// flagArg is what the help calls f's value: "" for a bool flag.
func flagArg(f *flag.Flag) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	if arg, ok := flagArgs[f.Name]; ok {
		return arg
	}
	return "VALUE"
}

// flagDefault is f's default as the help says it, "" for none: a zero value
// says nothing, and a duration is written as it is typed (2m, not 2m0s).
func flagDefault(f *flag.Flag) string {
	switch f.DefValue {
	case "", "0", "0s", "false":
		return ""
	}
	if d, err := time.ParseDuration(f.DefValue); err == nil {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
	return f.DefValue
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len([]rune(line))+1+len([]rune(word)) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	return append(lines, line)
}

// ServiceUsage is the help of each service's binary, run as one process of
// a fleet (deploy/compose.yaml).
var ServiceUsage = map[string]string{
	"switchboard": `Usage:
  switchboard [--config FILE] [--http-listen ADDR]

Herald's switchboard as a process of its own, one of a fleet's: it checks
each notification a butler routes (grants, rate limits, quiet hours) and
queues it for the messenger, and passes each inbound message to its butler.
NATS is nats.url or NATS_URL, with the streams herald setup makes; herald
reload changes its configuration while it runs. It logs JSON lines to stderr.

Example:
  NATS_URL=nats://127.0.0.1:4222 switchboard --http-listen 127.0.0.1:8791   # needs a NATS with Herald's streams (herald setup); Ctrl-C stops it
`,
	"messenger": `Usage:
  messenger [--config FILE] [--http-listen ADDR] [--ready-when-degraded]

Herald's messenger as a process of its own, one of a fleet's: it delivers
what the switchboard queues over each integration (Telegram, email, Slack,
Discord, webhooks, the web chat, the log), and runs the integrations'
receivers, which turn what people write into inbound messages. NATS is
nats.url or NATS_URL, with the streams herald setup makes; herald reload
changes its configuration while it runs. It logs JSON lines to stderr.

Example:
  NATS_URL=nats://127.0.0.1:4222 messenger --http-listen 127.0.0.1:8792   # needs a NATS with Herald's streams (herald setup); Ctrl-C stops it
`,
	"run": `Usage:
  herald run [--butler NAME] [--config FILE] [--http-listen ADDR]

A butler with a run block, on the machine that holds its project and the
claude binary: it joins the fleet over NATS as that butler (its user from
herald nats-auth) and starts Claude Code headless for each conversation whose
message no connected session takes (docs/runner.md). Its MCP endpoint is on
loopback, for its runs only. NATS is nats.url or NATS_URL. It logs JSON lines
to stderr; Ctrl-C ends its runs and stops it.

Example:
  NATS_URL=nats://127.0.0.1:4222 herald run --butler assistant   # needs a butler with a run block; Ctrl-C stops it
`,
	"butler": `Usage:
  butler --name NAME [--stdio] [--config FILE] [--http-listen ADDR]

One butler of the configuration as a process of its own: its MCP server,
over HTTP at its mcp_http (each request with a bearer token) or, with
--stdio, on stdin and stdout, as an MCP client starts it from .mcp.json.
NATS is nats.url or NATS_URL, with the streams herald setup makes. It logs
JSON lines to stderr.

Example:
  NATS_URL=nats://127.0.0.1:4222 butler --name assistant --stdio   # needs a NATS with Herald's streams (herald setup); ends with its input
`,
}
