package testkit

import (
	"os"
	"strings"
)

// Tail is the last n lines of the file at path (a process's log, for a
// failure message), or why it could not be read.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
