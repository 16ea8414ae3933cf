// Package quiet is the switchboard's quiet hours: a note sent through an
// integration with quiet_hours while its zone's clock is in them waits in
// herald_held, unless its urgency is pass or above or it asks for an answer
// now; when the hours end, the notes held for one chat go out as one digest.
//
//   - New, Feature: the core.Feature the switchboard runs; Outbound holds a
//     note, Tick (every core.TickEvery) sends the digests of hours that ended.
//
// Everything is in the bucket, not in memory, so a switchboard killed at any
// point picks up where it was. docs/attention.md, "Quiet hours and digests",
// says what is held and how a digest goes out once.
package quiet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/channel/spec"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/markdown"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/switchboard/core"
)

// Feature is the quiet hours.
type Feature struct {
	env *core.Env
	// held is herald_held, opened at the first Tick that can.
	held jetstream.KeyValue
}

// New is the quiet hours of env.
func New(_ context.Context, env *core.Env) (core.Feature, error) { return &Feature{env: env}, nil }

// Name is the quiet hours' name; they follow no delivery.
func (f *Feature) Name() string { return "quiet" }

// Outbound holds a notify that may wait for the end of quiet hours
// (holdQuiet): taken, it goes no further.
func (f *Feature) Outbound(ctx context.Context, d *core.Outbound) (bool, error) {
	return f.holdQuiet(ctx, d.Butler, d.Route, d.Integration, d.Key, d.Followed())
}

// Outcome does nothing: a digest is followed by its record, not its outcome.
func (f *Feature) Outcome(context.Context, *core.Outcome) error { return nil }

// Inbound does nothing: quiet hours hold what goes out only.
func (f *Feature) Inbound(context.Context, *core.Inbound) (bool, error) { return false, nil }

// quietNow is the clock of quiet hours: now, moved by quietShift, which
// tests set to stand in the middle of the night.
func quietNow() time.Time { return time.Now().Add(time.Duration(quietShift.Load())) }

var quietShift atomic.Int64

// heldNote is one note held for quiet hours, kept in herald_held under
// n.<until>.<integration>.<chat>.<butler>.<key> (noteKey): <until> is the
// Unix second the hours end, so a scan reads only the notes that are due;
// <chat> is where the digest goes, <key> the note's idempotency key.
type heldNote struct {
	Butler  string `json:"butler"`
	Channel string `json:"channel"`
	// To is where the digest goes: the notify's recipient, or the
	// integration's default.
	To        string `json:"to,omitempty"`
	RequestID string `json:"request_id"`
	// Key is the note's idempotency key; CallerKey and Args the butler's
	// idempotency_key and what it asked for, for the ledger.
	Key       string    `json:"key"`
	CallerKey string    `json:"caller_key,omitempty"`
	Args      string    `json:"args,omitempty"`
	Message   string    `json:"message"`
	Urgency   string    `json:"urgency,omitempty"`
	HeldAt    time.Time `json:"held_at"`
	Until     time.Time `json:"until"`
	// Window and TZ are the hours that held it ("22:00–07:00 Europe/Berlin").
	Window string `json:"window"`
	TZ     string `json:"tz"`
	// Audited says its held record is stored.
	Audited bool `json:"audited,omitempty"`
}

// digestRecord is one digest, kept under d.<until>.<integration>.<chat>.<id>:
// its notes, and once planned its parts with their idempotency keys, fixed
// before the first is published so that a switchboard killed midway
// publishes the same parts again. It is deleted last, after its notes.
type digestRecord struct {
	Notes []string     `json:"notes"`
	Parts []digestPart `json:"parts,omitempty"`
	// Sent: every part was published; what is left is releasing the notes.
	Sent bool `json:"sent,omitempty"`
}

// digestPart is one message of a digest: the notes it holds, and the
// request_id and idempotency_key it is published with, every time.
type digestPart struct {
	RequestID string   `json:"request_id"`
	Key       string   `json:"key"`
	Notes     []string `json:"notes"`
}

// holdable reports whether n may wait for the end of quiet hours: a new
// message (a reply or reaction answers someone who just wrote, so it goes
// at once), with no buttons to press, no thread to claim and no
// acknowledgement to wait for.
func holdable(n *envelope.Notify) bool {
	d := n.Delivery
	return (d.Intent == envelope.IntentSend || d.Intent == "") && len(d.Actions) == 0 && !d.ClaimThread &&
		d.AckWithin == "" // a note that must be acknowledged escalates on its own clock
}

