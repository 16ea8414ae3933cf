package web_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/web"
)

// TestConformance runs the channel suite against the web channel on a real
// bus. The suite's sends name no recipient, so they go to every visitor: the
// provider's record of them is the integration's broadcast subject.
func TestConformance(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	var integration string
	n := 0
	delivertest.Run(t, delivertest.Harness{
		New: func(t *testing.T) deliver.Sender {
			n++
			integration = fmt.Sprintf("web%d", n)
			return newChannel(t, js, integration)
		},
		Delivered: func(t *testing.T) []string {
			return stored(t, js, web.Subject(integration, web.Broadcast))
		},
		CanReact: true,
	})
}

// stored is the text of every butler message kept on subject, in order.
func stored(t *testing.T, js jetstream.JetStream, subject string) []string {
	t.Helper()
	if _, err := js.Stream(t.Context(), web.StreamName); err != nil {
		return nil // nothing stored yet: the stream is made on first use
	}
	c, err := js.OrderedConsumer(t.Context(), web.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.FetchNoWait(1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for m := range batch.Messages() {
		var e struct{ Kind, Text string }
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatalf("stored entry %q: %v", m.Data(), err)
		}
		if e.Kind == "butler" {
			out = append(out, e.Text)
		}
	}
	if err := batch.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}
