package testkit_test

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
)

// fatalT records a Fatalf instead of ending the test.
type fatalT struct {
	testing.TB
	failed string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestEventually(t *testing.T) {
	var n atomic.Int32
	testkit.Eventually(t, 5*time.Second, func() bool { return n.Add(1) >= 3 }, "three checks")
	if n.Load() != 3 {
		t.Errorf("cond ran %d times, want 3", n.Load())
	}
	f := &fatalT{TB: t}
	start := time.Now()
	testkit.Eventually(f, 100*time.Millisecond, func() bool { return false }, "the impossible")
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("gave up after %s, want 100ms", took)
	}
	if f.failed != "the impossible: not within 100ms" {
		t.Errorf("failed with %q", f.failed)
	}
}

func TestPoll(t *testing.T) {
	if !testkit.Poll(0, time.Hour, func() bool { return true }) {
		t.Error("a condition that holds at once is not waited for")
	}
	var n atomic.Int32
	if testkit.Poll(50*time.Millisecond, 10*time.Millisecond, func() bool { n.Add(1); return false }) {
		t.Error("Poll reported a condition that never held")
	}
	if n.Load() < 3 {
		t.Errorf("cond ran %d times in 50ms every 10ms", n.Load())
	}
}

func TestBuffer(t *testing.T) {
	var b testkit.Buffer
	if b.Lines() != nil || b.String() != "" {
		t.Fatalf("a new buffer holds %q", b.String())
	}
	log := slog.New(slog.NewJSONHandler(&b, nil))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { log.Info("hello", "i", i, "even", i%2 == 0) })
	}
	wg.Wait()
	_, _ = b.Write([]byte("not json\n"))
	if lines := b.Lines(); len(lines) != 21 || lines[20] != "not json" {
		t.Fatalf("lines %q", lines)
	}
	if recs := b.Records(nil); len(recs) != 20 {
		t.Errorf("%d records, want the 20 JSON lines", len(recs))
	}
	if recs := b.Records(map[string]string{"msg": "hello", "even": "true"}); len(recs) != 10 {
		t.Errorf("%d records with even=true, want 10", len(recs))
	}
	if recs := b.Records(map[string]string{"i": "7"}); len(recs) != 1 || recs[0]["even"] != false {
		t.Errorf("records with i=7: %v", recs)
	}
	if !strings.HasSuffix(b.String(), "not json\n") {
		t.Errorf("String %q", b.String())
	}
}

func TestSignal(t *testing.T) {
	var (
		s  testkit.Signal
		mu sync.Mutex
		v  int
	)
	get := func() int { mu.Lock(); defer mu.Unlock(); return v }
	go func() {
		for range 5 {
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			v++
			mu.Unlock()
			s.Notify()
		}
	}()
	if !s.Wait(10*time.Second, func() bool { return get() == 5 }) {
		t.Fatalf("v = %d, want 5", get())
	}
	if s.Wait(20*time.Millisecond, func() bool { return get() == 6 }) {
		t.Fatal("Wait reported a condition that never held")
	}
}

type call struct {
	method string
	params map[string]string
	done   bool
}

func TestRecorder(t *testing.T) {
	r := testkit.Recorder[call]{Clone: func(c call) call { c.params = maps.Clone(c.params); return c }}
	i := r.Add(call{method: "a", params: map[string]string{"k": "v"}})
	go func() {
		time.Sleep(10 * time.Millisecond)
		r.Add(call{method: "b"})
		r.Add(call{method: "a"})
	}()
	isA := func(c call) bool { return c.method == "a" }
	if got := r.Wait(t, 10*time.Second, 2, isA, "a calls"); len(got) != 2 {
		t.Fatalf("waited for 2 a calls, got %+v", got)
	}
	if all := r.Select(nil); len(all) != 3 || all[1].method != "b" {
		t.Fatalf("calls %+v", all)
	}
	r.At(i).params["k"] = "changed"
	r.Update(i, func(c *call) { c.done = true })
	if c := r.At(i); c.params["k"] != "v" || !c.done {
		t.Errorf("call %d = %+v: the reader's copy changed it, or Update did not", i, c)
	}
	f := &fatalT{TB: t}
	if got := r.Wait(f, 20*time.Millisecond, 3, isA, "a calls"); len(got) != 2 || f.failed != "a calls: got 2 within 20ms, want 3" {
		t.Errorf("waiting for a third: %v, failed with %q", got, f.failed)
	}
}