// holdQuiet holds n, routed through it, if its quiet hours are on and n
// may wait (interactive: it offers a claim or carries a prompt's or a
// question's buttons), and answers the butler so. It reports whether it
// held it; a note it holds goes no further.
func (f *Feature) holdQuiet(ctx context.Context, butler string, r *envelope.Route, it *config.Integration, key string, interactive bool) (bool, error) {
	n := r.Notify()
	q := it.QuietHours
	if q == nil || interactive || !holdable(n) || q.Passes(n.Delivery.Urgency) {
		return false, nil
	}
	now := quietNow()
	until, quiet := q.Quiet(now)
	if !quiet {
		return false, nil
	}
	// The same notify after it went out (in a digest, or before the hours)
	// is the messenger's to answer from its record, not a note to hold.
	switch rec, err := f.env.Ledger.Get(ctx, butler, key); {
	case err != nil:
		return false, err
	case rec != nil && rec.Final():
		return false, nil
	}
	to := n.Delivery.Recipient
	if to == "" {
		to = it.DefaultRecipient()
	}
	note := heldNote{
		Butler: butler, Channel: it.Channel(), To: to, RequestID: r.RequestContext.RequestID,
		Key: key, CallerKey: n.IdempotencyKey, Message: n.Delivery.Message, Urgency: n.Delivery.Urgency,
		HeldAt: now.UTC(), Until: until.UTC(), Window: q.Window(), TZ: q.TZ,
	}
	if n.IdempotencyKey != "" {
		note.Args = n.ArgsDigest()
	}
	b, err := json.Marshal(note)
	if err != nil {
		return false, fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	local := until.In(q.Location())
	kv, k, stored := bus.NewDirectKV(f.env.JS, bus.BucketHeld), noteKey(note), note
	rev, err := kv.Create(ctx, k, b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// This note again (a redelivery, a repeat): held once already.
		stored, rev, err = heldUnaudited(ctx, kv, k)
	} else if err == nil {
		f.env.Log.InfoContext(ctx, "held for quiet hours", "butler", butler, "channel", it.Channel(), "request_id", note.RequestID, "until", until)
	}
	if err != nil {
		return false, fmt.Errorf("%w: holding a note for quiet hours: %w", envelope.ErrTargetUnavailable, err)
	}
	if rev != 0 {
		// Audited once stored, then marked so: a switchboard killed in
		// between leaves the mark unset, and the redelivered route audits
		// it then.
		confirms := &bus.Confirms{}
		f.env.Audit.Write(bus.WithConfirms(ctx, confirms), audit.Record{Kind: audit.Held, Butler: butler, Channel: it.Channel(), Intent: envelope.IntentSend, Recipient: n.Delivery.Recipient,
			RequestID: stored.RequestID, Key: key, CallerKey: stored.CallerKey, Reason: "until " + local.Format("15:04") + " " + q.TZ + " (quiet hours " + q.From + "–" + q.To + ")"})
		if err := confirms.Wait(bus.ConfirmWait); err != nil {
			return false, err
		}
		stored.Audited = true
		if b, err = json.Marshal(stored); err == nil {
			_, err = kv.Update(ctx, k, b, rev)
		}
		if err != nil {
			f.env.Log.WarnContext(ctx, "a held note's audit record is stored but not marked; its next repeat is audited again", "request_id", stored.RequestID, "err", err)
		}
	}
	h := envelope.HeldResult{Channel: it.Channel(), Until: local.Format(time.RFC3339), TZ: q.TZ, Pass: q.PassUrgency()}
	return true, f.env.Settle(ctx, butler, note.RequestID, it.Channel(), envelope.AnswerHeld(r, h))
}

// heldUnaudited reads the note held at k, and its revision if its held
// record is not marked stored (0 if it is).
func heldUnaudited(ctx context.Context, kv *bus.DirectKV, k string) (heldNote, uint64, error) {
	var n heldNote
	e, err := kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return n, 0, nil // released meanwhile, audited then
	}
	if err != nil {
		return n, 0, err
	}
	if err := json.Unmarshal(e.Value(), &n); err != nil {
		return n, 0, err
	}
	if n.Audited {
		return n, 0, nil
	}
	return n, e.Revision(), nil
}

