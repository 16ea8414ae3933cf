package herald

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
)

const logUsage = `Usage:
  herald log [--config FILE] [--butler NAME] [--channel CHANNEL] [--kind KINDS]
             [--request-id ID] [--delivery-id ID] [--since WHEN] [--limit N] [--json] [--follow]

Prints the audit log (HERALD_AUDIT, kept 30 days): every notify routed,
rejected, delivered, failed or uncertain, held for quiet hours or released
in their digest, every inbound message routed or turned away, and every
configuration reload a process applied. Without filters it prints every
record kept, oldest first, and ends; filters combine.

Examples:
  herald log --since 10m
  herald log --kind failed,uncertain --since 24h
  herald log --butler assistant --channel log --limit 20
  herald log --request-id 01a21981-228c-7e81-a7f7-4dcc8f9d3c50   # one notify's whole trail (notify prints its request_id)
  herald log --delivery-id dlv_53365459a4ea06ec14c0041e1b        # the same by its delivery_id, every retry with its key
  herald log --follow --since 0s                                 # only what happens from now on; Ctrl-C stops
`

// logKinds are the kinds of audit records, as pkg/audit writes them.
var logKinds = []string{audit.Routed, audit.Rejected, audit.Delivered, audit.Edited, audit.Failed, audit.Dropped, audit.Uncertain, audit.Expired, audit.AutoAllowed, audit.ConfigReloaded, audit.Held, audit.Released, audit.RunStarted, audit.RunEnded}

// logIdle is how long a read that has not yet caught up waits for a record
// before it asks the server whether any are left (they may have expired).
// Records pending that never come (a NATS user allowed to make a consumer
// but not to pull from it) end the read with an error after --timeout.
const logIdle = 2 * time.Second

// runLog is `herald log`: the audit stream read through an ordered consumer
// of its own. The kind and channel type are in each record's subject
// (herald.audit.<kind>.<type>), so the server filters on those; butler,
// integration and request id are matched here.
func runLog(ctx context.Context, args []string, o IO) error {
	fs := commandFlags("log", logUsage, o)
	path := fs.String("config", "", "herald.yaml (default $HERALD_CONFIG), to find NATS")
	var q logQuery
	fs.StringVar(&q.butler, "butler", "", "records of this butler")
	channel := fs.String("channel", "", "a channel type (telegram) or one integration (telegram:tg_main)")
	kind := fs.String("kind", "", "routed, rejected, delivered, failed, dropped, uncertain, expired (a permission prompt nobody answered), auto_allowed (answered by a session grant), config_reloaded, held (kept for quiet hours), released (sent in their digest), run_started, run_ended (Claude Code runs a butler started, run:); several separated by commas")
	fs.StringVar(&q.requestID, "request-id", "", "one request's whole trail")
	fs.StringVar(&q.deliveryID, "delivery-id", "", "one delivery's whole trail (dlv_…, as notify answers it): every request with its idempotency key, a retry's too")
	since := fs.String("since", "", "a duration back from now (10m, 24h, 7d) or a time (RFC 3339 2026-01-02T15:04:05Z, or a date 2026-01-02 meaning local midnight)")
	limit := fs.Int("limit", 0, "only the last N matching records (0: all)")
	asJSON := fs.Bool("json", false, "one JSON record per line, as stored")
	follow := fs.Bool("follow", false, "keep printing new records until interrupted (Ctrl-C)")
	timeout := timeoutFlag(fs, "then for each of its answers: a read with records pending and none coming for that long fails")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return badUsage(fs)
	}
	if err := q.setKinds(*kind); err != nil {
		return err
	}
	if err := q.setChannel(*channel); err != nil {
		return err
	}
	if *since != "" {
		if q.since, err = parseSince(*since, time.Now()); err != nil {
			return err
		}
	}
	if *limit < 0 {
		return fmt.Errorf("--limit %d: give a number of records, or 0 for all", *limit)
	}

	js, url, closeBus, err := connectWithin(ctx, *path, *timeout, o)
	if err != nil {
		return err
	}
	defer closeBus()
	setup, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cons, remove, err := auditConsumer(ctx, setup, js, redactURL(url), &q, *follow, *timeout)
	if err != nil {
		return err
	}
	defer remove()
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("reading the audit log: %w", err)
	}
	defer it.Stop()
	// Interrupting a follow (Ctrl-C) must also end a wait for NATS to return.
	defer context.AfterFunc(ctx, it.Stop)()

	trail := q.requestID != "" || q.deliveryID != ""
	p := &logPrinter{w: bufio.NewWriter(o.Stdout), json: *asJSON, limit: *limit, holding: *limit > 0 || trail, trail: trail}
	lr := logReader{q: &q, cons: cons, it: it, p: p, follow: *follow, timeout: *timeout, url: redactURL(url), stderr: o.Stderr}
	err = lr.read(ctx)
	if err == nil {
		p.end()
	}
	if ferr := p.w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// auditConsumer is an ordered consumer of the audit stream for q, from
