package herald

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/natsauth"
)

// TestLogShowsForgedRecords: under the permissions herald nats-auth
// generates, a butler writes audit records only on its own subject, and a
// record there that claims another kind or another butler is shown by
// herald log as forged, never as fact. A butler's user may publish
// auto_allowed records (its answers by a grant); before, it could publish
// them on any herald.audit.auto_allowed.> subject, and a body of kind
// delivered naming butler beta showed in `herald log --butler beta`.
func TestLogShowsForgedRecords(t *testing.T) {
	url, pw := secureBus(t)
	js := connAs(t, url, "butler-health", pw["butler-health"], natsauth.ConnButler("health"))
	publish := func(subject string, r audit.Record) error {
		b, _ := json.Marshal(r)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := js.Publish(ctx, subject, b)
		return err
	}
	// Its own record, as its writer makes it.
	w := &audit.Writer{JS: js, Butler: "health"}
	w.Write(t.Context(), audit.Record{Kind: audit.AutoAllowed, Butler: "health", RequestID: "abcde", Grant: "g_0123456789"})
	w.Flush()
	stored(t, js)
	// Another butler's name, or a service's subject: refused by the server.
	now := time.Now().UTC()
	forged := audit.Record{Time: now, Kind: audit.Delivered, Butler: "beta", Channel: "telegram:tg_main", RequestID: "0195f0a0-0000-7000-8000-000000000001"}
	for _, subject := range []string{bus.AuditSubject(audit.Delivered, "telegram"), bus.AuditSubject(audit.AutoAllowed, "telegram"), bus.ButlerAuditSubject(audit.AutoAllowed, "beta")} {
		if err := publish(subject, forged); err == nil {
			t.Errorf("butler health stored an audit record on %s", subject)
		}
	}
	// On its own subject it can store any body: that one is a forgery.
	if err := publish(bus.ButlerAuditSubject(audit.AutoAllowed, "health"), forged); err != nil {
		t.Fatal(err)
	}

	out, err := logAs(t, url, "operator", pw["operator"], "--butler", "beta")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
		t.Fatalf("herald log --json --butler beta: %q: %v", out, err)
	}
	if why, _ := got["forged"].(string); !strings.Contains(why, "written by butler health") {
		t.Errorf("the record in beta's name, written by health: %v, want it marked forged", got)
	}
	out, err = logAs(t, url, "operator", pw["operator"], "--kind", audit.AutoAllowed)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"grant":"g_0123456789"`) || strings.Count(strings.TrimSpace(out), "\n") != 1 {
		t.Errorf("herald log --kind auto_allowed: %q, want health's own record, and the forged one marked", out)
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "g_0123456789") && strings.Contains(line, "forged") {
			t.Errorf("health's own record shown as forged: %s", line)
		}
	}

	// The table says so too.
	url2 := strings.Replace(url, "nats://", "nats://operator:"+pw["operator"]+"@", 1)
	var table strings.Builder
	err = runLog(t.Context(), []string{"--butler", "beta", "--timeout", "1s"}, IO{Getenv: func(k string) string { return map[string]string{"NATS_URL": url2}[k] }, Stdout: &table, Stderr: &table})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "FORGED") || !strings.Contains(table.String(), "written by butler health but names butler beta") {
		t.Errorf("the table:\n%s\nwant the record marked FORGED, saying why", table.String())
	}
}