// noteKey is where note is kept in herald_held.
func noteKey(n heldNote) string {
	_, id, _ := strings.Cut(n.Channel, ":")
	return "n." + digestGroup(n.Until, id, n.To) + "." + n.Butler + "." + bus.KeyToken(n.Key)
}

// digestGroup is the part of a key that names one digest's chat and time:
// "<until>.<integration>.<chat>".
func digestGroup(until time.Time, integration, to string) string {
	return strconv.FormatInt(until.Unix(), 10) + "." + integration + "." + bus.KeyToken(to)
}

// Tick sends the digests of quiet hours that ended.
func (f *Feature) Tick(ctx context.Context, _ time.Time) {
	if f.held == nil {
		kv, err := f.env.JS.KeyValue(ctx, bus.BucketHeld)
		if err != nil {
			if ctx.Err() == nil {
				f.env.Log.WarnContext(ctx, "opening the notes held for quiet hours", "bucket", bus.BucketHeld, "err", err)
			}
			return
		}
		f.held = kv
	}
	if err := f.flushDue(ctx, f.held, quietNow()); err != nil && ctx.Err() == nil {
		f.env.Log.WarnContext(ctx, "sending the digests of quiet hours; trying again", "err", err)
	}
}

// flushDue finishes every digest on its way, then starts one for each chat
// whose notes are due at now.
func (f *Feature) flushDue(ctx context.Context, kv jetstream.KeyValue, now time.Time) error {
	keys, err := heldKeys(ctx, kv)
	if err != nil {
		return err
	}
	var digests []string
	due := map[string][]string{} // digest group -> its notes' keys
	for _, k := range keys {
		parts := strings.Split(k, ".")
		switch {
		case parts[0] == "d" && len(parts) == 5:
			digests = append(digests, k)
		case parts[0] == "n" && len(parts) == 6:
			sec, err := strconv.ParseInt(parts[1], 10, 64)
			if err == nil && !time.Unix(sec, 0).After(now) {
				g := strings.Join(parts[1:4], ".")
				due[g] = append(due[g], k)
			}
		}
	}
	var errs []error
	busy := map[string]bool{} // groups with a digest on its way
	for _, d := range digests {
		busy[strings.Join(strings.Split(d, ".")[1:4], ".")] = true
		if err := f.sendDigest(ctx, kv, d); err != nil {
			errs = append(errs, err)
		}
	}
	for g, notes := range due {
		if busy[g] {
			// Its notes are that digest's, or due with the next scan.
			continue
		}
		d, err := startDigest(ctx, kv, g, notes)
		if err == nil {
			err = f.sendDigest(ctx, kv, d)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startDigest records the digest of notes, the due notes of digest group
// g, and returns its key. Named by its notes, it is the same record
// whichever switchboard starts it.
func startDigest(ctx context.Context, kv jetstream.KeyValue, g string, notes []string) (string, error) {
	notes = slices.Sorted(slices.Values(notes))
	sum := sha256.Sum256([]byte(strings.Join(notes, "\n")))
	d := "d." + g + "." + hex.EncodeToString(sum[:8])
	b, err := json.Marshal(digestRecord{Notes: notes})
	if err != nil {
		return "", err
	}
	if _, err := kv.Create(ctx, d, b); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return "", fmt.Errorf("starting digest %s: %w", d, err)
	}
	return d, nil
}

// heldKeys lists the keys of herald_held.
func heldKeys(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
	l, err := kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", bus.BucketHeld, err)
	}
	defer func() { _ = l.Stop() }()
	var out []string
	for k := range l.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// sendDigest carries digest d forward from where it is: plans its parts,
// publishes them, releases its notes, and deletes it.
func (f *Feature) sendDigest(ctx context.Context, kv jetstream.KeyValue, d string) error {
	rec, rev, notes, err := f.loadDigest(ctx, kv, d)
	if err != nil || rec == nil {
		return err
	}
	if !rec.Sent {
		confirms := &bus.Confirms{}
		for i := range rec.Parts {
			if err := f.publishDigest(bus.WithConfirms(ctx, confirms), *rec, i, notes); err != nil {
				return fmt.Errorf("sending digest %s part %d: %w", d, i+1, err)
			}
		}
		if err := confirms.Wait(bus.ConfirmWait); err != nil {
			return fmt.Errorf("sending digest %s: %w", d, err)
		}
		rec.Sent = true
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if _, err = kv.Update(ctx, d, b, rev); err != nil {
			return fmt.Errorf("marking digest %s sent: %w", d, err)
		}
	}
	for _, p := range rec.Parts {
		for _, k := range p.Notes {
			n, ok := notes[k]
			if !ok {
				continue
			}
			confirms := &bus.Confirms{}
			if err := f.release(bus.WithConfirms(ctx, confirms), n, p); err != nil {
				return err
			}
			if err := confirms.Wait(bus.ConfirmWait); err != nil {
				return fmt.Errorf("releasing held note %s: %w", k, err)
			}
			if err := kv.Delete(ctx, k); err != nil {
				return fmt.Errorf("releasing held note %s: %w", k, err)
			}
		}
	}
	return kv.Delete(ctx, d)
}

// loadDigest reads digest d and the notes it still holds and, the first
// time, plans its parts and records them. A nil record: nothing is left
// to do.
func (f *Feature) loadDigest(ctx context.Context, kv jetstream.KeyValue, d string) (*digestRecord, uint64, map[string]heldNote, error) {
	e, err := kv.Get(ctx, d)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil, nil // finished meanwhile (another switchboard)
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("reading digest %s: %w", d, err)
	}
	var rec digestRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		f.env.Log.ErrorContext(ctx, "a digest record that cannot be read is dropped; its notes go in the next one", "digest", d, "err", err)
		return nil, 0, nil, kv.Delete(ctx, d)
	}
	notes, order, err := f.readNotes(ctx, kv, rec.Notes)
	if err != nil {
		return nil, 0, nil, err
	}
	rev := e.Revision()
	if rec.Parts != nil || rec.Sent {
		return &rec, rev, notes, nil
	}
	if order, err = f.leaveOutSent(ctx, kv, notes, order); err != nil {
		return nil, 0, nil, err
	}
	if len(order) == 0 {
		return nil, 0, nil, kv.Delete(ctx, d)
	}
	cmp := byButler(notes, order)
	slices.SortStableFunc(order, func(a, b string) int { return cmp(notes[a], notes[b]) })
	typ, _, _ := strings.Cut(notes[order[0]].Channel, ":")
	for i, part := range splitDigest(notes, order, config.MessageLimit(typ)) {
		sum := sha256.Sum256([]byte(d + "." + strconv.Itoa(i)))
		rec.Parts = append(rec.Parts, digestPart{RequestID: envelope.NewRequestID(), Key: "quiet-digest." + hex.EncodeToString(sum[:16]), Notes: part})
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, 0, nil, err
	}
	if rev, err = kv.Update(ctx, d, b, rev); err != nil {
		// Another switchboard planned it first: the next scan goes on from there.
		return nil, 0, nil, fmt.Errorf("planning digest %s: %w", d, err)
	}
	return &rec, rev, notes, nil
}