// q.since; without follow it fails rather than waits when NATS goes away.
// remove deletes it (ordered consumers are ephemeral; deleting ours beats
// leaving it to the server's inactivity timer).
func auditConsumer(ctx, setup context.Context, js jetstream.JetStream, url string, q *logQuery, follow bool, timeout time.Duration) (cons jetstream.Consumer, remove func(), err error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: q.subjects()}
	if !q.since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &q.since
	}
	if !follow {
		// A read that ends should end with an error if NATS goes away, not
		// wait for it to come back.
		cfg.MaxResetAttempts = 3
	}
	cons, err = js.OrderedConsumer(setup, bus.StreamAudit, cfg)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, nil, fmt.Errorf("NATS at %s has no audit stream yet; start Herald once first", url)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, nil, fmt.Errorf("reading the audit log at %s: JetStream did not answer in %s; under `herald nats-auth` permissions, connect as the operator user: %w", url, timeout, err)
	case err != nil:
		return nil, nil, fmt.Errorf("reading the audit log at %s: %w", url, err)
	}
	return cons, func() {
		if info := cons.CachedInfo(); info != nil {
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = js.DeleteConsumer(c, bus.StreamAudit, info.Name)
			cancel()
		}
	}, nil
}

// logReader reads the audit stream to its end (as it was when the read
// began, or later), then with follow goes on until ctx is done.
type logReader struct {
	q       *logQuery
	cons    jetstream.Consumer
	it      jetstream.MessagesContext
	p       *logPrinter
	follow  bool
	timeout time.Duration
	url     string
	stderr  io.Writer
}

