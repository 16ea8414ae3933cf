package config_test

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
)

// TestHTTPListenPerRole: with no http_listen, each kind of process has its
// own default, so a switchboard and a messenger on one host do not collide;
// a butler has none (its MCP listener serves its health); one set in the
// file or by HERALD_HTTP_LISTEN applies to every kind.
func TestHTTPListenPerRole(t *testing.T) {
	cfg := config.Default()
	want := map[string]string{"dev": "127.0.0.1:8790", "switchboard": "127.0.0.1:8791", "messenger": "127.0.0.1:8792", "butler": ""}
	for role, addr := range want {
		if got := cfg.HTTPListenFor(role); got != addr {
			t.Errorf("%s: %q, want %q", role, got, addr)
		}
	}
	cfg.ApplyEnv(func(k string) string {
		if k == "HERALD_HTTP_LISTEN" {
			return "0.0.0.0:9000"
		}
		return ""
	})
	for role := range want {
		if got := cfg.HTTPListenFor(role); got != "0.0.0.0:9000" {
			t.Errorf("%s with HERALD_HTTP_LISTEN: %q", role, got)
		}
	}
}

// TestMCPHTTPDefault: a butler without mcp_http gets a loopback address,
// 7701 plus its place in the file, skipping a port another butler's
// mcp_http names; the same file gives the same addresses every time, and
// an address the file sets is not a default.
func TestMCPHTTPDefault(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string // each butler's address, "=" before one the file sets
	}{
		{"no butlers", "", []string{"127.0.0.1:7701"}},
		{"none set", "butlers: [{ name: a }, { name: b }, { name: c }]", []string{"127.0.0.1:7701", "127.0.0.1:7702", "127.0.0.1:7703"}},
		{"one set on a default's port", "butlers: [{ name: a }, { name: b, mcp_http: 127.0.0.1:7701 }, { name: c }]",
			[]string{"127.0.0.1:7702", "=127.0.0.1:7701", "127.0.0.1:7703"}},
		{"every interface, asked for", "butlers: [{ name: a, mcp_http: 0.0.0.0:7702 }, { name: b }]", []string{"=0.0.0.0:7702", "127.0.0.1:7703"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 {
				cfg, err := config.Parse([]byte(tt.yaml))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, b := range cfg.Butlers {
					switch b.MCPHTTPDefault() {
					case "":
						got = append(got, "="+b.MCPHTTP)
					case b.MCPHTTP:
						got = append(got, b.MCPHTTP)
					default:
						got = append(got, "default "+b.MCPHTTPDefault()+" but "+b.MCPHTTP)
					}
				}
				if strings.Join(got, " ") != strings.Join(tt.want, " ") {
					t.Errorf("addresses %v, want %v", got, tt.want)
				}
			}
		})
	}
}
