package delivertest

import (
	"os"
	"testing"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Live delivers d to the real provider, through a sender factory builds
// from in with the process's environment, and checks that it went out as
// one message: a channel's TestLive, after testkit.SkipWithoutEnv.
func Live(t *testing.T, factory deliver.Factory, in config.Integration, d deliver.Delivery) {
	t.Helper()
	s := NewSender(t, factory, in, deliver.Env{Getenv: os.Getenv})
	r, err := s.Deliver(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.MessageIDs) != 1 {
		t.Fatalf("receipt %v, want one message id", r.MessageIDs)
	}
	t.Logf("delivered message %v", r.MessageIDs)
}

// Each is, for a harness, f of each call calls returns (e.g. the
// recipient of each message the fake accepted).
func Each[C, T any](calls func() []C, f func(C) T) func(*testing.T) []T {
	return func(*testing.T) []T {
		var out []T
		for _, c := range calls() {
			out = append(out, f(c))
		}
		return out
	}
}
