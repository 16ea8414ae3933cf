package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/testkit"
)

// TestKilledSwitchboardKeepsItsAudit: the switchboard, the messenger and a
// butler run as processes of their own; notifies go through the butler's
// MCP tool from 8 sessions while the switchboard is killed (SIGKILL) and
// restarted 5 times. Every notify that reached Telegram was routed, its
// route acknowledged (answered "routed" to the butler, or acked in
// HERALD_ROUTE), so its routed audit record must be in HERALD_AUDIT: none
// missing. A route redone after a kill may be audited twice; the test
// reports how many were.
func TestKilledSwitchboardKeepsItsAudit(t *testing.T) {
	if _, err := serviceBins(); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	mcpAddr := testkit.FreeAddr(t)
	env, sb := f.startProcesses(mcpAddr, "")
	const sessions, kills = 8, 5

	ctx, stop := context.WithCancel(t.Context())
	var (
		load sync.WaitGroup
		mu   sync.Mutex
		sent []string // caller keys answered sent or queued
	)
	for s := range sessions {
		c := f.connect("http://"+mcpAddr+"/mcp", "")
		load.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				key := fmt.Sprintf("audit-kill-%d-%04d", s, i)
				req := mcp.CallToolRequest{}
				req.Params.Name = "notify"
				req.Params.Arguments = map[string]any{"message": key, "idempotency_key": key}
				res, err := c.CallTool(t.Context(), req)
				if err != nil || res.IsError {
					continue // not promised; counted below if it reached Telegram
				}
				mu.Lock()
				sent = append(sent, key)
				mu.Unlock()
			}
		})
	}
	for range kills {
		time.Sleep(1500 * time.Millisecond)
		_ = sb.cmd.Process.Signal(syscall.SIGKILL)
		_ = sb.cmd.Wait()
		sb = startService(t, "switchboard", "switchboard", env)
	}
	time.Sleep(time.Second)
	stop()
	load.Wait()

	// What reached Telegram was routed; once every route is settled (a
	// killed switchboard's come back after their ack wait), each has its
	// record.
	chat, _ := strconv.ParseInt(chatID, 10, 64)
	delivered := func() map[string]bool {
		out := map[string]bool{}
		for _, m := range f.tg.Messages(chat) {
			if strings.HasPrefix(m.Text, "audit-kill-") {
				out[m.Text] = true
			}
		}
		return out
	}
	answered := len(sent)
	testkit.Eventually(t, 60*time.Second, func() bool {
		got := delivered()
		for _, k := range sent {
			if !got[k] {
				return false
			}
		}
		return true
	}, fmt.Sprintf("the %d notifies answered sent or queued to reach Telegram", answered))
	var missing []string
	records, dups := 0, 0
	testkit.Poll(60*time.Second, time.Second, func() bool {
		routed := map[string]int{}
		for _, r := range f.audit(audit.Routed) {
			if k, _ := r["caller_key"].(string); strings.HasPrefix(k, "audit-kill-") {
				routed[k]++
			}
		}
		missing, records, dups = nil, 0, 0
		for k := range delivered() {
			switch n := routed[k]; n {
			case 0:
				missing = append(missing, k)
			default:
				records++
				dups += n - 1
			}
		}
		return len(missing) == 0
	})
	t.Logf("%d notifies through %d kills of the switchboard: %d reached Telegram, %d have their routed record, %d missing, %d audited twice or more (routes redone after a kill)",
		answered, kills, len(delivered()), records, len(missing), dups)
	if len(missing) > 0 {
		t.Errorf("%d routed notifies have no routed audit record, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
}
