package herald

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/natsauth"
)

// logFleet is a real NATS with Herald's topology, an audit writer on it, and
// the herald.yaml `herald log` reads to reach it.
type logFleet struct {
	file string
	js   jetstream.JetStream
	w    *audit.Writer
	n    uint64 // records written
}

func newLogFleet(t *testing.T) *logFleet {
	t.Helper()
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	f := &logFleet{file: filepath.Join(t.TempDir(), "herald.yaml"), js: js}
	if err := os.WriteFile(f.file, fmt.Appendf(nil, "nats: { url: %q }\n", srv.URL()), 0o600); err != nil {
		t.Fatal(err)
	}
	f.w = &audit.Writer{JS: js, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return f
}

// write audits recs as the switchboard and messenger do, and checks they
// were stored (Writer only logs a failure).
func (f *logFleet) write(t *testing.T, recs ...audit.Record) {
	t.Helper()
	for _, r := range recs {
		f.w.Write(t.Context(), r)
		f.w.Flush() // one stored message each, so the count below holds
	}
	stored(t, f.js)
	f.n += uint64(len(recs))
	if got := bustest.Msgs(t, f.js, bus.StreamAudit); got != f.n {
		t.Fatalf("the audit stream holds %d records, want %d", got, f.n)
	}
}

// log runs `herald log --config <fleet> args...` to its end. The deadline
// only keeps a read that never ends from hanging the suite.
func (f *logFleet) log(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err = runLog(ctx, append([]string{"--config", f.file}, args...), IO{Getenv: noEnv, Stdout: &out, Stderr: &errOut})
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		t.Fatalf("herald log %s did not end by itself", strings.Join(args, " "))
	}
	return out.String(), errOut.String(), err
}

func noEnv(string) string { return "" }

// records parses --json output, one record per line.
func records(t *testing.T, out string) []audit.Record {
	t.Helper()
	var recs []audit.Record
	for line := range strings.Lines(out) {
		var r audit.Record
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// trail names records kind/request_id, in order.
func trail(recs []audit.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Kind+"/"+r.RequestID)
	}
	return out
}

// sample is a small fleet's log: a notify to Telegram sent once uncertainly
// and then delivered (a), one to email that failed (b), an inbound message
// dropped (c), a notify on a second bot (d), one naming no real channel (e).
var sample = []audit.Record{
	{Kind: audit.Routed, Butler: "health", Channel: "telegram:tg_main", Intent: "send", RequestID: "a", Key: "ka"},
	{Kind: audit.Uncertain, Butler: "health", Channel: "telegram:tg_main", Intent: "send", RequestID: "a", Key: "ka", DeliveryID: "dlv_ka", Reason: "resent"},
	{Kind: audit.Delivered, Butler: "health", Channel: "telegram:tg_main", RequestID: "a", Key: "ka", DeliveryID: "dlv_ka"},
	{Kind: audit.Routed, Butler: "finance", Channel: "email:mail", Intent: "send", RequestID: "b", Key: "kb"},
	{Kind: audit.Failed, Butler: "finance", Channel: "email:mail", RequestID: "b", Class: "target_unavailable", Reason: "421 try later"},
	{Kind: audit.Dropped, Channel: "telegram:tg_main", RequestID: "c", Class: "forbidden", Reason: "sender_not_allowed"},
	{Kind: audit.Routed, Butler: "health", Channel: "telegram:tg_other", Intent: "reply", RequestID: "d", Key: "kd"},
	{Kind: audit.Rejected, Butler: "health", Channel: "fax", Intent: "send", RequestID: "e", Class: "validation_error", Reason: "unknown channel fax"},
}

