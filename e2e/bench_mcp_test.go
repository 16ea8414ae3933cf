package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// benchMCPRows measure the path users run: `herald dev` (bin/herald, its own
// process) driven through a butler's MCP streamable HTTP endpoint, tools/call
// notify with herald dev's bearer token, delivering to the log channel and to
// a Telegram Bot API fake over HTTP (run here, in the benchmark's process).
//
//	(c) (d) open loop: notify offered at a fixed 1,000/s, timed from when each
//	        call was due, not when it went out, to the log and to Telegram.
//	(e)     the process's peak resident set so far: at 1,000/s (and how much of
//	        the resident set now is the binary's code, mapped from its file).
//	(f) (g) closed loop: 64 sessions, each calling notify again as soon as it
//	        is answered, to the log and to Telegram: the ceiling (RSS: the
//	        peak so far).
//
// Every row counts deliveries, at the fake and in the process's log, against
// the calls answered "sent": nothing may be lost or duplicated.
func benchMCPRows(b *testing.B, t *table) {
	m := newMCPRig(b, t, "mcp", benchRate)
	open := func(do func(worker, seq int) error) *result {
		return openLoop(float64(benchRate), benchFor, func(seq int) error { return do(seq, seq) })
	}
	closed := func(do func(worker, seq int) error) *result { return closedLoop(benchWindow, benchFor, do) }
	// Open loop first, on a process that has seen only the warm-up: its
	// peak resident set is then what 1,000 notify/s costs.
	rate := thousands(float64(benchRate))
	m.measure("c", fmt.Sprintf("(c) MCP notify → log, open loop at %s/s", rate), "ol", "log", benchFor, open)
	m.measure("d", fmt.Sprintf("(d) MCP notify → Telegram fake, open loop at %s/s", rate), "ot", "telegram", benchFor, open)
	rss, peak, files := procMemory(b, m.dev.cmd.Process.Pid)
	m.dev.heapProfile(t, "after-open-loop") // what is live once 1,000/s has run
	t.add(row{key: "e", name: fmt.Sprintf("(e) herald dev peak RSS, up to %s notify/s", rate), rss: peak,
		figure: fmt.Sprintf("%s now, %s of it code", mb(rss), mb(files)), goal: "the goal is at 500/s held: row (p)"})
	m.measure("f", fmt.Sprintf("(f) MCP notify → log, %d sessions, closed loop", benchWindow), "cl", "log", benchFor, closed)
	m.measure("g", fmt.Sprintf("(g) MCP notify → Telegram fake, %d sessions, closed loop", benchWindow), "ct", "telegram", benchFor, closed)
	m.measureWithFiles(closed)
}

// benchFileSize is the file row (r) sends, one after another, while text
// flows.
const benchFileSize = 20 << 20

// measureWithFiles is row (r): row (g) again while one more session sends
// 20 MB files to the Telegram fake, one notify after another; its text
// rate is judged against (g)'s, measured in the same run.
func (m *mcpRig) measureWithFiles(closed func(do func(worker, seq int) error) *result) {
	s, err := newMCPClient(m.dev.state.Butlers["bench"], m.dev.token("bench")).open(context.Background())
	if err != nil {
		m.b.Fatalf("MCP session: %v", err)
	}
	before := len(m.tg.Accepted("sendDocument"))
	stop, done := make(chan struct{}), make(chan struct{})
	sent, failed := 0, 0
	var firstErr error
	start := time.Now()
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.notifyFiles(context.Background(), "telegram", marker("rf", i), m.file); err != nil {
				failed++
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			sent++
		}
	}()
	res := m.measure("r", "(r) (g) while 20 MB files go to the Telegram fake, one after another", "cf", "telegram", benchFor, closed)
	close(stop)
	<-done
	elapsed := time.Since(start)
	want := sha256.Sum256(m.fileData)
	intact := 0
	for _, c := range m.tg.Accepted("sendDocument")[before:] {
		if u, ok := c.Files["document"]; ok && sha256.Sum256(u.Data) == want {
			intact++
		}
	}
	if failed > 0 || intact != sent {
		m.b.Errorf("files: %d sent, %d arrived intact, %d failed (%v)", sent, intact, failed, firstErr)
	}
	m.t.mu.Lock()
	defer m.t.mu.Unlock()
	if r := m.t.byKey("r"); r != nil && res != nil {
		r.breakdown = fmt.Sprintf("%d files of 20 MB sent meanwhile (%.0f MB/s), every one intact at the fake; %s", sent, float64(sent*benchFileSize)/(1<<20)/elapsed.Seconds(), r.breakdown)
	}
}