// readNotes reads the notes of keys still held, and their keys in order.
func (f *Feature) readNotes(ctx context.Context, kv jetstream.KeyValue, keys []string) (map[string]heldNote, []string, error) {
	notes := map[string]heldNote{}
	var order []string
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released already
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading held note %s: %w", k, err)
		}
		var n heldNote
		if err := json.Unmarshal(e.Value(), &n); err != nil {
			f.env.Log.ErrorContext(ctx, "a held note that cannot be read is dropped", "note", k, "err", err)
			_ = kv.Delete(ctx, k)
			continue
		}
		notes[k] = n
		order = append(order, k)
	}
	return notes, order, nil
}

// leaveOutSent drops from a digest being planned the notes whose notify
// went out on its own meanwhile (called again, with an urgency that
// passes), so none is sent a second time; it returns the rest of order.
func (f *Feature) leaveOutSent(ctx context.Context, kv jetstream.KeyValue, notes map[string]heldNote, order []string) ([]string, error) {
	kept := order[:0]
	for _, k := range order {
		n := notes[k]
		switch l, err := f.env.Ledger.Get(ctx, n.Butler, n.Key); {
		case err != nil:
			return nil, err
		case l != nil && l.Final():
			f.env.Log.InfoContext(ctx, "a held note went out on its own; it is left out of the digest", "butler", n.Butler, "request_id", n.RequestID, "delivery_id", l.DeliveryID)
			delete(notes, k)
			if err := kv.Delete(ctx, k); err != nil {
				return nil, fmt.Errorf("releasing held note %s: %w", k, err)
			}
		default:
			kept = append(kept, k)
		}
	}
	return kept, nil
}

