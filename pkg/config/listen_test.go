package config_test

import (
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
