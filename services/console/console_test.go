package console_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/services/console"
)

// TestCollectAThousandButlers: herald status on a fleet of 1,000 butlers
// (herald dev runs that many in one process, docs/performance.md) lists
// every one of them and the switchboard and messenger, with no problem,
// three asking at once. Before, the answers arrived faster than a
// 256-message channel took them and the rest were dropped: a run listed
// 257 butlers and said no messenger answered, with nothing saying the list
// was short; and the requests of two at once overflowed the 1,024 the
// services' own channel held.
func TestCollectAThousandButlers(t *testing.T) {
	srv := bustest.RunServer(t)
	fleet, _ := srv.Connect()
	const butlers = 1000
	add := func(service string, status any) {
		s, err := obs.AddService(fleet, service, obs.Version, func() any { return status })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop() })
	}
	add(obs.ServiceSwitchboard, map[string]any{"held": 0})
	add(obs.ServiceMessenger, map[string]any{"integrations": []string{"log:log"}})
	for i := range butlers {
		name := fmt.Sprintf("b%04d", i)
		add(obs.ServiceButler(name), map[string]any{"butler": name})
	}

	// Three at once, as an operator's herald status --watch, the
	// operations page and a script would: the requests reach every service
	// on the one connection at once.
	const collectors = 3
	fleets := make([]*console.Fleet, collectors)
	var wg sync.WaitGroup
	for i := range collectors {
		nc, _ := srv.Connect()
		wg.Go(func() {
			f, err := console.Collect(t.Context(), nc, console.Options{URL: srv.URL()})
			if err != nil {
				t.Error(err)
			}
			fleets[i] = f
		})
	}
	wg.Wait()
	for i, f := range fleets {
		if f == nil {
			continue
		}
		if len(f.Problems) != 0 {
			t.Errorf("collector %d: %d problems, the first %q", i, len(f.Problems), f.Problems[0])
		}
		if len(f.Processes) != butlers+2 || len(f.Butlers) != butlers {
			t.Errorf("collector %d: %d processes and %d butlers listed, want %d and %d", i, len(f.Processes), len(f.Butlers), butlers+2, butlers)
		}
		if len(f.Integrations) != 1 {
			t.Errorf("collector %d: integrations %+v, want the messenger's log:log", i, f.Integrations)
		}
	}
}