func TestLogFilters(t *testing.T) {
	f := newLogFleet(t)
	f.write(t, sample...)
	all := trail(sample)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no filter: everything kept, oldest first", nil, all},
		{"butler", []string{"--butler", "health"}, []string{"routed/a", "uncertain/a", "delivered/a", "routed/d", "rejected/e"}},
		{"butler whose records are not the last", []string{"--butler", "finance"}, []string{"routed/b", "failed/b"}},
		{"kind", []string{"--kind", "routed"}, []string{"routed/a", "routed/b", "routed/d"}},
		{"kinds", []string{"--kind", "failed,uncertain"}, []string{"uncertain/a", "failed/b"}},
		{"channel type", []string{"--channel", "telegram"}, []string{"routed/a", "uncertain/a", "delivered/a", "dropped/c", "routed/d"}},
		{"one integration", []string{"--channel", "telegram:tg_main"}, []string{"routed/a", "uncertain/a", "delivered/a", "dropped/c"}},
		{"a channel type no integration has", []string{"--channel", "fax"}, []string{"rejected/e"}},
		{"channel and kind", []string{"--channel", "email", "--kind", "failed"}, []string{"failed/b"}},
		{"butler, channel and kind", []string{"--butler", "health", "--channel", "telegram", "--kind", "routed"}, []string{"routed/a", "routed/d"}},
		{"a request's whole trail", []string{"--request-id", "a"}, []string{"routed/a", "uncertain/a", "delivered/a"}},
		{"a request and a kind", []string{"--request-id", "a", "--kind", "delivered"}, []string{"delivered/a"}},
		{"a delivery's whole trail, by the id notify answers", []string{"--delivery-id", "dlv_ka"}, []string{"routed/a", "uncertain/a", "delivered/a"}},
		{"no such delivery", []string{"--delivery-id", "dlv_zzz"}, nil},
		{"limit: the last N", []string{"--limit", "2"}, []string{"routed/d", "rejected/e"}},
		{"limit after filters", []string{"--channel", "telegram", "--limit", "2"}, []string{"dropped/c", "routed/d"}},
		{"limit above the matches", []string{"--request-id", "b", "--limit", "10"}, []string{"routed/b", "failed/b"}},
		{"no such request", []string{"--request-id", "zzz"}, nil},
		{"filters nothing passes on the server", []string{"--kind", "dropped", "--channel", "email"}, nil},
		{"flags after the others, any order", []string{"--json", "--kind", "routed", "--butler", "finance"}, []string{"routed/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := f.log(t, append([]string{"--json"}, tt.args...)...)
			if err != nil {
				t.Fatalf("herald log: %v\n%s", err, errOut)
			}
			if diff := cmp.Diff(tt.want, trail(records(t, out))); diff != "" {
				t.Errorf("herald log --json %s (-want +got):\n%s", strings.Join(tt.args, " "), diff)
			}
		})
	}
}

// TestLogJSONKeepsRecords: --json prints each record as stored, every field.
func TestLogJSONKeepsRecords(t *testing.T) {
	f := newLogFleet(t)
	f.write(t, sample...)
	out, _, err := f.log(t, "--json")
	if err != nil {
		t.Fatal(err)
	}
	got := records(t, out)
	if len(got) != len(sample) {
		t.Fatalf("%d records, want %d", len(got), len(sample))
	}
	for i, r := range got {
		if r.Time.IsZero() {
			t.Errorf("record %d has no time", i)
		}
		r.Time = time.Time{}
		if diff := cmp.Diff(sample[i], r); diff != "" {
			t.Errorf("record %d (-stored +printed):\n%s", i, diff)
		}
	}
}

// TestLogReadsBatchedRecords: delivered records written together are stored
// together, and herald log still shows each of them, filters and all.
func TestLogReadsBatchedRecords(t *testing.T) {
	f := newLogFleet(t)
	const n = 40
	for i := range n {
		f.w.Write(t.Context(), audit.Record{Kind: audit.Delivered, Butler: "health", Channel: "log:log", RequestID: fmt.Sprintf("b%02d", i), DeliveryID: fmt.Sprintf("dlv_%02d", i)})
	}
	f.w.Write(t.Context(), audit.Record{Kind: audit.Failed, Butler: "health", Channel: "log:log", RequestID: "f", Class: "timeout"})
	f.w.Flush()
	stored(t, f.js)
	if msgs := bustest.Msgs(t, f.js, bus.StreamAudit); msgs >= n {
		t.Fatalf("%d records in %d stored messages; written together, they should share messages", n+1, msgs)
	}
	out, _, err := f.log(t, "--json")
	if err != nil {
		t.Fatal(err)
	}
	got := records(t, out)
	if len(got) != n+1 {
		t.Fatalf("herald log printed %d records, want %d", len(got), n+1)
	}
	seen := map[string]bool{}
	for _, r := range got {
		seen[r.RequestID] = true
	}
	for i := range n {
		if !seen[fmt.Sprintf("b%02d", i)] {
			t.Errorf("record b%02d is missing", i)
		}
	}
	out, _, err = f.log(t, "--json", "--request-id", "b07")
	if err != nil {
		t.Fatal(err)
	}
	if got := records(t, out); len(got) != 1 || got[0].DeliveryID != "dlv_07" {
		t.Fatalf("--request-id b07 printed %v", got)
	}
}

