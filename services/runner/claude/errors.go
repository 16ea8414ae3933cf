package claude

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

var (
	// ErrOptions is Options that cannot start a session; the message names
	// the field and what it needs.
	ErrOptions = errors.New("claude: invalid options")
	// ErrNotFound is a command that is not installed where Start looked.
	ErrNotFound = errors.New("claude: command not found")
	// ErrClosed is a session that was closed, or whose process has ended.
	ErrClosed = errors.New("claude: session closed")
	// ErrBadLine is a line of output that is not a JSON object with a
	// "type" (carried by a BadLine event).
	ErrBadLine = errors.New("claude: unreadable output line")
	// ErrLineTooLong is a line of output longer than MaxLineBytes (carried
	// by a BadLine event); the line is skipped.
	ErrLineTooLong = errors.New("claude: output line too long")
	// ErrControl is a control request Claude Code answered with an error.
	ErrControl = errors.New("claude: control request refused")
	// ErrTurn is a turn that ended in error (Result.Err).
	ErrTurn = errors.New("claude: turn failed")
)

// ExitError is a Claude Code process that did not exit with status 0.
type ExitError struct {
	Command string // as given in Options.Command
	Code    int    // exit status; -1 when a signal killed it
	// Signal is the signal that killed it, 0 if it exited.
	Signal syscall.Signal
	// Stopped is true when Close signalled the process (it outlived the
	// grace period), so its end was asked for.
	Stopped bool
	// Stderr is the end of what it wrote to stderr (up to StderrTailBytes).
	Stderr string
	Err    error // from os/exec
}

func (e *ExitError) Error() string {
	var b strings.Builder
	if e.Signal != 0 {
		fmt.Fprintf(&b, "%s was killed by signal %d (%v)", e.Command, int(e.Signal), e.Signal)
	} else {
		fmt.Fprintf(&b, "%s exited with status %d", e.Command, e.Code)
	}
	if e.Stopped {
		b.WriteString(" (stopped by Close)")
	}
	if l := lastLine(e.Stderr); l != "" {
		b.WriteString(": ")
		b.WriteString(l)
	}
	return b.String()
}

func (e *ExitError) Unwrap() error { return e.Err }

// lastLine is the last non-blank line of s, which is where a CLI says why
// it stopped.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