// benchHoldRow is (p): a fresh herald dev held at 500 notify/s (BENCH_HOLD_RATE)
// for 60 s (BENCH_HOLD_FOR) to the log, and its peak resident set: what a
// steady load costs in memory, rather than a burst.
func benchHoldRow(b *testing.B, t *table) {
	m := newMCPRig(b, t, "hold", benchHoldRate)
	m.measure("p", fmt.Sprintf("(p) MCP notify → log, open loop at %s/s held for %s: peak RSS", thousands(float64(benchHoldRate)), benchHoldFor), "hold", "log", benchHoldFor,
		func(do func(worker, seq int) error) *result {
			return openLoop(float64(benchHoldRate), benchHoldFor, func(seq int) error { return do(seq, seq) })
		})
}

// mcpRig is herald dev with a butler "bench" sending to the log and to a
// Telegram Bot API fake over HTTP (run here, in the benchmark's process),
// and benchWindow MCP sessions open on the butler, warmed up.
type mcpRig struct {
	b        *testing.B
	t        *table
	dev      *devProc
	tg       *telegramtest.Server
	sessions []*mcpSession
	file     string // a 20 MB file under the butler's files.roots (row r)
	fileData []byte
}

// newMCPRig starts herald dev (on the cluster when BENCH_CLUSTER asks for
// one), opens the sessions and warms up both channels at warm notify/s.
func newMCPRig(b *testing.B, t *table, name string, warm int) *mcpRig {
	nats, url := `{ listen: "127.0.0.1:0" }`, ""
	if benchCluster > 1 {
		c := startCluster(b, benchCluster)
		url = c.URL()
		nats = fmt.Sprintf(`{ url: %q, replicas: %d }`, url, c.Replicas())
	}
	m := &mcpRig{b: b, t: t, tg: telegramtest.NewServer(b), fileData: make([]byte, benchFileSize)}
	_, _ = rand.Read(m.fileData)
	dir := b.TempDir()
	m.file = filepath.Join(dir, "results.bin")
	if err := os.WriteFile(m.file, m.fileData, 0o600); err != nil {
		b.Fatal(err)
	}
	m.dev = startDevOn(b, t, name, fmt.Sprintf(`
nats: %s
http_listen: "127.0.0.1:0"
butlers:
  - { name: bench, default_channel: log, mcp_http: "127.0.0.1:0", files: { roots: [%q] } }
integrations:
  - id: tg
    type: telegram
    token_env: BENCH_TG_TOKEN
    api_url: %q
    default_chat: "12345"
    grants: all
    rate_limit_out: { disabled: true }
`, nats, dir, m.tg.URL()), url, 0, "BENCH_TG_TOKEN="+m.tg.Token())
	c := newMCPClient(m.dev.state.Butlers["bench"], m.dev.token("bench"))
	m.sessions = make([]*mcpSession, benchWindow)
	for i := range m.sessions {
		s, err := c.open(context.Background())
		if err != nil {
			b.Fatalf("MCP session: %v\n%s", err, m.dev.lastLines())
		}
		m.sessions[i] = s
	}
	// Warm up both channels (consumers bound, the Telegram sender's first
	// call made, connections open) before anything is timed.
	for _, ch := range []string{"log", "telegram"} {
		for i := 0; ; i++ {
			err := m.sessions[0].notify(context.Background(), ch, "warm up")
			if err == nil {
				break
			}
			if i == 50 {
				b.Fatalf("notify via %s during warm-up: %v\n%s", ch, err, m.dev.lastLines())
			}
			time.Sleep(100 * time.Millisecond)
		}
		openLoop(float64(warm), time.Second, func(seq int) error {
			return m.sessions[seq%len(m.sessions)].notify(context.Background(), ch, "warm up")
		})
	}
	return m
}