func TestLogTable(t *testing.T) {
	f := newLogFleet(t)
	out, _, err := f.log(t)
	if err != nil || out != "No audit records.\n" {
		t.Fatalf("an empty log: %q, %v", out, err)
	}
	forged := audit.Record{Kind: audit.Failed, Butler: "health", Channel: "telegram:tg_main", RequestID: "f", Class: "internal_error",
		Reason: "boom\n2026-01-01 00:00:00  delivered  health\x1b[2J"}
	prefixed := audit.Record{Kind: audit.Rejected, Butler: "health", Channel: "telegram:tg_main", RequestID: "g", Class: "not_found",
		Reason: "not_found: no chat 42"}
	f.write(t, append(slices.Clone(sample), forged, prefixed)...)

	out, _, err = f.log(t, "--request-id", "a")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 rows:\n%s", out)
	}
	if h := strings.Fields(lines[0]); !slices.Equal(h, []string{"TIME", "KIND", "BUTLER", "CHANNEL", "REQUEST", "DELIVERY", "DETAIL"}) {
		t.Errorf("header %q", lines[0])
	}
	// Columns line up: each starts where its header does.
	for _, col := range []string{"KIND", "BUTLER", "CHANNEL", "REQUEST", "DELIVERY", "DETAIL"} {
		at := strings.Index(lines[0], col)
		for _, row := range lines[1:] {
			if row[at-2:at] != "  " || row[at] == ' ' {
				t.Errorf("column %s does not start at %d in %q", col, at, row)
			}
		}
	}
	for i, want := range [][]string{
		{"routed", "health", "telegram:tg_main", "a", "-", "send"},
		{"uncertain", "health", "telegram:tg_main", "a", "dlv_ka", "send;", "resent"},
		{"delivered", "health", "telegram:tg_main", "a", "dlv_ka", "-"},
	} {
		got := strings.Fields(lines[i+1])[2:] // after the date and the time
		if !slices.Equal(got, want) {
			t.Errorf("row %d: %q, want %q", i+1, got, want)
		}
	}

	out, _, err = f.log(t, "--kind", "failed")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "target_unavailable: 421 try later") {
		t.Errorf("a failure's class and reason are not shown:\n%s", out)
	}
	if n := strings.Count(out, "\n"); n != 3 || strings.ContainsRune(out, 0x1b) || !strings.Contains(out, `boom\n2026`) || !strings.Contains(out, `\x1b[2J`) {
		t.Errorf("a reason's control characters must be escaped, not forge rows or reach the terminal:\n%s", out)
	}

	out, _, err = f.log(t, "--request-id", "g")
	if err != nil || !strings.Contains(out, "not_found: no chat 42") || strings.Contains(out, "not_found: not_found") {
		t.Errorf("a reason that starts with its class: %v\n%s", err, out)
	}

	out, _, err = f.log(t, "--butler", "nobody")
	if err != nil || out != "No audit records.\n" {
		t.Errorf("nothing matching: %q, %v", out, err)
	}
}

