package switchboard_test

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/switchboard/core"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/services/herald"
)

// herald runs a herald command against the test fleet.
func (f *fleet) herald(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	args = append(args[:1:1], append([]string{args[1], "--config", f.path}, args[2:]...)...)
	code := herald.Main(t.Context(), args, herald.IO{Getenv: func(string) string { return "" }, Stdout: &out, Stderr: &out})
	return code, out.String()
}

var codePattern = regexp.MustCompile(`herald pair approve ([A-Z0-9]{6})\b`)

// TestPairing is the stranger's way in: a code, the operator's approval on
// the command line, then their messages go through.
func TestPairing(t *testing.T) {
	f := newFleet(t)
	f.start(t)

	first := f.send(t, "telegram", telegram("tg_main", "999", "", "", "hello, who is this?"))
	want(t, f.handled(t, first)[0], audit.Rejected, core.ReasonPairingCodeSent)
	notes := f.deliveries(t)
	if len(notes) != 1 {
		t.Fatalf("%d messages to the stranger, want one with a code", len(notes))
	}
	n := notes[0]
	if n.OriginButler != "herald" || n.Delivery.Channel != "telegram:tg_main" || n.Delivery.Recipient != "999" {
		t.Errorf("code sent as %q on %q to %q", n.OriginButler, n.Delivery.Channel, n.Delivery.Recipient)
	}
	m := codePattern.FindStringSubmatch(n.Delivery.Message)
	if m == nil {
		t.Fatalf("no code in %q", n.Delivery.Message)
	}
	code := m[1]
	if strings.Contains(n.Delivery.Message, first.Content.Text) {
		t.Error("the stranger's text was echoed")
	}

	// Asking again while the code is pending gets no new code.
	again := f.send(t, "telegram", telegram("tg_main", "999", "", "", "hello??"))
	want(t, f.handled(t, again)[0], audit.Rejected, core.ReasonPairingPending)
	if got := len(f.deliveries(t)); got != 1 {
		t.Errorf("%d codes sent, want still 1", got)
	}
	// Typing a code into the chat does nothing: only the operator approves.
	typed := f.send(t, "telegram", telegram("tg_main", "999", "", "", "herald pair approve "+code))
	want(t, f.handled(t, typed)[0], audit.Rejected, core.ReasonPairingPending)
	for _, b := range []string{"assistant", "health", "finance"} {
		if got := len(f.inbox(t, b)); got != 0 {
			t.Fatalf("a stranger reached %s", b)
		}
	}

	exit, out := f.herald(t, "pair", "list")
	if exit != 0 || !strings.Contains(out, code) || !strings.Contains(out, "tg_main") || !strings.Contains(out, "999") {
		t.Fatalf("herald pair list exited %d:\n%s", exit, out)
	}
	exit, out = f.herald(t, "pair", "approve", strings.ToLower(code))
	if exit != 0 || !strings.Contains(out, "Paired 999 on tg_main") {
		t.Fatalf("herald pair approve exited %d:\n%s", exit, out)
	}

	next := f.send(t, "telegram", telegram("tg_main", "999", "", "", "now?"))
	want(t, f.handled(t, next)[0], audit.Routed, core.ReasonInboundMessage)
	got := f.inbox(t, "health")
	if len(got) != 1 || got[0].Input.Context.Ingress.Content.Text != "now?" {
		t.Fatalf("after approval the health inbox holds %d routes", len(got))
	}

	exit, out = f.herald(t, "pair", "approve", code)
	if exit != 1 || !strings.Contains(out, "no such pairing code") {
		t.Errorf("approving a used code exited %d:\n%s", exit, out)
	}
	exit, out = f.herald(t, "pair", "list")
	if exit != 0 || strings.Contains(out, code) || !strings.Contains(out, "No pending pairing codes") || !strings.Contains(out, "999") {
		t.Errorf("herald pair list after approval:\n%s", out)
	}

	// Revoked, they are a stranger again and get a new code.
	exit, out = f.herald(t, "pair", "revoke", "--integration", "tg_main", "999")
	if exit != 0 {
		t.Fatalf("herald pair revoke exited %d:\n%s", exit, out)
	}
	after := f.send(t, "telegram", telegram("tg_main", "999", "", "", "still me"))
	want(t, f.handled(t, after)[0], audit.Rejected, core.ReasonPairingCodeSent)
}

func TestPairCommandErrors(t *testing.T) {
	f := newFleet(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown code", []string{"pair", "approve", "ABCDEF"}, 1, "no such pairing code"},
		{"not a code", []string{"pair", "approve", "hello!"}, 1, "no such pairing code"},
		{"no code", []string{"pair", "approve"}, 2, "Usage:"},
		{"revoke without integration", []string{"pair", "revoke", "999"}, 2, "--integration"},
		{"revoke a stranger", []string{"pair", "revoke", "--integration", "tg_main", "999"}, 1, "not paired"},
		{"unknown subcommand", []string{"pair", "grant", "x"}, 2, "herald pair: unknown subcommand \"grant\"\nRun herald pair --help for its usage."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := f.herald(t, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, want %d; output:\n%s", code, tt.code, out)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
