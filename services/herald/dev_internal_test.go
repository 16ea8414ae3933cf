package herald

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
)

// TestFreeDefaults: a listen address left at its default that another
// process holds moves to a free port, and herald dev says so; one the file
// sets is kept (its clash fails at start, naming it).
func TestFreeDefaults(t *testing.T) {
	// Hold the default MCP port, unless something already does: either
	// way it is taken.
	if ln, err := net.Listen("tcp", config.DefaultMCPHTTP); err == nil {
		defer ln.Close()
	}
	cfg := config.Default()
	cfg.Butlers = append(cfg.Butlers, config.Butler{Name: "other", MCPHTTP: "127.0.0.1:7799"})
	var out bytes.Buffer
	freeDefaults(cfg, &out)
	if cfg.Butlers[0].MCPHTTP != "127.0.0.1:0" || !strings.Contains(out.String(), "butler assistant mcp_http: 127.0.0.1:7701 is taken (another herald dev?); using a free port") {
		t.Errorf("mcp_http %q, said %q; want a free port, and said so", cfg.Butlers[0].MCPHTTP, out.String())
	}
	if cfg.Butlers[1].MCPHTTP != "127.0.0.1:7799" {
		t.Errorf("an address the file set was moved to %q", cfg.Butlers[1].MCPHTTP)
	}
}
