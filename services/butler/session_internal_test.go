package butler

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/token"
)

// floodSessions is how many initialize calls TestSessionFloodHoldsTheCap
// sends: the flood of the report (5,000 grew a butler from 39 to 100 MB).
const floodSessions = 5000

// TestSessionFloodHoldsTheCap: 5,000 initialize calls that never close
// their sessions leave the butler with max_sessions of them (the default,
// 100), never more at any moment, and its memory where 100 sessions put it;
// with the cap out of reach (max_sessions 1e9) all 5,000 stay, which is what
// the cap saves. The heap and RSS figures are logged (docs/security.md).
func TestSessionFloodHoldsTheCap(t *testing.T) {
	grew := map[string]uint64{}
	for _, tt := range []struct {
		name string
		max  int // 0: the default
		want int
	}{
		{"default max_sessions", 0, config.DefaultMaxSessions},
		{"max_sessions out of reach", 1e9, floodSessions},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, url, static := floodButler(t, tt.max)
			registered := func() int {
				b.channel.mu.Lock()
				defer b.channel.mu.Unlock()
				return len(b.channel.sessions)
			}
			before := memNow()

			// The most sessions the MCP server held at once, sampled.
			var peak atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					if n := int64(registered()); n > peak.Load() {
						peak.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			start := time.Now()
			flood(t, url, static, floodSessions)
			close(stop)
			<-sampled
			took := time.Since(start)

			after := memNow()
			if n := registered(); n != tt.want {
				t.Errorf("the MCP server holds %d sessions after %d initialize calls, want %d", n, floodSessions, tt.want)
			}
			if p := int(peak.Load()); p > tt.want {
				t.Errorf("the MCP server held %d sessions at once, over max_sessions %d", p, tt.want)
			}
			grew[tt.name] = after.heap - min(after.heap, before.heap)
			t.Logf("%d initialize calls in %s: %d sessions held (peak %d); heap in use %.1f → %.1f MB, RSS %.1f → %.1f MB",
				floodSessions, took.Round(time.Millisecond), registered(), peak.Load(), mb(before.heap), mb(after.heap), mb(before.rss), mb(after.rss))
		})
	}
	// What 4,900 more sessions cost is far more than what 100 do; a
	// generous margin, so that the heap's noise cannot decide it.
	capped, uncapped := grew["default max_sessions"], grew["max_sessions out of reach"]
	if uncapped > 0 && capped*4 > uncapped {
		t.Errorf("the heap grew %.1f MB with the cap and %.1f MB without: the cap does not bound memory", mb(capped), mb(uncapped))
	}
}

// floodButler is a butler with max_sessions max (0: the default) served
// over HTTP; it returns its /mcp URL and static token.
func floodButler(t *testing.T, max int) (*Butler, string, string) {
	t.Helper()
	nc, _ := bustest.RunServer(t).Connect()
	cfg := config.Default()
	cfg.Butlers[0].MCPTokenEnv = "T"
	if max > 0 {
		cfg.Butlers[0].MaxSessions = max
	}
	static := token.NewStatic()
	b, err := New(t.Context(), Options{Name: "assistant", Config: cfg, NC: nc, Getenv: func(string) string { return static }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b.Handler())
	t.Cleanup(hs.Close)
	return b, hs.URL + MCPPath, static
}

// flood sends n initialize calls from a few connections at once, as a
// client that never closes its sessions would.
func flood(t *testing.T, url, static string, n int) {
	t.Helper()
	const workers = 8
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer hc.CloseIdleConnections()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && failed.Load() == nil {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
				if err != nil {
					failed.Store(err)
					return
				}
				req.Header.Set("Authorization", "Bearer "+static)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := hc.Do(req)
				if err != nil {
					failed.Store(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
					failed.Store(fmt.Errorf("initialize: %s", resp.Status))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
}

type mem struct{ heap, rss uint64 }

// memNow is the heap in use after a collection, and the process's resident
// set (0 where /proc is not there).
func memNow() mem {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := mem{heap: ms.HeapInuse}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var kb uint64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb); err == nil {
				m.rss = kb << 10
			}
		}
	}
	return m
}

func mb(n uint64) float64 { return float64(n) / (1 << 20) }