func TestLogSince(t *testing.T) {
	f := newLogFleet(t)
	stored := func(seq uint64) time.Time {
		t.Helper()
		s, err := f.js.Stream(t.Context(), bus.StreamAudit)
		if err != nil {
			t.Fatal(err)
		}
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		return m.Time
	}
	f.write(t, audit.Record{Kind: audit.Routed, Butler: "health", Channel: "log:log", RequestID: "old"})
	old := stored(1)
	for !time.Now().After(old) { // the next record is stored strictly later
		time.Sleep(time.Millisecond)
	}
	f.write(t, audit.Record{Kind: audit.Routed, Butler: "health", Channel: "log:log", RequestID: "new"})
	newer := stored(2)

	tests := []struct {
		since string
		want  []string
	}{
		{"1h", []string{"routed/old", "routed/new"}},
		{"1d", []string{"routed/old", "routed/new"}},
		{old.Format(time.RFC3339Nano), []string{"routed/old", "routed/new"}},
		{newer.Format(time.RFC3339Nano), []string{"routed/new"}},
		{newer.In(time.FixedZone("", 5*3600)).Format(time.RFC3339Nano), []string{"routed/new"}},
		{time.Now().Add(time.Hour).Format(time.RFC3339), nil},
	}
	for _, tt := range tests {
		out, errOut, err := f.log(t, "--json", "--since", tt.since)
		if err != nil {
			t.Fatalf("--since %s: %v\n%s", tt.since, err, errOut)
		}
		if diff := cmp.Diff(tt.want, trail(records(t, out))); diff != "" {
			t.Errorf("--since %s (-want +got):\n%s", tt.since, diff)
		}
	}
	out, _, err := f.log(t, "--json", "--since", newer.Format(time.RFC3339Nano), "--request-id", "old")
	if err != nil || out != "" {
		t.Errorf("--since and --request-id combine: %q, %v", out, err)
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"10m", now.Add(-10 * time.Minute)},
		{"24h", now.Add(-24 * time.Hour)},
		{"0s", now},
		{"7d", now.AddDate(0, 0, -7)},
		{"2026-03-01T08:30:00Z", time.Date(2026, 3, 1, 8, 30, 0, 0, time.UTC)},
		{"2026-03-01T08:30:00+02:00", time.Date(2026, 3, 1, 6, 30, 0, 0, time.UTC)},
		{"2026-03-01", time.Date(2026, 3, 1, 0, 0, 0, 0, time.Local)},
	}
	for _, tt := range tests {
		got, err := parseSince(tt.in, now)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"yesterday", "-10m", "10", "2026-13-01", "7 d"} {
		if _, err := parseSince(bad, now); err == nil || !strings.Contains(err.Error(), "neither a duration") && !strings.Contains(err.Error(), "without a minus") {
			t.Errorf("parseSince(%q): %v, want an error saying what it takes", bad, err)
		}
	}
}

// TestLogEndsByItself: without --follow the read ends at the end of the
// stream, even while the fleet goes on writing.
func TestLogEndsByItself(t *testing.T) {
	f := newLogFleet(t)
	rec := func(i int) audit.Record {
		return audit.Record{Kind: audit.Routed, Butler: "health", Channel: "log:log", RequestID: fmt.Sprintf("r%03d", i)}
	}
	for i := range 50 {
		f.write(t, rec(i))
	}
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		for i := 50; i < 100; i++ {
			f.w.Write(context.Background(), rec(i))
		}
	}()
	out, errOut, err := f.log(t, "--json")
	<-writing
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	got := records(t, out)
	if len(got) < 50 || len(got) > 100 {
		t.Fatalf("%d records; want the 50 there when it began, and at most the 50 written since", len(got))
	}
	for i, r := range got {
		if r.RequestID != rec(i).RequestID {
			t.Fatalf("record %d is %s, want %s: the log is read in order, without gaps", i, r.RequestID, rec(i).RequestID)
		}
	}
}

// lines reads what a follow prints, line by line.
func lines(t *testing.T) (io.WriteCloser, func(what string) string) {
	t.Helper()
	pr, pw := io.Pipe()
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	t.Cleanup(func() { pr.Close() })
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("herald log --follow ended before printing %s", what)
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("herald log --follow printed no %s", what)
		}
		return ""
	}
	return pw, next
}

