package switchboard_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/forum"
)

const forumChat = "-1001234567890"

// inTopic is a Telegram message from user 111 in topic thread of the forum
// group, as the messenger's receiver describes it.
func inTopic(integration string, thread int, text string) *envelope.Ingress {
	in := telegram(integration, "111", forumChat, "supergroup", text)
	if thread != 0 {
		in.Meta["thread_id"] = strconv.Itoa(thread)
		in.Meta[forum.MetaTopic] = strconv.Itoa(thread)
	}
	return in
}

// TestTopicsRoute: with topics: per_butler, a message in a butler's forum
// topic goes to that butler, whatever the bindings say (tg_main's send
// everything to health); the General topic, a topic nobody's, a topic of a
// butler not granted the integration and an integration with topics off go
// by the bindings.
func TestTopicsRoute(t *testing.T) {
	f := newFleet(t)
	f.cfg.Integration("tg_main").Topics = config.TopicsPerButler
	f.cfg.Integration("tg_strict").Topics = config.TopicsPerButler
	f.cfg.Integration("tg_strict").Grants = config.Grants{Names: []string{"health", "assistant"}}
	f.cfg.Integration("tg_slow").Topics = config.TopicsOff
	kv, err := f.js.KeyValue(t.Context(), bus.BucketChannelState)
	if err != nil {
		t.Fatal(err)
	}
	// The messenger made these topics.
	reg := forum.NewRegistry(kv, "messenger")
	topic := func(integration, butler string, thread int) {
		t.Helper()
		got, err := reg.Topic(t.Context(), integration, forumChat, butler, butler, func(context.Context) (int, error) { return thread, nil })
		if err != nil || got != thread {
			t.Fatalf("%s's topic: %d, %v", butler, got, err)
		}
	}
	topic("tg_main", "finance", 7)
	topic("tg_main", "assistant", 8)
	topic("tg_strict", "finance", 7) // made before finance's grant was taken away
	topic("tg_slow", "finance", 7)
	f.start(t)

	f.handled(t,
		f.send(t, "telegram", inTopic("tg_main", 7, "finance's topic")),
		f.send(t, "telegram", inTopic("tg_main", 8, "assistant's topic")),
		f.send(t, "telegram", inTopic("tg_main", 0, "General")),
		f.send(t, "telegram", inTopic("tg_main", 9, "a topic of people")),
		f.send(t, "telegram", inTopic("tg_strict", 7, "not granted")),
		f.send(t, "telegram", inTopic("tg_slow", 7, "topics off")),
	)
	for butler, want := range map[string][]string{
		"finance":   {"finance's topic"},
		"health":    {"General", "a topic of people"},
		"assistant": {"assistant's topic", "not granted", "topics off"},
	} {
		var got []string
		for _, r := range f.inbox(t, butler) {
			got = append(got, r.Input.Context.Ingress.Content.Text)
		}
		if len(got) != len(want) {
			t.Errorf("%s got %q, want %q", butler, got, want)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s got %q, want %q", butler, got, want)
			}
		}
	}
}
