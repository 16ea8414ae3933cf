package e2e

import (
	"testing"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/natsauth"
	"github.com/heraldhq/herald/services/console"
)

// TestStatusUnderLeastPrivilege: on a fleet's NATS with the users herald
// nats-auth prints, the operator's user sees the whole fleet (herald
// status), the switchboard counts what waits under its own permissions,
// and the server refuses nothing either of them asks.
func TestStatusUnderLeastPrivilege(t *testing.T) {
	cfg, err := config.Parse([]byte(`
butlers:
  - { name: health }
integrations:
  - { id: health_log, type: log, grants: [health] }
`))
	if err != nil {
		t.Fatal(err)
	}
	s := runSecureNATS(t, cfg)
	s.runFleet(cfg)
	nc, _, refused := s.conn("operator", natsauth.ConnCLI)
	f, err := console.Collect(t.Context(), nc, console.Options{URL: s.url})
	if err != nil {
		t.Fatalf("herald status as the operator: %v", err)
	}
	var services []string
	for _, p := range f.Processes {
		services = append(services, p.Service)
		if !p.Ready || p.Version == "" {
			t.Errorf("process %+v: want ready, with its version", p)
		}
	}
	if len(services) != 2 || services[0] != "switchboard" || services[1] != "messenger" {
		t.Errorf("processes %q, want the switchboard and the messenger", services)
	}
	if len(f.Problems) != 0 {
		t.Errorf("what status could not learn under least privilege: %q", f.Problems)
	}
	if len(f.Integrations) != 1 || f.Integrations[0].Channel != "log:health_log" || f.Integrations[0].CannotWork != "" {
		t.Errorf("integrations %+v", f.Integrations)
	}
	refused.mu.Lock()
	defer refused.mu.Unlock()
	if len(refused.errs) > 0 {
		t.Errorf("the server refused the operator: %q", refused.errs)
	}
}