func TestLogFollow(t *testing.T) {
	f := newLogFleet(t)
	f.write(t,
		audit.Record{Kind: audit.Routed, Butler: "health", Channel: "log:log", RequestID: "h1"},
		audit.Record{Kind: audit.Routed, Butler: "health", Channel: "log:log", RequestID: "h2"},
		audit.Record{Kind: audit.Routed, Butler: "finance", Channel: "log:log", RequestID: "f1"},
		audit.Record{Kind: audit.Routed, Butler: "health", Channel: "log:log", RequestID: "h3"},
	)
	follow := func(args ...string) (next func(string) string, stop func() (stderr string, err error)) {
		ctx, cancel := context.WithCancel(t.Context())
		out, next := lines(t)
		var errOut bytes.Buffer
		done := make(chan error, 1)
		go func() {
			done <- runLog(ctx, append([]string{"--config", f.file, "--follow"}, args...), IO{Getenv: noEnv, Stdout: out, Stderr: &errOut})
			out.Close()
		}()
		return next, func() (string, error) {
			cancel()
			select {
			case err := <-done:
				return errOut.String(), err
			case <-time.After(30 * time.Second):
				t.Fatal("herald log --follow did not stop when interrupted")
			}
			return "", nil
		}
	}
	id := func(line string) string {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return r.RequestID
	}

	t.Run("history, then what comes", func(t *testing.T) {
		next, stop := follow("--json", "--butler", "health", "--limit", "2")
		for _, want := range []string{"h2", "h3"} {
			if got := id(next("history")); got != want {
				t.Fatalf("history: %s, want %s (the last 2 of health's)", got, want)
			}
		}
		f.write(t,
			audit.Record{Kind: audit.Routed, Butler: "finance", Channel: "log:log", RequestID: "f2"},
			audit.Record{Kind: audit.Delivered, Butler: "health", Channel: "log:log", RequestID: "h4", DeliveryID: "dlv_4"},
		)
		if got := id(next("new record")); got != "h4" {
			t.Errorf("after it started: %s, want h4 (finance's is filtered out)", got)
		}
		if errOut, err := stop(); err != nil {
			t.Errorf("interrupted follow: %v\n%s", err, errOut)
		}
	})

	t.Run("table, nothing yet", func(t *testing.T) {
		next, stop := follow("--request-id", "x")
		if h := next("header"); !strings.HasPrefix(h, "TIME") {
			t.Fatalf("a table being followed starts with its header once it has caught up, not %q", h)
		}
		f.write(t, audit.Record{Kind: audit.Failed, Butler: "health", Channel: "log:log", RequestID: "x", Class: "timeout", Reason: "slow"})
		if row := strings.Fields(next("row")); len(row) < 6 || row[2] != "failed" || row[5] != "x" {
			t.Errorf("row %q", row)
		}
		if errOut, err := stop(); err != nil {
			t.Errorf("interrupted follow: %v\n%s", err, errOut)
		}
	})
}

func TestLogErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in the error or on stderr
	}{
		{"unknown flag", []string{"--bogus"}, "Usage:"},
		{"an argument", []string{"health"}, "Usage:"},
		{"unknown kind", []string{"--kind", "deliverd"}, `--kind "deliverd": the kinds are routed, rejected, delivered, edited, failed, dropped, uncertain`},
		{"bad since", []string{"--since", "yesterday"}, "neither a duration (10m, 24h, 7d) nor a time"},
		{"bad channel", []string{"--channel", "telegram.tg"}, "give a channel type (telegram) or one integration (telegram:tg_main)"},
		{"bad limit", []string{"--limit", "-1"}, "--limit -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := runLog(t.Context(), tt.args, IO{Getenv: noEnv, Stdout: &out, Stderr: &errOut})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error()+errOut.String(), tt.want) {
				t.Errorf("error %q, stderr %q; want %q", err, errOut.String(), tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q", out.String())
			}
		})
	}
	if err := runLog(t.Context(), []string{"health"}, IO{Getenv: noEnv, Stdout: io.Discard, Stderr: io.Discard}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("an argument: %v, want the usage (exit 2)", err)
	}

	t.Run("NATS not reachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "nats://" + l.Addr().String()
		l.Close()
		env := func(k string) string { return map[string]string{"NATS_URL": url}[k] }
		err = runLog(t.Context(), []string{"--timeout", "300ms"}, IO{Getenv: env, Stdout: io.Discard, Stderr: io.Discard})
		if err == nil || !strings.Contains(err.Error(), "cannot reach NATS at "+url) {
			t.Errorf("%v; want it to name %s", err, url)
		}
	})

	t.Run("no audit stream", func(t *testing.T) {
		f := newLogFleet(t)
		if err := f.js.DeleteStream(t.Context(), bus.StreamAudit); err != nil {
			t.Fatal(err)
		}
		_, _, err := f.log(t)
		if err == nil || !strings.Contains(err.Error(), "no audit stream yet; start Herald once first") {
			t.Errorf("%v", err)
		}
	})
}