// delivered counts a run's deliveries: in the process's log, or at the fake.
func (m *mcpRig) delivered(ch, run string, ok int) (int, int) {
	if ch == "log" {
		return m.dev.logs.wait(run, ok, 10*time.Second)
	}
	var n, dup int
	testkit.Poll(10*time.Second, 100*time.Millisecond, func() bool {
		got := newArrivals()
		for _, call := range m.tg.Accepted("sendMessage") {
			got.note(call.Params["text"], call.Arrived)
		}
		n, dup = got.of(run)
		return n >= ok
	})
	return n, dup
}

// measure runs loop with a notify of 1 KB to ch per call, counts what was
// delivered and the stored writes, and adds the row.
func (m *mcpRig) measure(key, name, run, ch string, d time.Duration, loop func(do func(worker, seq int) error) *result) *result {
	wait := m.dev.profile(m.t, run, d)
	var res *result
	cpu0, busy := procCPU(m.dev.cmd.Process.Pid), coresBusy()
	w := countWrites(m.b, m.dev.js, func() {
		res = loop(func(worker, seq int) error {
			return m.sessions[worker%len(m.sessions)].notify(context.Background(), ch, marker(run, seq)+" "+benchPayload)
		})
	})
	cpu, cores := procCPU(m.dev.cmd.Process.Pid)-cpu0, busy()
	wait()
	res.writes = w
	n, dup := m.delivered(ch, run, res.ok)
	checkLostDup(m.b, name, res, n, dup)
	_, peak := m.dev.memory()
	m.t.add(row{key: key, name: name, rate: res.rate(), unit: "notify/s", p50: res.p(50), p99: res.p(99), p999: res.p(99.9),
		writes: float64(w.total()) / float64(max(res.ok, 1)), lost: lostDup(res, n, dup), rss: peak,
		breakdown: fmt.Sprintf("%s; herald dev's CPU: %.0f µs per notify; %s", w.perOp(max(res.ok, 1)), cpu.Seconds()*1e6/float64(max(res.ok, 1)), cores)})
	return res
}

// coresBusy starts measuring how busy the whole machine is; the function it
// returns says, for the time since, how many of its cores were busy on
// average (every process: herald, the client, the fakes, NATS).
func coresBusy() func() string {
	busy0, t0 := machineBusy(), time.Now()
	return func() string {
		return fmt.Sprintf("the machine: %.2f of its %d cores busy", (machineBusy()-busy0).Seconds()/time.Since(t0).Seconds(), runtime.NumCPU())
	}
}

// procCPU is the CPU time process pid has used so far (user and system,
// from /proc/<pid>/stat, in clock ticks of 10 ms); 0 where there is none. At
// a fixed offered rate, a process's CPU per request moves far less from run
// to run than the ceiling does: what a change saves shows there first.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, after, ok := strings.Cut(string(b), ") ") // the name may hold spaces
	f := strings.Fields(after)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// mcpClient is a lean MCP client over streamable HTTP (protocol 2025-06-18,
// what today's clients speak): just enough JSON-RPC to open sessions, call
// notify and listen on a session's GET stream, so that the benchmark's own
// work takes as little as possible of the CPUs it shares with herald dev.
type mcpClient struct {
	url, token string
	hc         *http.Client
}

const mcpProtocol = "2025-06-18"

func newMCPClient(url, token string) *mcpClient {
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}
	return &mcpClient{url: url, token: token, hc: &http.Client{Transport: tr}}
}

