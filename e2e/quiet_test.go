package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
)

// quietZone is a time zone whose clock reads 23:xx at now: a fixed-offset
// Etc/GMT zone (whose names count the other way: Etc/GMT-3 is UTC+3).
func quietZone(now time.Time) (string, *time.Location) {
	off := 23 - now.UTC().Hour() // hours ahead of UTC
	if off > 14 {
		off -= 24
	}
	name := "Etc/GMT"
	switch {
	case off > 0:
		name += "-" + strconv.Itoa(off)
	case off < 0:
		name += "+" + strconv.Itoa(-off)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return name, loc
}

// TestQuietHoursDigest: the switchboard, the messenger and a butler run as
// processes of their own. In an integration's quiet hours (23:00 to a
// minute or two from now, in a zone where it is 23:xx now) a low and a
// normal note are held — the model is told "held until …", the chat gets
// nothing — while a high one arrives at once. The switchboard is killed
// with SIGKILL while they are held and started again; when the hours end,
// one digest brings both notes, once, and `herald log --request-id` shows a
// note held, then released in the digest.
func TestQuietHoursDigest(t *testing.T) {
	if _, err := serviceBins(); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	mcpAddr := testkit.FreeAddr(t)

	// The hours end at the first whole minute at least a minute away.
	now := time.Now()
	zone, loc := quietZone(now)
	end := now.In(loc).Truncate(time.Minute).Add(time.Minute)
	for end.Sub(now) < time.Minute {
		end = end.Add(time.Minute)
	}
	to := end.Format("15:04")
	env, sb := f.startProcesses(mcpAddr, fmt.Sprintf(`    quiet_hours: { from: "23:00", to: %q, tz: %s, pass: high }
`, to, zone))
	cli := func(args ...string) string {
		t.Helper()
		out, err := heraldCLI(t, env, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	c := f.connect("http://"+mcpAddr+"/mcp", "")
	chat, _ := strconv.ParseInt(chatID, 10, 64)
	inChat := func(s string) int {
		n := 0
		for _, m := range f.tg.Messages(chat) {
			if strings.Contains(m.Text, s) {
				n++
			}
		}
		return n
	}

	held := map[string]string{} // first line -> request_id
	for _, note := range []struct{ message, urgency string }{
		{"Garden report\nThe tomatoes need water.", "low"},
		{"Weekly summary\nThree tasks done, one left.", "normal"},
	} {
		res := callNotify(t, c, map[string]any{"message": note.message, "urgency": note.urgency})
		want := "Notification held until " + to + " " + zone
		if res.IsError || !strings.HasPrefix(text(res), want) || strings.Contains(text(res), "sent via") {
			t.Fatalf("a %s note in quiet hours answered %q (isError %v), want it to start %q", note.urgency, text(res), res.IsError, want)
		}
		saysInStructured(t, res)
		got := structured[struct {
			Status         string `json:"status"`
			RequestContext struct {
				RequestID string `json:"request_id"`
			} `json:"request_context"`
		}](t, res)
		if got.Status != "held" || got.RequestContext.RequestID == "" {
			t.Fatalf("structured answer %+v, want status held with its request_id", got)
		}
		first, _, _ := strings.Cut(note.message, "\n")
		held[first] = got.RequestContext.RequestID
	}
	res := callNotify(t, c, map[string]any{"message": "Smoke alarm in the kitchen", "urgency": "high"})
	if res.IsError || sentRE.FindStringSubmatch(text(res)) == nil {
		t.Fatalf("a high note in quiet hours answered %q", text(res))
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return inChat("Smoke alarm in the kitchen") == 1 }, "the high note in the chat")
	for first := range held {
		if n := inChat(first); n != 0 {
			t.Fatalf("%q reached the chat in quiet hours", first)
		}
	}

	// Killed while the notes are held, and started again.
	if err := sb.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = sb.cmd.Wait()
	kv, err := f.js.KeyValue(t.Context(), bus.BucketHeld)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for k := range keys.Keys() {
		if strings.HasPrefix(k, "n.") {
			stored++
		}
	}
	if stored != 2 {
		t.Fatalf("%d notes held in %s while the switchboard is down, want 2", stored, bus.BucketHeld)
	}
	startService(t, "switchboard", "switchboard again", env)
	if time.Now().Before(end) && inChat("Held during quiet hours") != 0 {
		t.Fatal("the digest came before the quiet hours ended")
	}

	testkit.Eventually(t, time.Until(end)+time.Minute, func() bool { return inChat("Held during quiet hours") > 0 }, "the digest at "+to)
	time.Sleep(6 * time.Second) // three scans more: nothing is sent again
	if n := inChat("Held during quiet hours"); n != 1 {
		t.Fatalf("%d digests in the chat, want one", n)
	}
	var digest string
	for _, m := range f.tg.Messages(chat) {
		if strings.Contains(m.Text, "Held during quiet hours") {
			digest = m.Text
		}
	}
	for _, want := range []string{"2 notes", "health", "Garden report", "The tomatoes need water.", "Weekly summary", held["Garden report"], held["Weekly summary"]} {
		if !strings.Contains(digest, want) {
			t.Errorf("the digest lacks %q:\n%s", want, digest)
		}
	}
	for first := range held {
		if n := inChat(first); n != 1 {
			t.Errorf("%q is in the chat %d times, want once, in the digest", first, n)
		}
	}

	// The operator sees each note held, then released in the digest.
	testkit.Eventually(t, 10*time.Second, func() bool { return len(f.audit(audit.Released)) >= 2 }, "the notes' released records")
	trail := cli("log", "--request-id", held["Garden report"])
	if !strings.Contains(trail, "held") || !strings.Contains(trail, "released") || !strings.Contains(trail, "until "+to+" "+zone) || !strings.Contains(trail, "digest") {
		t.Errorf("herald log --request-id of a held note:\n%s\nwant it held until %s %s, then released in the digest", trail, to, zone)
	}
}

// TestQuietHoursDocParses: docs/attention.md's example of quiet hours is a
// valid herald.yaml with those hours, and the mistakes it shows are the
// errors Herald gives for them in that example, lines included.
func TestQuietHoursDocParses(t *testing.T) {
	blocks := codeBlocks(docSection(t, "attention.md", "Quiet hours and digests"))
	var example string
	for _, b := range blocks {
		if b.lang == "yaml" {
			example = b.text
			break
		}
	}
	cfg, err := config.Parse([]byte(example))
	if err != nil {
		t.Fatalf("the example does not load: %v\n%s", err, example)
	}
	q := cfg.Integration("tg_main").QuietHours
	if q == nil || q.Window() != "22:00–07:00 Europe/Berlin" || q.PassUrgency() != "high" {
		t.Fatalf("the example's quiet hours: %+v", q)
	}

	mistakes := blocks[len(blocks)-1].text
	bad := strings.NewReplacer(`to: "07:00"`, `to: 7`, "tz: Europe/Berlin", "tz: Europe/Berln", "pass: high", "pass: urgent").Replace(example)
	_, err = config.Parse([]byte(bad))
	if err == nil {
		t.Fatal("the doc's mistakes load")
	}
	for _, line := range strings.Split(strings.TrimSpace(mistakes), "\n") {
		if !strings.HasPrefix(line, "line ") || !strings.Contains(err.Error(), line) {
			t.Errorf("the doc shows\n  %s\nbut Herald says\n  %v", line, err)
		}
	}
}
