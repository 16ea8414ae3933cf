package herald_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/herald"
)

// TestSecureConfIsGenerated: deploy/nats-secure.conf is exactly what
// `herald nats-auth` prints for deploy/herald.yaml, so the compose fleet's
// permissions never drift from the code's needs. After adding a butler:
//
//	bin/herald nats-auth --config deploy/herald.yaml > deploy/nats-secure.conf
func TestSecureConfIsGenerated(t *testing.T) {
	var out, errs bytes.Buffer
	code := herald.Main(t.Context(), []string{"nats-auth", "--config", "../../deploy/herald.yaml"}, herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &errs})
	if code != 0 {
		t.Fatalf("herald nats-auth: exit %d: %s", code, errs.String())
	}
	have, err := os.ReadFile("../../deploy/nats-secure.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, out.Bytes()) {
		t.Fatal("deploy/nats-secure.conf differs from `herald nats-auth --config deploy/herald.yaml`; regenerate it")
	}
	for _, user := range []string{`user: "switchboard"`, `user: "messenger"`, `user: "butler-health"`, `user: "butler-finance"`, `user: "operator"`, `user: "setup"`} {
		if !strings.Contains(out.String(), user) {
			t.Errorf("no %s in the generated configuration", user)
		}
	}
}
