package testkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use: a log the code under
// test writes from its goroutines while the test reads it. The zero Buffer
// is empty and ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p to the buffer; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Lines is everything written so far, a line each, without the line ends
// and without the empty line after the last end.
func (b *Buffer) Lines() []string {
	s := strings.TrimSuffix(b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Records is the lines written so far that are JSON objects (the records
// of a slog.JSONHandler) and hold every attribute of match, compared as
// fmt.Sprint prints the record's value; a nil match keeps every record.
// Other lines are passed over.
func (b *Buffer) Records(match map[string]string) []map[string]any {
	var out []map[string]any
	for _, line := range b.Lines() {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		ok := true
		for k, v := range match {
			if fmt.Sprint(rec[k]) != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, rec)
		}
	}
	return out
}
