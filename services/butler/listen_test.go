package butler_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/process"
)

// TestMCPListenDefault: a butler binary whose butler has no mcp_http
// listens on loopback only, at 7701 plus its place in the file, the same
// at every start; another process on that port is an error naming it and
// mcp_http, never a move to some other address.
func TestMCPListenDefault(t *testing.T) {
	srv := bustest.RunServer(t)
	// Ten butlers, the last one tested: its port (7710) is farther from
	// the 7701 a herald dev on this machine may hold.
	var y strings.Builder
	fmt.Fprintf(&y, "nats: { url: %q }\nbutlers:\n", srv.URL())
	for i := range 10 {
		fmt.Fprintf(&y, "  - { name: b%d }\n", i)
	}
	file := filepath.Join(t.TempDir(), "herald.yaml")
	if err := os.WriteFile(file, []byte(y.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	const addr = "127.0.0.1:7710"
	if ln, err := net.Listen("tcp", addr); err != nil {
		t.Skipf("%s is held by another process: %v", addr, err)
	} else {
		ln.Close()
	}

	for start := range 2 {
		var logs testkit.Buffer
		stop, exit := runButler(t, file, "b9", &logs)
		testkit.Eventually(t, 30*time.Second, func() bool { return len(logs.Records(map[string]string{"msg": "MCP endpoint"})) > 0 }, "the MCP endpoint")
		if got := logs.Records(map[string]string{"msg": "MCP endpoint"})[0]["url"]; got != "http://"+addr+butler.MCPPath {
			t.Errorf("start %d: the butler listens at %v, want http://%s%s (loopback, 7701 + its place)", start+1, got, addr, butler.MCPPath)
		}
		stop()
		if code := <-exit; code != 0 {
			t.Fatalf("start %d: exit %d:\n%s", start+1, code, logs.String())
		}
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var logs testkit.Buffer
	_, exit := runButler(t, file, "b9", &logs)
	select {
	case code := <-exit:
		if out := logs.String(); code != 1 || !strings.Contains(out, addr+" is the butler's default MCP address") || !strings.Contains(out, "set mcp_http") {
			t.Errorf("with %s taken: exit %d:\n%s\nwant 1, naming the address and mcp_http", addr, code, out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the butler runs though %s is taken:\n%s", addr, logs.String())
	}
}

// runButler runs the butler binary for butler name of file, logging to
// logs, until stop; exit gets its exit code.
func runButler(t *testing.T, file, name string, logs *testkit.Buffer) (stop func(), exit <-chan int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	code := make(chan int, 1)
	io := process.IO{Getenv: func(string) string { return "" }, Stdout: logs, Stderr: logs}
	go func() { code <- process.Main(ctx, butler.Command(), []string{"--name", name, "--config", file}, io) }()
	return cancel, code
}
