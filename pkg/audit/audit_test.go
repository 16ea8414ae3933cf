package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/envelope"
)

// stored reads every record in the audit stream.
func stored(t *testing.T, w *audit.Writer) []audit.Record {
	t.Helper()
	select {
	case <-w.JS.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("audit records not stored within 10s")
	}
	s, err := w.JS.Stream(context.Background(), bus.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			return out
		}
		recs, err := audit.Decode(m.Data)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		out = append(out, recs...)
	}
}

// TestFailuresAreNotHeldBack: a failure is stored at once, without waiting
// for delivered records to gather; what was waiting is stored at Flush.
func TestFailuresAreNotHeldBack(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	w := &audit.Writer{JS: js}
	w.Write(t.Context(), audit.Record{Kind: audit.Failed, Butler: "health", Channel: "log:log", RequestID: "f", Class: "timeout"})
	found := false
	for _, r := range stored(t, w) {
		found = found || r.RequestID == "f"
	}
	if !found {
		t.Fatal("the failure was not stored before Flush")
	}
	for i := range 10 {
		w.Write(t.Context(), audit.Record{Kind: audit.Delivered, Butler: "health", Channel: "log:log", RequestID: fmt.Sprint(i)})
	}
	w.Flush()
	if got := len(stored(t, w)); got != 11 {
		t.Fatalf("%d records stored, want 11", got)
	}
}

// TestOutcome: the record of an outcome says delivered with its delivery id,
// or failed with the class and reason, and never the message.
func TestOutcome(t *testing.T) {
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram:tg", Message: "secret words"}, nil))
	ok := envelope.Answer(r, &envelope.NotifyResponse{Status: envelope.StatusOK, Delivery: &envelope.DeliveryResult{Channel: "telegram:tg", DeliveryID: "dlv_1"}})
	if rec := audit.Outcome("health", "id", "key", "telegram:tg", "", ok); rec.Kind != audit.Delivered || rec.DeliveryID != "dlv_1" || rec.Channel != "telegram:tg" {
		t.Errorf("delivered: %+v", rec)
	}
	failed := envelope.Answer(r, envelope.Failed("id", fmt.Errorf("%w: provider down", envelope.ErrTargetUnavailable)))
	rec := audit.Outcome("health", "id", "key", "telegram:tg", "", failed)
	if rec.Kind != audit.Failed || rec.Class != "target_unavailable" || rec.Channel != "telegram:tg" {
		t.Errorf("failed: %+v", rec)
	}
	if b, _ := json.Marshal(rec); strings.Contains(string(b), "secret words") {
		t.Errorf("the record carries the message: %s", b)
	}
}

// TestGatheredRecordsKeepTheirOrder: routed and delivered records are
// gathered into fewer stored messages, and one Writer's records are stored in
// the order it wrote them, whether its timer or Flush publishes them.
func TestGatheredRecordsKeepTheirOrder(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	w := &audit.Writer{JS: js}
	const n = 400
	var want []string
	for i := range n {
		kind, channel := audit.Routed, "log:log"
		if (i/10)%2 == 1 {
			kind = audit.Delivered
		}
		if (i/50)%2 == 1 {
			channel = "telegram:tg"
		}
		id := fmt.Sprintf("%s-%03d", kind, i)
		want = append(want, id)
		w.Write(t.Context(), audit.Record{Kind: kind, Butler: "health", Channel: channel, RequestID: id})
		if i%37 == 0 {
			time.Sleep(3 * audit.Linger) // let the timer publish what is due
		}
	}
	w.Flush()
	var got []string
	for _, r := range stored(t, w) {
		got = append(got, r.RequestID)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("stored in another order or incomplete:\ngot  %v\nwant %v", got, want)
	}
	if msgs := bustest.Msgs(t, js, bus.StreamAudit); msgs >= n/2 {
		t.Fatalf("%d records took %d stored messages; runs of ten of one subject should share them", n, msgs)
	}
}

// TestForged: a record is believed only where its subject, which NATS
// permissions tie to its publisher, agrees with what it says.
func TestForged(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		r       audit.Record
		forged  bool
	}{
		{"a service's record", "herald.audit.delivered.telegram", audit.Record{Kind: audit.Delivered, Butler: "beta", Channel: "telegram:tg_main"}, false},
		{"a service's record without a channel", "herald.audit.expired.unknown", audit.Record{Kind: audit.Expired, Butler: "beta"}, false},
		{"a butler's own record", "herald.audit.auto_allowed.butler.alpha", audit.Record{Kind: audit.AutoAllowed, Butler: "alpha"}, false},
		{"another butler's name", "herald.audit.auto_allowed.butler.alpha", audit.Record{Kind: audit.AutoAllowed, Butler: "beta"}, true},
		{"another kind on a butler's subject", "herald.audit.auto_allowed.butler.alpha", audit.Record{Kind: audit.Delivered, Butler: "alpha"}, true},
		{"a kind the subject does not say", "herald.audit.routed.telegram", audit.Record{Kind: audit.Delivered, Channel: "telegram:tg_main"}, true},
		{"another channel", "herald.audit.delivered.telegram", audit.Record{Kind: audit.Delivered, Channel: "email:mail"}, true},
		{"no audit subject", "herald.audit.x", audit.Record{Kind: "x"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if why := audit.Forged(tt.subject, tt.r); (why != "") != tt.forged {
				t.Errorf("Forged(%s, %+v) = %q, want forged %v", tt.subject, tt.r, why, tt.forged)
			}
		})
	}
	// Every record the Writer stores is believed where it stores it.
	if why := audit.Forged(bus.ButlerAuditSubject(audit.AutoAllowed, "alpha"), audit.Record{Kind: audit.AutoAllowed, Butler: "alpha"}); why != "" {
		t.Errorf("a butler writer's own record: %s", why)
	}
}

// TestWaitedRecordsAreStoredFirst: records written for work that carries a
// bus.Confirms (a handled message, a direct route) are stored by the time
// the work's Wait returns, gathered or not, Flush or no Flush.
func TestWaitedRecordsAreStoredFirst(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	w := &audit.Writer{JS: js}
	for _, soon := range []bool{false, true} {
		c := &bus.Confirms{Soon: soon}
		ctx := bus.WithConfirms(t.Context(), c)
		id := fmt.Sprint("soon=", soon)
		for _, kind := range []string{audit.Routed, audit.Delivered, audit.Rejected} {
			w.Write(ctx, audit.Record{Kind: kind, Butler: "health", Channel: "log:log", RequestID: id})
		}
		if err := c.Wait(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(t.Context(), bus.StreamAudit)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]bool{}
		for seq := uint64(1); ; seq++ {
			m, err := s.GetMsg(t.Context(), seq)
			if err != nil {
				break
			}
			recs, _ := audit.Decode(m.Data)
			for _, r := range recs {
				if r.RequestID == id {
					kinds[r.Kind] = true
				}
			}
		}
		if len(kinds) != 3 {
			t.Fatalf("%s: stored when Wait returned: %v, want routed, delivered and rejected", id, kinds)
		}
	}
}