// byButler orders notes grouped by butler, the butler with the earliest
// note first, and by when each was held.
func byButler(notes map[string]heldNote, keys []string) func(a, b heldNote) int {
	first := map[string]time.Time{}
	for _, k := range keys {
		n := notes[k]
		if t, ok := first[n.Butler]; !ok || n.HeldAt.Before(t) {
			first[n.Butler] = n.HeldAt
		}
	}
	return func(a, b heldNote) int {
		if c := first[a.Butler].Compare(first[b.Butler]); c != 0 {
			return c
		}
		if c := strings.Compare(a.Butler, b.Butler); c != 0 {
			return c
		}
		if c := a.HeldAt.Compare(b.HeldAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	}
}

// release records that note n went out in part p of its digest: audited
// (released), and in the ledger under its own key, so the same notify again
// is answered from there and never sent twice.
func (f *Feature) release(ctx context.Context, n heldNote, p digestPart) error {
	dlv := envelope.DeliveryID(digestRouteKey(p))
	when := n.Until.In(zone(n.TZ)).Format("15:04") + " " + n.TZ
	rec := &ledger.Record{Key: n.Key, Butler: n.Butler, Channel: n.Channel, DeliveryID: dlv, Status: ledger.Sent, Args: n.Args,
		Note: "held for quiet hours and sent in the digest of " + when + " (request_id " + p.RequestID + ")"}
	if err := f.env.Ledger.Save(ctx, rec); err != nil && !errors.Is(err, ledger.ErrConflict) {
		return fmt.Errorf("recording held note %s as sent: %w", n.RequestID, err)
	}
	f.env.Audit.Write(ctx, audit.Record{Kind: audit.Released, Butler: n.Butler, Channel: n.Channel, Intent: envelope.IntentSend, RequestID: n.RequestID,
		Key: n.Key, CallerKey: n.CallerKey, DeliveryID: dlv, Reason: "in the " + when + " digest, request_id " + p.RequestID})
	return nil
}

// digestRouteKey is the idempotency key of a digest part's route.
func digestRouteKey(p digestPart) string {
	r := envelope.Route{Input: envelope.Input{Context: envelope.InputContext{NotifyRequest: &envelope.Notify{OriginButler: config.HeraldOrigin, IdempotencyKey: p.Key}}}}
	return r.IdempotencyKey()
}

// publishDigest hands part i of rec to the messenger as Herald's own
// message, under the part's request_id and idempotency key.
func (f *Feature) publishDigest(ctx context.Context, rec digestRecord, i int, notes map[string]heldNote) error {
	p := rec.Parts[i]
	var part []heldNote
	total := 0
	for _, pp := range rec.Parts {
		for _, k := range pp.Notes {
			if n, ok := notes[k]; ok {
				total++
				if pp.Key == p.Key {
					part = append(part, n)
				}
			}
		}
	}
	if len(part) == 0 {
		return nil
	}
	first := part[0]
	typ, _, _ := strings.Cut(first.Channel, ":")
	urgency := config.UrgencyLow
	for _, n := range part {
		if n.Urgency != config.UrgencyLow {
			urgency = config.UrgencyNormal
		}
	}
	msg := digestText(part, i, len(rec.Parts), total, config.MessageLimit(typ))
	subject := fmt.Sprintf("Held during quiet hours: %d notes", total)
	if len(rec.Parts) > 1 {
		subject += fmt.Sprintf(" (%d/%d)", i+1, len(rec.Parts))
	}
	n := envelope.NewNotify(config.HeraldOrigin, envelope.Delivery{Channel: first.Channel, Recipient: first.To, Subject: subject, Message: msg, Urgency: urgency}, nil)
	n.IdempotencyKey = p.Key
	r := envelope.NewRoute(n)
	r.RequestContext.RequestID = p.RequestID
	if err := envelope.Check(schemas.Route, r); err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	key := r.IdempotencyKey()
	ack, err := bus.Publish(ctx, f.env.JS, bus.DeliverSubject("messenger"), b, key, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)
	}
	// Written again for a part published again (ack.Duplicate): the
	// switchboard that published it first was killed before the digest was
	// marked sent, which waits for this record, so it may not be stored.
	f.env.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: config.HeraldOrigin, Channel: first.Channel, Intent: envelope.IntentSend, Recipient: first.To,
		RequestID: p.RequestID, Key: key, Reason: fmt.Sprintf("digest of %d notes held for quiet hours", len(part))})
	if !ack.Duplicate {
		f.env.Log.InfoContext(ctx, "digest of quiet hours sent", "channel", first.Channel, "request_id", p.RequestID, "notes", len(part), "part", i+1, "parts", len(rec.Parts))
	}
	return nil
}

