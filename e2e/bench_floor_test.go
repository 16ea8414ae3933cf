package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// floorBin builds e2e/mcpfloor once.
var floorBin = sync.OnceValues(func() (string, error) { return goBuild("github.com/heraldhq/herald/e2e/mcpfloor") })

// benchFloorRows measure the floor under the MCP rows: mcp-go's streamable
// HTTP server with a notify tool that answers at once (e2e/mcpfloor, its own
// process, nothing else in it), driven by the same client, sessions and
// loops as (c) and (f). What herald dev adds to a notify is the difference.
//
//	(n) open loop at 1,000/s: the latency the MCP layer and the client alone
//	    make, timed from when each call was due.
//	(o) closed loop, 64 sessions: the MCP layer's own ceiling on this machine,
//	    and (f)'s share of it when both ran.
func benchFloorRows(b *testing.B, t *table) {
	bin, err := floorBin()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = shellEnv() // BENCH_HERALD_ENV is for herald dev only
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		b.Fatalf("mcpfloor printed no address: %v", sc.Err())
	}
	url := strings.TrimSpace(sc.Text())
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	c := newMCPClient(url, "floor")
	sessions := make([]*mcpSession, benchWindow)
	for i := range sessions {
		if sessions[i], err = c.open(context.Background()); err != nil {
			b.Fatalf("MCP session with mcpfloor: %v", err)
		}
	}
	notify := func(worker, seq int) error {
		return sessions[worker%len(sessions)].notify(context.Background(), "log", marker("floor", seq)+" "+benchPayload)
	}
	openLoop(float64(benchRate), time.Second, func(seq int) error { return notify(seq, seq) }) // warm up

	peak := func() uint64 { _, p, _ := procMemory(b, cmd.Process.Pid); return p }
	// cpu measures the floor's CPU per call and the machine's during run.
	cpu := func(run func() *result) (*result, string) {
		cpu0, busy := procCPU(cmd.Process.Pid), coresBusy()
		res := run()
		used, cores := procCPU(cmd.Process.Pid)-cpu0, busy()
		return res, fmt.Sprintf("mcpfloor's CPU: %.0f µs per call; %s", used.Seconds()*1e6/float64(max(res.ok, 1)), cores)
	}
	res, use := cpu(func() *result {
		return openLoop(float64(benchRate), benchFor, func(seq int) error { return notify(seq, seq) })
	})
	checkFloor(b, "(n)", res)
	t.add(row{key: "n", name: fmt.Sprintf("(n) MCP floor: mcp-go alone, notify answered at once, open loop at %s/s", thousands(float64(benchRate))),
		rate: res.rate(), unit: "notify/s", p50: res.p(50), p99: res.p(99), p999: res.p(99.9), rss: peak(),
		goal: "what (c) and (d) cannot go below", breakdown: use})
	res, use = cpu(func() *result { return closedLoop(benchWindow, benchFor, notify) })
	checkFloor(b, "(o)", res)
	t.add(row{key: "o", name: fmt.Sprintf("(o) MCP floor: mcp-go alone, notify answered at once, %d sessions, closed loop", benchWindow),
		rate: res.rate(), unit: "notify/s", p50: res.p(50), p99: res.p(99), p999: res.p(99.9), rss: peak(), goal: "the ceiling (f) and (g) are under", breakdown: use})
}

// checkFloor fails the benchmark if a floor call failed: the floor's figures
// count only answered calls.
func checkFloor(b *testing.B, name string, res *result) {
	if res.failed > 0 {
		b.Fatalf("%s: %d calls to mcpfloor failed, the first: %v", name, res.failed, res.firstErr)
	}
}