func TestSkipWithoutEnv(t *testing.T) {
	t.Setenv("TESTKIT_SET", "x")
	t.Run("set", func(t *testing.T) {
		testkit.SkipWithoutEnv(t, "a test", "TESTKIT_SET")
	})
	t.Run("unset", func(t *testing.T) {
		t.Setenv("TESTKIT_UNSET", "")
		testkit.SkipWithoutEnv(t, "a test", "TESTKIT_SET", "TESTKIT_UNSET")
		t.Error("not skipped with TESTKIT_UNSET unset")
	})
}

func TestHooks(t *testing.T) {
	var h testkit.Hooks[string]
	if hook, hangUp := h.Accepted("a"); hook != nil || hangUp {
		t.Fatal("a zero Hooks has a hook or a hang-up")
	}
	var got []string
	h.OnAccept("a", func(c string) { got = append(got, c) })
	h.HangUpNext("a", 2)
	for i := range 3 {
		hook, hangUp := h.Accepted("a")
		if hook == nil || hangUp != (i < 2) {
			t.Fatalf("call %d: hook %v, hang up %v", i, hook != nil, hangUp)
		}
		hook("call")
	}
	if hook, hangUp := h.Accepted("b"); hook != nil || hangUp || len(got) != 3 {
		t.Fatalf("key b: hook %v, hang up %v; a's hook ran %d times", hook != nil, hangUp, len(got))
	}
	h.OnAccept("a", nil)
	if hook, _ := h.Accepted("a"); hook != nil {
		t.Fatal("a nil fn did not remove the hook")
	}
}

func TestFreeAddr(t *testing.T) {
	addr := testkit.FreeAddr(t)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s is not free: %v", addr, err)
	}
	_ = ln.Close()
}

func TestCalls(t *testing.T) {
	l := testkit.Calls[call]{
		Fake: "fake",
		Key:  func(c call) string { return c.method },
		Fold: true,
		OK:   func(c call) bool { return c.done },
	}
	var hooked []string
	l.OnAccept("sendMessage", func(c call) { hooked = append(hooked, c.params["k"]) })
	l.HangUpNext("SENDMESSAGE", 1)
	for i, key := range []string{"sendMessage", "sendmessage", "getMe"} {
		hook, hangUp := l.Accept(key)
		if (hook != nil) != (i < 2) || hangUp != (i == 0) {
			t.Fatalf("call %d (%s): hook %v, hang up %v", i, key, hook != nil, hangUp)
		}
		n := l.Add(call{method: key, params: map[string]string{"k": strconv.Itoa(i)}})
		l.Answer(n, hook, func(c *call) { c.done = i != 1 })
	}
	if !slices.Equal(hooked, []string{"0", "1"}) {
		t.Errorf("the hook ran on %q, want the two sendMessage calls", hooked)
	}
	if got := l.Of("SendMessage"); len(got) != 2 {
		t.Errorf("Of(SendMessage): %+v, want both sendMessage calls, the case aside", got)
	}
	if got := l.Of(""); len(got) != 3 {
		t.Errorf("Of(\"\"): %d calls, want 3", len(got))
	}
	if got := l.Accepted("sendMessage"); len(got) != 1 || got[0].params["k"] != "0" {
		t.Errorf("Accepted(sendMessage): %+v, want the first call only", got)
	}
	f := &fatalT{TB: t}
	if got := l.WaitCalls(f, "getMe", 2, 20*time.Millisecond); len(got) != 1 || f.failed != "fake: getMe calls: got 1 within 20ms, want 2" {
		t.Errorf("waiting for a second getMe: %v, failed with %q", got, f.failed)
	}
}

func TestRandomString(t *testing.T) {
	a, b := testkit.RandomString("ab", 64), testkit.RandomString("ab", 64)
	if len(a) != 64 || strings.Trim(a, "ab") != "" || a == b {
		t.Errorf("RandomString: %q and %q", a, b)
	}
}

func TestWriteJSON(t *testing.T) {
	for _, tt := range []struct {
		name       string
		body       any
		wantStatus int
		wantBody   string
	}{
		{"a body", map[string]int{"a": 1}, http.StatusTeapot, `{"a":1}`},
		{"one that does not marshal", func() {}, http.StatusInternalServerError, `{"error":true}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			testkit.WriteJSON(w, http.StatusTeapot, "application/json; charset=utf-8", tt.body, `{"error":true}`)
			if w.Code != tt.wantStatus || w.Body.String() != tt.wantBody || w.Header().Get("Content-Type") != "application/json; charset=utf-8" {
				t.Errorf("answered %d %q (%s)", w.Code, w.Body, w.Header().Get("Content-Type"))
			}
		})
	}
}
