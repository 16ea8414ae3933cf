package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus"
	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/markdown"
)

// TestInterruptedDeliveryResumes: a messenger that died after sending the
// first chunk of a long message left that in the ledger; the next attempt
// sends only the rest.
func TestInterruptedDeliveryResumes(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	_, chunks, d := f.sendOverLeftover(leftBehind)
	f.wantSent(chunks, 1, "the chunks not sent before")
	if len(d.MessageIDs) != len(chunks) || d.MessageIDs[0] != "901" {
		t.Fatalf("message ids %v: want the earlier chunk's id first, one per chunk", d.MessageIDs)
	}
	if d.Outcome != ledger.Confirmed {
		t.Fatalf("outcome %q: nothing was in flight, so nothing is uncertain", d.Outcome)
	}
}

// leftBehind is what a crashed messenger leaves of the delivery key: in
// progress, first chunk sent and recorded, no call in flight, and no word
// from it for longer than a lease.
func leftBehind(key string) ledger.Record {
	return ledger.Record{Key: key, Butler: "health", Channel: "telegram:tg_main", DeliveryID: envelope.DeliveryID(key), Status: ledger.Sending,
		MessageIDs: []string{"901"}, Attempts: 1, Attempt: "gone.1", UpdatedAt: time.Now().Add(-2 * ledger.LeaseTTL)}
}

// sendOverLeftover sends a long message to telegram:tg_main after putting in
// the ledger what a messenger that died delivering it left (left, of the
// delivery's idempotency key). It fails the test unless the answer is ok,
// and returns the route, the message's chunks and the delivery answered.
func (f *fleet) sendOverLeftover(left func(key string) ledger.Record) (*envelope.Route, []string, *envelope.DeliveryResult) {
	f.t.Helper()
	md, chunks := longMessage(f.t)
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram:tg_main", Message: md}, nil))
	f.putRecord(left(r.IdempotencyKey()))
	resp, err := f.routeClient().Send(f.t.Context(), r)
	if err != nil || resp.Status != "ok" {
		f.t.Fatalf("send: %v %+v", err, resp)
	}
	return r, chunks, resp.Result.NotifyResponse.Delivery
}

// wantSent fails the test unless the sendMessage calls Telegram took are
// chunks[from:], the chunks of a message from chunk from+1 on, in order and
// nothing else; what says why those.
func (f *fleet) wantSent(chunks []string, from int, what string) {
	f.t.Helper()
	calls, want := f.tg.Calls("sendMessage"), chunks[from:]
	if len(calls) != len(want) {
		f.t.Fatalf("%d calls, want %d: %s", len(calls), len(want), what)
	}
	for i, c := range calls {
		if c.Params["text"] != want[i] {
			f.t.Fatalf("call %d sent %.40q, want chunk %d: %s", i+1, c.Params["text"], from+i+1, what)
		}
	}
}

// putRecord writes a delivery record as another (crashed) messenger left it.
func (f *fleet) putRecord(rec ledger.Record) {
	f.t.Helper()
	b, _ := json.Marshal(rec)
	kv, err := f.js.KeyValue(f.t.Context(), bus.BucketDeliveries)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := kv.Put(f.t.Context(), rec.Butler+"."+rec.Key, b); err != nil {
		f.t.Fatal(err)
	}
}

// record reads a delivery record.
func (f *fleet) record(butler, key string) *ledger.Record {
	f.t.Helper()
	led, err := ledger.Open(f.t.Context(), f.js)
	if err != nil {
		f.t.Fatal(err)
	}
	rec, err := led.Get(f.t.Context(), butler, key)
	if err != nil {
		f.t.Fatal(err)
	}
	return rec
}

// longMessage is markdown of at least three Telegram chunks, and its chunks.
func longMessage(t *testing.T) (string, []string) {
	t.Helper()
	var md strings.Builder
	for i := 0; md.Len() < 9000; i++ {
		fmt.Fprintf(&md, "Line %d of the weekly **summary**, long enough to need a few chunks.\n\n", i)
	}
	chunks := telegramspec.Chunks(markdown.Parse(md.String()), 4096)
	if len(chunks) < 3 {
		t.Fatalf("%d chunks; the test needs at least 3", len(chunks))
	}
	return md.String(), chunks
}