// runAuthNATS runs a real nats-server with JetStream under the
// authorization conf, which includes ./nats.conf for the listener and store.
func runAuthNATS(t *testing.T, conf []byte) string {
	t.Helper()
	dir := t.TempDir()
	base := fmt.Sprintf("listen: 127.0.0.1:-1\njetstream { store_dir: %q }\n", filepath.Join(dir, "js"))
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "auth.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}

// connAs connects as user, with the connection name (and inbox prefix) name.
func connAs(t *testing.T, url, user, password, name string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo(user, password), nats.Name(name), nats.CustomInboxPrefix("_INBOX."+name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// logAs runs `herald log --json args...` against url as user.
func logAs(t *testing.T, url, user, password string, args ...string) (string, error) {
	t.Helper()
	url = strings.Replace(url, "nats://", "nats://"+user+":"+password+"@", 1)
	env := func(k string) string { return map[string]string{"NATS_URL": url}[k] }
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := runLog(ctx, append([]string{"--json", "--timeout", "1s"}, args...), IO{Getenv: env, Stdout: &out, Stderr: io.Discard})
	if ctx.Err() != nil {
		t.Fatalf("herald log as %s did not end by itself", user)
	}
	return out.String(), err
}

// TestLogAsOperator: under the permissions `herald nats-auth` generates, the
// operator user reads the audit log, filters and all; a butler may not.
func TestLogAsOperator(t *testing.T) {
	url, pw := secureBus(t)
	w := &audit.Writer{JS: connAs(t, url, "switchboard", pw["switchboard"], natsauth.ConnSwitchboard), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, r := range sample {
		w.Write(t.Context(), r)
		w.Flush() // stored in the order written
	}
	stored(t, w.JS)
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{nil, trail(sample)},
		{[]string{"--kind", "routed"}, []string{"routed/a", "routed/b", "routed/d"}},
		{[]string{"--kind", "failed,uncertain", "--channel", "email"}, []string{"failed/b"}},
		{[]string{"--request-id", "a", "--limit", "1"}, []string{"delivered/a"}},
	} {
		out, err := logAs(t, url, "operator", pw["operator"], tt.args...)
		if err != nil {
			t.Fatalf("herald log %s as the operator: %v", strings.Join(tt.args, " "), err)
		}
		if diff := cmp.Diff(tt.want, trail(records(t, out))); diff != "" {
			t.Errorf("herald log %s as the operator (-want +got):\n%s", strings.Join(tt.args, " "), diff)
		}
	}
	if out, err := logAs(t, url, "butler-health", pw["butler-health"]); err == nil || out != "" {
		t.Errorf("a butler read the audit log: %q, %v", out, err)
	}
}

// TestLogPendingNeverComes: a user that may make a consumer on the audit
// stream but not pull from it gets an error naming the cause, not a read
// that waits for the server to drop the consumer.
func TestLogPendingNeverComes(t *testing.T) {
	url := runAuthNATS(t, []byte(`include ./nats.conf
accounts {
  HERALD {
    jetstream: enabled
    users: [
      { user: admin, password: admin }
      { user: reader, password: reader, permissions: {
          publish: { allow: ["$JS.API.CONSUMER.CREATE.HERALD_AUDIT.>", "$JS.API.CONSUMER.INFO.HERALD_AUDIT.*", "$JS.API.CONSUMER.DELETE.HERALD_AUDIT.*"] }
          subscribe: { allow: ["_INBOX.herald-cli.>"] } } }
    ]
  }
}
`))
	admin := connAs(t, url, "admin", "admin", "admin")
	if err := bus.EnsureTopology(t.Context(), admin, bus.Topology{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	w := &audit.Writer{JS: admin}
	w.Write(t.Context(), sample[0])
	w.Flush()
	stored(t, admin)
	out, err := logAs(t, url, "reader", "reader")
	if err == nil || !strings.Contains(err.Error(), "with 1 pending; under `herald nats-auth` permissions, connect as the operator user") || out != "" {
		t.Errorf("%q, %v", out, err)
	}
}

// TestDeadAsOperator: under the generated permissions the operator's herald
// dead ls lists what the services dead-lettered (it once said "No dead
// letters." because it could not pull from the stream).
func TestDeadAsOperator(t *testing.T) {
	url, pw := secureBus(t)
	sb := connAs(t, url, "switchboard", pw["switchboard"], natsauth.ConnSwitchboard)
	if _, err := sb.Publish(t.Context(), bus.DeadSubject(bus.StreamRoute, "herald.route.health"), []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	url = strings.Replace(url, "nats://", "nats://operator:"+pw["operator"]+"@", 1)
	var out, errs bytes.Buffer
	err := runDead(t.Context(), []string{"ls", "--timeout", "20s"}, IO{Getenv: func(k string) string { return map[string]string{"NATS_URL": url}[k] }, Stdout: &out, Stderr: &errs})
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); err != nil || len(lines) != 2 || !strings.HasPrefix(strings.TrimSpace(lines[1]), "1 ") {
		t.Fatalf("herald dead ls as the operator: %v\n%s%s", err, out.String(), errs.String())
	}
}

// secureBus is a nats-server with the permissions herald nats-auth derives
// for a fleet of one butler, health, with its topology set up; pw are the
// users' passwords.
func secureBus(t *testing.T) (url string, pw map[string]string) {
	t.Helper()
	cfg, err := config.Parse([]byte("butlers:\n  - { name: health }\n"))
	if err != nil {
		t.Fatal(err)
	}
	pw = map[string]string{}
	for _, u := range natsauth.Users(cfg) {
		pw[u.Name] = "pw-" + strings.ReplaceAll(u.Name, "-", "")
		t.Setenv(u.PasswordEnv, pw[u.Name])
	}
	url = runAuthNATS(t, natsauth.Render(cfg))
	setup := connAs(t, url, "setup", pw["setup"], natsauth.ConnCLI)
	if err := bus.EnsureTopology(t.Context(), setup, bus.Topology{Replicas: 1, Repair: true, Butlers: cfg.ButlerNames()}); err != nil {
		t.Fatal(err)
	}
	return url, pw
}

// stored waits until JetStream has acked every audit record js published
// (the writer does not wait for them).
func stored(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("audit records not stored within 10s")
	}
}

// TestLogTrailInTheOrderItHappened: a fast failure's record can be stored
// before its route's (two processes write them); a request's trail shows
// the route first all the same.
func TestLogTrailInTheOrderItHappened(t *testing.T) {
	f := newLogFleet(t)
	f.write(t,
		audit.Record{Kind: audit.Failed, Butler: "health", Channel: "telegram:tg_broken", RequestID: "x", Key: "kx", Class: "not_found", Reason: "cannot be used"},
		audit.Record{Kind: audit.Routed, Butler: "health", Channel: "telegram:tg_broken", Intent: "send", RequestID: "x", Key: "kx"},
	)
	for _, args := range [][]string{{"--request-id", "x"}, {"--delivery-id", "dlv_kx"}} {
		out, errOut, err := f.log(t, append([]string{"--json"}, args...)...)
		if err != nil {
			t.Fatalf("herald log: %v\n%s", err, errOut)
		}
		if got := trail(records(t, out)); !slices.Equal(got, []string{"routed/x", "failed/x"}) {
			t.Errorf("herald log %v: %v, want routed then failed", args, got)
		}
	}
	if out, _, _ := f.log(t, "--json"); !slices.Equal(trail(records(t, out)), []string{"failed/x", "routed/x"}) {
		t.Errorf("the whole log is not in the stream's order")
	}
}
