package cmd_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestEachBinaryLinksItsOwnService: each service's binary links its own
// service and what that needs, never another service's package; only
// herald (whose dev runs the whole fleet in one process) links them all. As
// go list -deps says, so a new import that drags a service into another's
// binary fails here. Everything under services/messenger/ (the channel
// packages and deliver too) is the messenger's: configuration knows the
// channel types without them (pkg/channel), so the switchboard and butler
// binaries link none, and with them no channel's code or credentials
// (docs/decisions.md). Nor does a service binary link the NATS server,
// which only herald dev embeds.
func TestEachBinaryLinksItsOwnService(t *testing.T) {
	const services = "github.com/heraldhq/herald/services/"
	all := []string{"switchboard", "messenger", "butler", "herald"}
	for _, bin := range all {
		t.Run(bin, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "./"+bin).Output()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v", bin, err)
			}
			linked := map[string]bool{}
			var messenger []string // every package under services/messenger/
			var server []string    // nats-server's packages
			for _, pkg := range strings.Fields(string(out)) {
				if strings.HasPrefix(pkg, "github.com/nats-io/nats-server/") {
					server = append(server, pkg)
				}
				if rest, ok := strings.CutPrefix(pkg, services); ok {
					linked[rest] = true
					if strings.HasPrefix(rest, "messenger/") {
						messenger = append(messenger, rest)
					}
				}
			}
			for _, other := range all {
				switch {
				case bin == "herald" && !linked[other]:
					t.Errorf("herald does not link %s; herald dev runs every service", other)
				case bin != "herald" && other != bin && linked[other]:
					t.Errorf("the %s binary links %s code; a binary carries only its own service", bin, other)
				case bin != "herald" && !linked[bin]:
					t.Errorf("the %s binary does not link its own service", bin)
				}
			}
			// The NATS server runs in herald dev alone (pkg/bus/embedded);
			// a service binary is only its client.
			if bin != "herald" && len(server) > 0 {
				t.Errorf("the %s binary links %d nats-server packages (%s, …); only herald dev embeds the server", bin, len(server), server[0])
			}
			switch bin {
			case "switchboard", "butler":
				if len(messenger) > 0 {
					t.Errorf("the %s binary links %s; nothing under services/messenger/ belongs in it", bin, strings.Join(messenger, ", "))
				}
			default:
				if !linked["messenger/channels"] {
					t.Errorf("the %s binary does not link services/messenger/channels; its messenger would have no channels", bin)
				}
			}
		})
	}
}
