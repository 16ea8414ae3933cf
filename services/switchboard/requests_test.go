package switchboard_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
)

// TestReplyToAMessageRoutedBeforeTheUpgrade: routing records kept under the
// old "routed." key by an earlier release still open a reply, while no
// butler named routed is configured, so an upgrade breaks no conversation.
func TestReplyToAMessageRoutedBeforeTheUpgrade(t *testing.T) {
	f := newFleet(t)
	f.start(t)
	in := telegram("tg_main", "111", "", "", "asked before the upgrade")
	kv, err := f.js.KeyValue(t.Context(), bus.BucketRequests)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(map[string]any{"integration": "tg_main", "request_context": in.RequestContext, "chat": "111"})
	if _, err := kv.Put(t.Context(), "routed.health."+in.RequestContext.RequestID, rec); err != nil {
		t.Fatal(err)
	}
	nc, _ := f.srv.Connect()
	rc := in.RequestContext
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Channel: "telegram:tg_main", Intent: envelope.IntentReply, Message: "answered"}, &rc))
	sub, err := nc.SubscribeSync(bus.ReplySubject("health", r.RequestContext.RequestID))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	m := nats.NewMsg(bus.RouteSubject("health"))
	m.Data = b
	if _, err := f.js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	// No messenger runs: the reply waits for it, or is refused at once.
	testkit.Eventually(t, 20*time.Second, func() bool {
		if answer, err := sub.NextMsg(10 * time.Millisecond); err == nil {
			t.Fatalf("a reply to a message routed before the upgrade was answered %s", answer.Data)
		}
		got := f.deliveries(t)
		return len(got) == 1 && got[0].Delivery.Message == "answered"
	}, "the reply handed to the messenger")
}
