package switchboard_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/switchboard/core"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/envelope"
)

// flood sends n messages from sender on integration, in order.
func (f *fleet) flood(t *testing.T, integration, sender string, n int) []*envelope.Ingress {
	t.Helper()
	ins := make([]*envelope.Ingress, n)
	for i := range ins {
		ins[i] = f.send(t, "telegram", telegram(integration, sender, "", "", "flood "+strconv.Itoa(i)))
	}
	return ins
}

// wantFirst checks that the first n of recs are kind/reason and the rest
// were dropped as rate_limited.
func wantFirst(t *testing.T, recs []audit.Record, n int, kind, reason string) {
	t.Helper()
	for i, rec := range recs {
		if i < n {
			want(t, rec, kind, reason)
		} else {
			want(t, rec, audit.Dropped, core.ReasonRateLimited)
		}
	}
}

// TestRateLimitPerSender: one sender's flood slows that sender only.
func TestRateLimitPerSender(t *testing.T) {
	f := newFleet(t)
	f.start(t)

	wantFirst(t, f.handled(t, f.flood(t, "tg_slow", "555", 6)...), 3, audit.Routed, core.ReasonInboundMessage)
	hello := f.send(t, "telegram", telegram("tg_slow", "111", "", "", "hello"))
	want(t, f.handled(t, hello)[0], audit.Routed, core.ReasonInboundMessage)

	// A stranger's flood is dropped once over their own bucket, before the
	// gate looks them up, and takes nothing from anyone else's.
	wantFirst(t, f.handled(t, f.flood(t, "tg_slow", "999", 5)...), 3, audit.Rejected, core.ReasonSenderNotAllowed)
	again := f.send(t, "telegram", telegram("tg_slow", "111", "", "", "still here"))
	want(t, f.handled(t, again)[0], audit.Routed, core.ReasonInboundMessage)
	if got := len(f.inbox(t, "assistant")); got != 5 {
		t.Errorf("the inbox holds %d messages, want 555's first 3 and 111's 2", got)
	}
}

// TestVerdictsSkipRateLimits: an approver's answer to a permission prompt,
// typed or tapped, is taken however much anyone has written; nobody else
// gets past a limit by typing one.
func TestVerdictsSkipRateLimits(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	store := f.approvals(t)
	now := time.Now()
	for _, id := range []string{"abcde", "fghij", "qwert"} {
		r := approval.Request{ID: id, Butler: "health", Session: "sess-" + id, ToolName: "Bash", CreatedAt: now, ExpiresAt: now.Add(approval.DefaultTTL)}
		if err := store.Create(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if err := store.MarkSent(t.Context(), "health", id, "tg_slow", "111"); err != nil {
			t.Fatal(err)
		}
	}

	// The approver and another allowed sender have both used up their buckets.
	wantFirst(t, f.handled(t, f.flood(t, "tg_slow", "111", 5)...), 3, audit.Routed, core.ReasonInboundMessage)
	wantFirst(t, f.handled(t, f.flood(t, "tg_slow", "555", 5)...), 3, audit.Routed, core.ReasonInboundMessage)

	typed := f.send(t, "telegram", telegram("tg_slow", "111", "", "", "yes abcde"))
	button := telegram("tg_slow", "111", "", "", "")
	button.Meta["callback_data"] = "perm:deny:fghij"
	button.Meta["callback_query_id"] = "cq1"
	f.send(t, "telegram", button)
	for _, rec := range f.handled(t, typed, button) {
		want(t, rec, audit.Routed, core.ReasonPermissionVerdict)
	}
	for id, verdict := range map[string]string{"abcde": approval.Allow, "fghij": approval.Deny} {
		if r, _ := store.Get(t.Context(), "health", id); r.Verdict != verdict || r.AnsweredBy != "111" {
			t.Errorf("prompt %s after the approver's answer: %+v", id, r)
		}
	}
	// The approver's chat is still held to their bucket.
	chat := f.send(t, "telegram", telegram("tg_slow", "111", "", "", "and one more thing"))
	want(t, f.handled(t, chat)[0], audit.Dropped, core.ReasonRateLimited)

	// Someone who is no approver typing a verdict is a message like any
	// other: over their limit it is dropped, and a stranger's is refused by
	// the gate (then dropped, once the stranger is over theirs).
	wantFirst(t, f.handled(t, f.flood(t, "tg_slow", "999", 3)...), 3, audit.Rejected, core.ReasonSenderNotAllowed)
	tests := []struct {
		name   string
		in     *envelope.Ingress
		kind   string
		reason string
	}{
		{"an allowed sender over their limit", telegram("tg_slow", "555", "", "", "yes qwert"), audit.Dropped, core.ReasonRateLimited},
		{"a stranger over their limit", telegram("tg_slow", "999", "", "", "yes qwert"), audit.Dropped, core.ReasonRateLimited},
		{"a stranger", telegram("tg_slow", "998", "", "", "yes qwert"), audit.Rejected, core.ReasonSenderNotAllowed},
		{"a stranger's button", func() *envelope.Ingress {
			in := telegram("tg_slow", "997", "", "", "")
			in.Meta["callback_data"] = "perm:allow:qwert"
			return in
		}(), audit.Rejected, core.ReasonSenderNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, f.handled(t, f.send(t, "telegram", tt.in))[0], tt.kind, tt.reason)
		})
	}
	if r, _ := store.Get(t.Context(), "health", "qwert"); r.Verdict != "" {
		t.Errorf("someone who is no approver answered a prompt: %+v", r)
	}
	if got := len(f.inbox(t, "health")); got != 2 {
		t.Errorf("health's inbox holds %d routes, want the approver's 2 verdicts", got)
	}
}

// TestRateLimitCeiling: an integration as a whole takes ten times its
// senders' limit, so senders who cost nothing to make up (allow_from "*")
// cannot flood it; strangers, refused anyway, do not count.
func TestRateLimitCeiling(t *testing.T) {
	f := newFleet(t)
	f.start(t)

	// tg_open: one message per sender, ten for the integration.
	var ins []*envelope.Ingress
	for i := range 12 {
		ins = append(ins, f.send(t, "telegram", telegram("tg_open", strconv.Itoa(700+i), "", "", "hi")))
	}
	wantFirst(t, f.handled(t, ins...), 10, audit.Routed, core.ReasonInboundMessage)

	// tg_slow takes 30; 40 strangers leave all of it to the senders let in.
	ins = ins[:0]
	for i := range 40 {
		ins = append(ins, f.send(t, "telegram", telegram("tg_slow", strconv.Itoa(800+i), "", "", "let me in")))
	}
	for _, rec := range f.handled(t, ins...) {
		want(t, rec, audit.Rejected, core.ReasonSenderNotAllowed)
	}
	want(t, f.handled(t, f.send(t, "telegram", telegram("tg_slow", "111", "", "", "hello")))[0], audit.Routed, core.ReasonInboundMessage)
}