// zone is the time zone named tz (UTC if there is none of that name).
func zone(tz string) *time.Location {
	return (&config.QuietHours{TZ: tz}).Location()
}

// Digest parts: each holds as many notes, in order, as one message of the
// channel takes; a note that does not fit in one alone is cut to fit.

// splitDigest splits the notes (keys, in digest order) into parts that
// each fit one message of lim.
func splitDigest(notes map[string]heldNote, order []string, lim spec.Limit) [][]string {
	var parts [][]string
	var cur []string
	var curNotes []heldNote
	for _, k := range order {
		n := notes[k]
		try := append(slices.Clone(curNotes), n)
		if len(cur) > 0 && !lim.Fits(renderDigest(try, maxParts, maxParts, len(order))) {
			parts = append(parts, cur)
			cur, curNotes = nil, nil
		}
		cur = append(cur, k)
		curNotes = append(curNotes, n)
	}
	return append(parts, cur)
}

// maxParts is the widest part number a digest's heading is measured with,
// so that numbering the parts later cannot push one over the limit.
const maxParts = 999

// digestText is part i (of parts) of a digest of total notes, cut to fit lim.
func digestText(part []heldNote, i, parts, total int, lim spec.Limit) string {
	md := renderDigest(part, i, parts, total)
	if lim.Fits(md) || len(part) != 1 {
		return md
	}
	// One note larger than a message: keep as much of it as fits.
	n := part[0]
	msg := []rune(n.Message)
	lo, hi := 0, len(msg)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		n.Message = string(msg[:mid]) + cutMark
		if lim.Fits(renderDigest([]heldNote{n}, i, parts, total)) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	n.Message = string(msg[:lo]) + cutMark
	return renderDigest([]heldNote{n}, i, parts, total)
}

const cutMark = " … (cut: too long for one message)"

// renderDigest writes part i of parts (0-based; parts 1 means no numbers)
// of a digest of total notes: a heading, then each butler's notes, each
// under a line of Herald's own (its local time and request_id, whose trail
// `herald log --request-id` shows) and quoted below it.
//
// The butler's name and the time come from the held record, which only the
// switchboard writes (the butler from the route's subject, the time from
// its clock), never from the note: a note is the butler's words and
// nothing more, so its text is quoted, line by line, and escaped
// (quoteNote). No line of it can make a heading, a butler's bold name or
// a request_id line, or end the quote and stand as another entry.
func renderDigest(part []heldNote, i, parts, total int) string {
	if len(part) == 0 {
		return ""
	}
	loc := zone(part[0].TZ)
	var b strings.Builder
	noun := "notes"
	if total == 1 {
		noun = "note"
	}
	fmt.Fprintf(&b, "🌙 **Held during quiet hours** (%s): %d %s", markdown.Escape(part[0].Window), total, noun)
	if parts > 1 {
		fmt.Fprintf(&b, ", part %d of %d", i+1, parts)
	}
	butler := ""
	for _, n := range part {
		if n.Butler != butler {
			butler = n.Butler
			b.WriteString("\n\n**" + markdown.Escape(butler) + "**")
		}
		b.WriteString("\n\n" + n.HeldAt.In(loc).Format("15:04") + " · `request_id " + n.RequestID + "`\n" + quoteNote(n.Message))
	}
	b.WriteString("\n\nA note's trail: `herald log --request-id <request_id>`")
	return b.String()
}

// noteBreaks are the line breaks a note is split on: every one a renderer
// or a mail reader might show as a new line, so that no line of the note
// can begin outside the quote.
var noteBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\v", "\n", "\f", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n")

// quoteNote writes msg as a quote of its lines, each escaped (markdown.Escape)
// so that it shows literally: its markup is the butler's to see, not to
// render in Herald's message.
func quoteNote(msg string) string {
	lines := strings.Split(noteBreaks.Replace(strings.TrimSpace(msg)), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+markdown.Escape(strings.TrimSpace(l)), " ")
	}
	return strings.Join(lines, "\n")
}