// mcpSession is one initialized MCP session.
type mcpSession struct {
	c  *mcpClient
	id string
	n  atomic.Int64
}

func (c *mcpClient) open(ctx context.Context) (*mcpSession, error) {
	s := &mcpSession{c: c}
	if _, err := s.call(ctx, "initialize", map[string]any{
		"protocolVersion": mcpProtocol, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "herald-bench", "version": "1"},
	}); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if s.id == "" {
		return nil, errors.New("initialize: no Mcp-Session-Id")
	}
	if _, err := s.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), false); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return s, nil
}

func (s *mcpSession) request(ctx context.Context, method string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.c.token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("MCP-Protocol-Version", mcpProtocol)
	}
	return req, nil
}

// rpcAnswer is a JSON-RPC response.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends a request and returns its result.
func (s *mcpSession) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := s.n.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	a, err := s.post(ctx, body, true)
	if err != nil {
		return nil, err
	}
	if a.Error != nil {
		return nil, fmt.Errorf("%s: JSON-RPC error %d: %s", method, a.Error.Code, a.Error.Message)
	}
	if string(a.ID) != strconv.FormatInt(id, 10) {
		return nil, fmt.Errorf("%s: answer to request %s, want %d", method, a.ID, id)
	}
	return a.Result, nil
}

// post sends body and reads the answer, a JSON body or an event stream
// (the server may upgrade a request to one), when want.
func (s *mcpSession) post(ctx context.Context, body []byte, want bool) (*rpcAnswer, error) {
	req, err := s.request(ctx, http.MethodPost, body)
	if err != nil {
		return nil, err
	}
	resp, err := s.c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" && s.id == "" {
		s.id = id
	}
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("HTTP %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if !want {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, nil
	}
	var a rpcAnswer
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		err := events(resp.Body, func(data []byte) bool {
			a = rpcAnswer{}
			return json.Unmarshal(data, &a) == nil && a.ID != nil // a response, not a notification
		})
		if err != nil {
			return nil, err
		}
		return &a, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return nil, err
	}
	return &a, nil
}

// events reads server-sent events from r, passing each one's data to fn
// until fn returns true or r ends.
func events(r io.Reader, fn func(data []byte) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 && fn(data) {
				return nil
			}
			data = data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// notify calls the notify tool: an error unless the answer is "Notification
// sent via ...".
func (s *mcpSession) notify(ctx context.Context, channel, message string) error {
	return s.notifyFiles(ctx, channel, message)
}

// notifyFiles is notify with files (paths the butler reads).
func (s *mcpSession) notifyFiles(ctx context.Context, channel, message string, files ...string) error {
	args := map[string]any{"channel": channel, "message": message}
	if len(files) > 0 {
		args["files"] = files
	}
	res, err := s.call(ctx, "tools/call", map[string]any{"name": "notify", "arguments": args})
	if err != nil {
		return err
	}
	var r struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	text := ""
	if len(r.Content) > 0 {
		text = r.Content[0].Text
	}
	if r.IsError || !strings.HasPrefix(text, "Notification sent via") {
		return fmt.Errorf("notify answered %q", text)
	}
	return nil
}

// listen opens the session's GET stream and passes every channel
// notification (notifications/claude/channel) to fn until ctx ends; it
// returns once the stream is open.
func (s *mcpSession) listen(ctx context.Context, fn func(content string, at time.Time)) error {
	req, err := s.request(ctx, http.MethodGet, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.c.hc.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return fmt.Errorf("GET stream: %s", resp.Status)
	}
	go func() {
		defer resp.Body.Close()
		_ = events(resp.Body, func(data []byte) bool {
			at := time.Now()
			var n struct {
				Method string `json:"method"`
				Params struct {
					Content string `json:"content"`
				} `json:"params"`
			}
			if json.Unmarshal(data, &n) == nil && n.Method == butler.MethodChannel {
				fn(n.Params.Content, at)
			}
			return false
		})
	}()
	return nil
}