func (lr *logReader) read(ctx context.Context) error {
	// The consumer counted the records it has to give when it was made;
	// each record says how many remain after it.
	caughtUp := lr.cons.CachedInfo().NumPending == 0
	if caughtUp && lr.caughtUp() {
		return nil
	}
	wait := min(logIdle, lr.timeout)
	var idle time.Duration
	for {
		next, cancelNext := ctx, context.CancelFunc(func() {})
		if !caughtUp {
			next, cancelNext = context.WithTimeout(ctx, wait)
		}
		m, err := lr.it.Next(jetstream.NextContext(next))
		cancelNext()
		switch {
		case err == nil:
			idle = 0
		case ctx.Err() != nil:
			if lr.follow {
				return nil // interrupted, as a follow ends
			}
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Nothing came though records were pending: ask whether any
			// are left (they expire after 30 days).
			c, cancel := context.WithTimeout(ctx, lr.timeout)
			info, err := lr.cons.Info(c)
			cancel()
			if err != nil {
				return fmt.Errorf("reading the audit log at %s: %w", lr.url, err)
			}
			idle += wait
			switch {
			case info.NumPending == 0:
				caughtUp = true
				if lr.caughtUp() {
					return nil
				}
			case idle >= lr.timeout:
				return fmt.Errorf("reading the audit log at %s: no record came in %s with %d pending; under `herald nats-auth` permissions, connect as the operator user", lr.url, idle, info.NumPending)
			}
			continue
		default:
			return fmt.Errorf("reading the audit log at %s: %w", lr.url, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("reading the audit log: %w", err)
		}
		// One stored message holds one record, or several written together.
		for _, line := range audit.Lines(m.Data()) {
			var r audit.Record
			if err := json.Unmarshal(line, &r); err != nil {
				// Only the services may publish here; still, one broken
				// record must not hide the rest.
				fmt.Fprintf(lr.stderr, "herald log: skipped record %d on %s: not an audit record (%s)\n", meta.Sequence.Stream, escapeControl(m.Subject()), escapeControl(err.Error()))
			} else if lr.q.match(r) {
				lr.p.add(logEntry{r, line, audit.Forged(m.Subject(), r)})
			}
		}
		switch {
		case caughtUp:
			if err := lr.p.w.Flush(); err != nil {
				return err
			}
		case meta.NumPending == 0:
			caughtUp = true
			if lr.caughtUp() {
				return nil
			}
		}
	}
}

// caughtUp is the read reaching the end of the stream: what the limit held
// back is printed, and the read ends unless it follows.
func (lr *logReader) caughtUp() (done bool) {
	lr.p.release(lr.follow)
	if !lr.follow {
		return true
	}
	return lr.p.w.Flush() != nil
}

// logQuery is what `herald log` was asked for.
type logQuery struct {
	butler    string
	kinds     []string
	chanType  string // the subject token: a channel type
	chanFull  string // "type:id", matched whole
	requestID string
	// deliveryID matches the records that name it, and those whose
	// idempotency key it is derived from (envelope.DeliveryID).
	deliveryID string
	since      time.Time
}

func (q *logQuery) setKinds(s string) error {
	if s == "" {
		return nil
	}
	for k := range strings.SplitSeq(s, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(logKinds, k) {
			return fmt.Errorf("--kind %q: the kinds are %s", k, strings.Join(logKinds, ", "))
		}
		if !slices.Contains(q.kinds, k) {
			q.kinds = append(q.kinds, k)
		}
	}
	return nil
}

// channelType is a channel type as it stands in an audit subject.
var channelType = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

func (q *logQuery) setChannel(s string) error {
	if s == "" {
		return nil
	}
	typ, id, full := strings.Cut(s, ":")
	if !channelType.MatchString(typ) || (full && id == "") {
		return fmt.Errorf("--channel %q: give a channel type (telegram) or one integration (telegram:tg_main)", s)
	}
	q.chanType = typ
	if full {
		q.chanFull = s
	}
	return nil
}

// subjects are the server-side filters: herald.audit.<kind>.<channel type>.
// None reads the whole stream.
func (q *logQuery) subjects() []string {
	if len(q.kinds) == 0 && q.chanType == "" {
		return nil
	}
	// Without a channel, a kind's records on a butler's own subject
	// (herald.audit.<kind>.butler.<name>) too.
	typ := q.chanType
	if typ == "" {
		typ = ">"
	}
	if len(q.kinds) == 0 {
		return []string{bus.AuditSubject("*", typ)}
	}
	out := make([]string, len(q.kinds))
	for i, k := range q.kinds {
		out[i] = bus.AuditSubject(k, typ)
	}
	return out
}

// match applies the filters the subject cannot carry.
func (q *logQuery) match(r audit.Record) bool {
	return (q.butler == "" || r.Butler == q.butler) &&
		(q.chanFull == "" || r.Channel == q.chanFull) &&
		(q.requestID == "" || r.RequestID == q.requestID) &&
		(q.deliveryID == "" || r.DeliveryID == q.deliveryID || r.Key != "" && envelope.DeliveryID(r.Key) == q.deliveryID)
}

var daysBack = regexp.MustCompile(`^([0-9]+)d$`)

// parseSince reads --since: a Go duration back from now (plus whole days,
// "7d", which operators type and time.ParseDuration refuses), an RFC 3339
// time, or a date meaning local midnight.
func parseSince(s string, now time.Time) (time.Time, error) {
	if m := daysBack.FindStringSubmatch(s); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n <= 100*365 {
			return now.AddDate(0, 0, -n), nil // calendar days, across a clock change too
		}
	}
	if d, err := config.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %q: give how far back, without a minus sign", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q is neither a duration (10m, 24h, 7d) nor a time (2026-01-02T15:04:05Z, or 2026-01-02)", s)
}

// logPrinter writes matching records as a table or as JSON lines. With a
// limit it holds back the last records until the read has caught up.
type logPrinter struct {
	w       *bufio.Writer
	json    bool
	limit   int
	holding bool
	// trail: the records of one request or delivery, held until the read
	// caught up and then printed in the order they happened (trailOrder).
	trail  bool
	held   []logEntry
	headed bool
}

type logEntry struct {
	r   audit.Record
	raw []byte
	// forged says why the record is not what it claims (audit.Forged):
	// it is shown as such, never as fact.
	forged string
}

const logRow = "%-19s  %-9s  %-12s  %-20s  %-36s  %-30s  %s\n"

func (p *logPrinter) add(e logEntry) {
	if !p.holding {
		p.print(e)
		return
	}
	if len(p.held) == p.limit && !p.trail {
		p.held = slices.Delete(p.held, 0, 1)
	}
	e.raw = slices.Clone(e.raw)
	p.held = append(p.held, e)
}

// trailOrder is the order records of one request happened in, which the
// stream may not keep: the switchboard and the messenger write theirs
// each, and a fast failure's record can be stored before the route's. The
// switchboard's word (routed, rejected, held) comes before the outcome's;
// within each, the stream's order.
func trailOrder(held []logEntry) {
	stage := func(kind string) int {
		switch kind {
		case audit.Routed, audit.Rejected, audit.Held, audit.Dropped:
			return 0
		}
		return 1
	}
	slices.SortStableFunc(held, func(a, b logEntry) int { return stage(a.r.Kind) - stage(b.r.Kind) })
}

