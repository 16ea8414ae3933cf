package claude

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(t *testing.T, r io.Reader, max int) []Event {
	t.Helper()
	var evs []Event
	if err := readLines(r, max, func(ev Event) { evs = append(evs, ev) }); err != nil {
		t.Fatalf("readLines: %v", err)
	}
	return evs
}

func TestReadLinesGoesOnAfterABadLine(t *testing.T) {
	in := `{"type":"system","subtype":"init","session_id":"s1"}` + "\n" +
		"Warning: something the CLI printed\n" +
		"\n" + // blank lines are no event
		`{"type":"result","subtype":"success","result":"ok"}` + "\r\n" +
		`{"type":"keep_alive"}` // the last line may lack its newline
	var got []string
	for _, ev := range readAll(t, strings.NewReader(in), MaxLineBytes) {
		got = append(got, summary(ev))
	}
	want := []string{
		"init session=s1 model= mode= tools=0 mcp=[]",
		`bad "Warning: something the CLI printed" len=34 err=claude: unreadable output line: not JSON: invalid character 'W' looking for beginning of value`,
		`result success is_error=false interrupted=false result="ok" errors=[] cost=0 turns=0 terminal= denials=0 err=<nil>`,
		"other keep_alive/",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A tool's output makes lines far past bufio.Scanner's 64 KiB.
func TestReadLinesLongLine(t *testing.T) {
	text := strings.Repeat("long output ", 300_000) // 3.6 MB
	in := `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"` + text + `"}]}}` + "\n"
	// One byte per read: lines are put together across reads.
	evs := readAll(t, iotest.OneByteReader(strings.NewReader(in[:200_000]+in[200_000:])), MaxLineBytes)
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	u, ok := evs[0].(*User)
	if !ok || len(u.ToolResults) != 1 || u.ToolResults[0].Content != text {
		t.Fatalf("got %s, want the whole tool result", summary(evs[0]))
	}
}

func TestReadLinesTooLong(t *testing.T) {
	const max = 1000
	long := `{"type":"assistant","message":{"content":"` + strings.Repeat("ü", 3000) + `"}}`
	in := long + "\n" + `{"type":"result","subtype":"success"}` + "\n" + strings.Repeat("x", max+1)
	evs := readAll(t, strings.NewReader(in), max)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3: the long line, the result, the unterminated long line", len(evs))
	}
	for _, i := range []int{0, 2} {
		b, ok := evs[i].(*BadLine)
		if !ok || !errors.Is(b.Err, ErrLineTooLong) {
			t.Fatalf("event %d is %s, want a BadLine with ErrLineTooLong", i, summary(evs[i]))
		}
		if len(b.Excerpt) > ExcerptBytes+len("…") || !strings.HasPrefix(b.Excerpt, long[:40]) && i == 0 {
			t.Errorf("excerpt %q: want the line's start, at most %d bytes", b.Excerpt, ExcerptBytes)
		}
	}
	if b := evs[0].(*BadLine); b.Len != len(long)+1 {
		t.Errorf("Len = %d, want %d (the line and its newline)", b.Len, len(long)+1)
	}
	if _, ok := evs[1].(*Result); !ok {
		t.Errorf("after the long line: %s, want the result", summary(evs[1]))
	}
}

func TestReadLinesReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader(`{"type":"keep_alive"}`+"\n"), iotest.ErrReader(boom))
	var n int
	err := readLines(r, MaxLineBytes, func(Event) { n++ })
	if !errors.Is(err, boom) || n != 1 {
		t.Errorf("readLines = %v after %d events, want boom after 1", err, n)
	}
}
