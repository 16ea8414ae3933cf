package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/web"
)

// TestConformance runs the channel suite against the web channel on a real
// bus. Each sender serves its page, where one visitor has written: the
// suite's recipient and the message it replies and reacts to. A send with no
// recipient goes to every visitor; the provider's record of what was sent is
// the integration's conversations in the stream, and of the files sent, what
// the visitor's browser downloads through the links in its conversation.
func TestConformance(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	var (
		integration string
		said        *visitorMessage
		v           *visitor
	)
	n := 0
	butler := func(t *testing.T) []storedEntry {
		var out []storedEntry
		for _, e := range stored(t, js, web.Subject(integration, "*")) {
			if e.Kind == "butler" {
				out = append(out, e)
			}
		}
		return out
	}
	delivertest.Run(t, delivertest.Harness{
		New: func(t *testing.T) deliver.Sender {
			n++
			integration = fmt.Sprintf("web%d", n)
			ch, sk := serve(t, js, integration)
			v = newVisitor(t, ch)
			id := v.say("Did I take my pills?")
			in := sk.next(t)
			said = &visitorMessage{visitor: in.Meta["user_id"], id: id, thread: in.RequestContext.SourceThreadIdentity}
			return ch
		},
		Delivered: func(t *testing.T) []string {
			var out []string
			for _, e := range butler(t) {
				out = append(out, e.Text)
			}
			return out
		},
		// A message is stored whole; there is no provider to fail.
		Features:         delivertest.Features{Recipients: true, Threads: true, React: true, Files: true},
		DefaultRecipient: web.Broadcast,
		Recipient:        func(*testing.T) string { return said.visitor },
		DeliveredTo: func(t *testing.T) []string {
			var out []string
			for _, e := range butler(t) {
				out = append(out, e.subject[strings.LastIndex(e.subject, ".")+1:])
			}
			return out
		},
		Thread: func(*testing.T) string { return said.thread },
		Uploaded: func(t *testing.T) []delivertest.Upload {
			n := len(stored(t, js, web.Subject(integration, said.visitor))) + len(stored(t, js, web.Subject(integration, web.Broadcast)))
			page := v.events("")
			defer page.close()
			var out []delivertest.Upload
			for range n {
				for _, f := range page.next().Files {
					got := v.download(f.URL)
					if got.code != http.StatusOK {
						t.Fatalf("GET %s: %d %s", f.URL, got.code, got.data)
					}
					out = append(out, delivertest.Upload{Name: got.name(), MediaType: got.header.Get("Content-Type"), Data: got.data})
				}
			}
			return out
		},
		InThread: func(t *testing.T) []bool {
			var out []bool
			for _, e := range butler(t) {
				out = append(out, e.subject == web.Subject(integration, said.visitor) && e.ReplyTo == said.id)
			}
			return out
		},
		Reactions: func(t *testing.T) int {
			n := 0
			for _, e := range stored(t, js, web.Subject(integration, "*")) {
				if e.Kind == "reaction" && e.Target == said.id {
					n++
				}
			}
			return n
		},
	})
}

// visitorMessage is what the suite's visitor wrote.
type visitorMessage struct{ visitor, id, thread string }

// storedEntry is one entry of a conversation, with the subject it is kept on.
type storedEntry struct {
	subject string
	Kind    string `json:"kind"`
	Text    string `json:"text"`
	ReplyTo string `json:"reply_to"`
	Target  string `json:"target"`
}

// stored is every entry kept on subject (wildcards allowed), in order.
func stored(t *testing.T, js jetstream.JetStream, subject string) []storedEntry {
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
	var out []storedEntry
	for m := range batch.Messages() {
		var e storedEntry
		if err := json.Unmarshal(m.Data(), &e); err != nil {
			t.Fatalf("stored entry %q: %v", m.Data(), err)
		}
		e.subject = m.Subject()
		out = append(out, e)
	}
	if err := batch.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReceiverConformance(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	var (
		v *visitor
		n int
	)
	delivertest.RunReceiver(t, delivertest.ReceiverHarness{
		Start: func(t *testing.T, sink *delivertest.Sink) {
			n++
			ch := newChannel(t, js, fmt.Sprintf("recv%d", n))
			delivertest.Receive(t, ch, sink)
			v = newVisitor(t, ch)
			v.events("") // learns the visitor's id
		},
		// The page posts again, with the same client_id, what was not
		// accepted.
		Send: func(t *testing.T, text string) func(*testing.T) {
			p := map[string]string{"text": text, "client_id": uuid()}
			v.post(p)
			return func(*testing.T) { v.post(p) }
		},
		Sender: func() string { return "web:" + v.id },
		// A web conversation has no threads; a message the bus refuses is
		// answered to the page (400), which shows it to the visitor.
		Features: delivertest.ReceiverFeatures{Refuses: true},
		// A request for another host name is a DNS rebinding attempt.
		Refuse: func(t *testing.T) {
			v.request(body(map[string]any{"text": "rebound", "client_id": uuid()}), func(r *http.Request) { r.Host = "evil.example" })
		},
	})
}