// release prints what the limit held back; from here on every record is
// printed as it comes. A table being followed gets its header now, so the
// wait for records shows what will come.
func (p *logPrinter) release(follow bool) {
	if p.trail {
		trailOrder(p.held)
		if p.limit > 0 && len(p.held) > p.limit {
			p.held = p.held[len(p.held)-p.limit:]
		}
		p.trail = false
	}
	for _, e := range p.held {
		p.print(e)
	}
	p.held, p.holding = nil, false
	if follow && !p.json {
		p.header()
	}
}

func (p *logPrinter) header() {
	if !p.headed {
		fmt.Fprintf(p.w, logRow, "TIME", "KIND", "BUTLER", "CHANNEL", "REQUEST", "DELIVERY", "DETAIL")
		p.headed = true
	}
}

// print writes one record: as stored (JSON, with "forged" added to one
// that is not what it claims), or as a table row, where a forged record's
// kind is FORGED and its detail says why before what it claims.
func (p *logPrinter) print(e logEntry) {
	r := e.r
	if p.json {
		var b bytes.Buffer
		_ = json.Compact(&b, e.raw) // raw was decoded, so it is JSON
		if e.forged != "" {
			why, _ := json.Marshal(e.forged)
			b.Truncate(b.Len() - 1) // its closing brace
			b.WriteString(`,"forged":` + string(why) + "}")
		}
		b.WriteByte('\n')
		p.w.Write(jsonControls(b.Bytes()))
		return
	}
	p.header()
	kind, detail := cell(r.Kind), logDetail(r)
	if e.forged != "" {
		kind, detail = "FORGED", cell("not what it claims ("+e.forged+"): ")+detail
	}
	fmt.Fprintf(p.w, logRow, r.Time.Local().Format(time.DateTime), kind, cell(r.Butler), cell(r.Channel),
		cell(r.RequestID), cell(r.DeliveryID), detail)
}

// jsonControls escapes in JSON what encoding/json leaves as it is but a
// terminal may obey: DEL and the C1 controls (U+009B is CSI), which can only
// stand inside strings there. So --json piped to a terminal is safe too.
func jsonControls(b []byte) []byte {
	if !bytes.ContainsFunc(b, func(r rune) bool { return r == 0x7f || r >= 0x80 && r <= 0x9f }) {
		return b
	}
	var out bytes.Buffer
	for _, r := range string(b) {
		if r == 0x7f || r >= 0x80 && r <= 0x9f {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	return out.Bytes()
}

// end finishes a read that found its end: a table with nothing in it says so.
func (p *logPrinter) end() {
	if !p.json && !p.headed {
		fmt.Fprintln(p.w, "No audit records.")
	}
}

// logDetail is the short why of a record: its intent, recipient, class and
// reason.
func logDetail(r audit.Record) string {
	var parts []string
	if r.Intent != "" {
		parts = append(parts, r.Intent)
	}
	if r.Recipient != "" {
		parts = append(parts, "to "+r.Recipient)
	}
	if r.CallerKey != "" {
		parts = append(parts, "key "+r.CallerKey)
	}
	if r.Grant != "" {
		parts = append(parts, "grant "+r.Grant)
	}
	if r.Process != "" {
		parts = append(parts, r.Process+": "+strings.Join(r.Changes, ", "))
	}
	switch {
	case r.Class != "" && r.Reason != "":
		// A reason that already starts with its class (an error's text)
		// is not prefixed twice.
		parts = append(parts, r.Class+": "+strings.TrimPrefix(r.Reason, r.Class+": "))
	case r.Class != "" || r.Reason != "":
		parts = append(parts, r.Class+r.Reason)
	}
	d := cell(strings.Join(parts, "; "))
	if utf8.RuneCountInString(d) > 100 {
		d = string([]rune(d)[:97]) + "..."
	}
	return d
}

// cell is one table value: "-" for none, control characters escaped so a
// stored value cannot forge rows or drive the terminal.
func cell(s string) string { return dash(escapeControl(s)) }

// escapeControl shows what could drive a terminal as Go escapes: control
// characters (C0 such as ESC, BEL and CR; DEL; C1) as \x1b, \a, \r,
// \u009b, and bytes that are not UTF-8 as \x9b (a lone 0x9b is CSI to a
// terminal reading 8-bit controls; NATS subjects may hold any byte). So
// nothing printed from the bus can move the cursor, set the title or forge
// a line.
func escapeControl(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
