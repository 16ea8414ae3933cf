package telegram_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/telegram"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

const (
	forum      = int64(-1001234567890)
	forumChat  = "-1001234567890"
	plainGroup = "-1009999999999" // a supergroup without topics
)

// topicSender is the channel with topics: per_butler over a real bus, as a
// messenger replica builds it; topics, if given, replaces per_butler.
func topicSender(t *testing.T, srv *telegramtest.Server, js jetstream.JetStream, topics ...config.Topics) deliver.Sender {
	t.Helper()
	in := config.Integration{ID: "tg_main", Type: "telegram", Topics: config.TopicsPerButler,
		RateLimitOut: config.OutLimits{Disabled: true},
		Settings:     &telegram.Config{TokenEnv: tokenEnv, APIURL: srv.URL(), DefaultChat: forumChat}}
	if len(topics) > 0 {
		in.Topics = topics[0]
	}
	s, err := telegram.New(in, deliver.Env{
		Getenv:   func(k string) string { return map[string]string{tokenEnv: srv.Token()}[k] },
		Logger:   slog.New(slog.NewTextHandler(t.Output(), nil)),
		JS:       js,
		Instance: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startForum starts a fake Telegram, whose chat forum has topics if
// isForum, and a bus, for topicSender; js is a connection to the bus.
func startForum(t *testing.T, isForum bool) (*telegramtest.Server, *bustest.Server, jetstream.JetStream) {
	t.Helper()
	srv := telegramtest.NewServer(t)
	if isForum {
		srv.MakeForum(forum)
	}
	bus := bustest.RunServer(t)
	_, js := bus.Connect()
	return srv, bus, js
}

// threadOf is the forum topic each sendMessage went into, by text.
func threadOf(srv *telegramtest.Server) map[string]int64 {
	out := map[string]int64{}
	for _, c := range srv.Calls("sendMessage") {
		if c.OK() {
			out[c.Message.Text] = c.Message.MessageThreadID
		}
	}
	return out
}

// topicID is the thread id of the topic named name in the forum.
func topicID(t *testing.T, srv *telegramtest.Server, name string) int64 {
	t.Helper()
	for _, tp := range srv.Topics(forum) {
		if tp.Name == name {
			return tp.MessageThreadID
		}
	}
	t.Fatalf("no topic %q in %+v", name, srv.Topics(forum))
	return 0
}

// TestTopicPerButler: health's and finance's notes to a forum go into a
// topic each, named after the butler and made once however many notes go
// out at once; a sender started later (a restarted messenger) finds them.
func TestTopicPerButler(t *testing.T) {
	srv, bus, js := startForum(t, true)
	s := topicSender(t, srv, js)

	var wg sync.WaitGroup
	for i := range 3 {
		for _, butler := range []string{"health", "finance"} {
			wg.Go(func() {
				if _, err := s.Deliver(t.Context(), deliver.Delivery{Butler: butler, Message: fmt.Sprintf("%s %d", butler, i)}); err != nil {
					t.Errorf("%s %d: %v", butler, i, err)
				}
			})
		}
	}
	wg.Wait()
	if n := len(srv.Calls("createForumTopic")); n != 2 {
		t.Fatalf("createForumTopic called %d times, want once per butler", n)
	}
	health, finance := topicID(t, srv, "health"), topicID(t, srv, "finance")
	got := threadOf(srv)
	for i := range 3 {
		if got[fmt.Sprint("health ", i)] != health || got[fmt.Sprint("finance ", i)] != finance {
			t.Fatalf("messages went into threads %v, want health's in %d and finance's in %d", got, health, finance)
		}
	}

	_, js2 := bus.Connect()
	if _, err := topicSender(t, srv, js2).Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: "after a restart"}); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Calls("createForumTopic")); n != 2 {
		t.Fatalf("after a restart createForumTopic was called again (%d calls)", n)
	}
	if th := threadOf(srv)["after a restart"]; th != health {
		t.Fatalf("after a restart health's note went into thread %d, want %d", th, health)
	}
}

// TestTopicReplies: a butler's reply to a person's message in its topic
// goes into that topic, answering the message, every chunk of it.
func TestTopicReplies(t *testing.T) {
	srv, _, js := startForum(t, true)
	s := topicSender(t, srv, js)
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: "first"}); err != nil {
		t.Fatal(err)
	}
	health := topicID(t, srv, "health")
	_, person := srv.SendUserMessage(srv.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: forum}, From: &telegramtest.User{ID: 12345, FirstName: "Ann"}, MessageThreadID: health, Text: "how am I?"})

	long := strings.Repeat("Fine, mostly. ", 400) // over 4096 characters: two messages
	r, err := s.Deliver(t.Context(), deliver.Delivery{Intent: "reply", Butler: "health", Message: long, Thread: forumChat + ":" + strconv.FormatInt(person.MessageID, 10)})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.MessageIDs) != 2 {
		t.Fatalf("the reply went out as %d messages, want 2", len(r.MessageIDs))
	}
	calls := srv.Calls("sendMessage")
	for _, c := range calls[len(calls)-2:] {
		if c.Message.MessageThreadID != health || !c.Message.IsTopicMessage {
			t.Fatalf("a chunk of the reply went into thread %d, want health's %d", c.Message.MessageThreadID, health)
		}
	}
	if first := calls[len(calls)-2]; first.ReplyParameters == nil || first.ReplyParameters.MessageID != person.MessageID {
		t.Fatalf("the reply answers %+v, want message %d", first.ReplyParameters, person.MessageID)
	}
}

// TestNotAForum: per_butler to a group without topics is a clear error at
// the first send, naming the key, and nothing is sent to the group.
func TestNotAForum(t *testing.T) {
	srv, _, js := startForum(t, false)
	s := topicSender(t, srv, js)
	for try := range 2 {
		_, err := s.Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: "hello", Recipient: plainGroup})
		if !errors.Is(err, envelope.ErrValidation) || envelope.Retryable(err) {
			t.Fatalf("try %d: %v, want a validation error no retry helps", try+1, err)
		}
		for _, want := range []string{"chat " + plainGroup + " is not a forum", `integration "tg_main" has topics: per_butler`, "set topics: off"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("try %d: %q does not say %q", try+1, err, want)
			}
		}
	}
	if n := len(srv.Calls("sendMessage")); n != 0 {
		t.Fatalf("%d messages went to the group anyway", n)
	}
	if n := len(srv.Calls("createForumTopic")); n != 2 {
		t.Fatalf("createForumTopic called %d times, want once per try", n)
	}
}

// TestTopicsWhereNone: a person's own chat has no topics, Herald's own
// messages stay out of them, topics: off sends to the General topic, and
// a group named by @name cannot keep topics.
func TestTopicsWhereNone(t *testing.T) {
	srv, _, js := startForum(t, true)
	s := topicSender(t, srv, js)
	for _, d := range []deliver.Delivery{
		{Butler: "health", Message: "to a person", Recipient: "42"},
		{Butler: config.HeraldOrigin, Message: "Herald's own"},
	} {
		if _, err := s.Deliver(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := topicSender(t, srv, js, config.TopicsOff).Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: "topics off"}); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Calls("createForumTopic")); n != 0 {
		t.Fatalf("createForumTopic called %d times", n)
	}
	for text, th := range threadOf(srv) {
		if th != 0 {
			t.Errorf("%q went into thread %d", text, th)
		}
	}
	_, err := s.Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: "x", Recipient: "@somegroup"})
	if !errors.Is(err, envelope.ErrValidation) || !strings.Contains(err.Error(), "topics: per_butler, which needs the group's numeric chat id") {
		t.Fatalf("@name with per_butler: %v", err)
	}
}

// TestDeletedTopic: once someone deletes a butler's topic, the next send
// fails with a retryable error and the one after makes a new topic.
func TestDeletedTopic(t *testing.T) {
	srv, _, js := startForum(t, true)
	s := topicSender(t, srv, js)
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: "one"}); err != nil {
		t.Fatal(err)
	}
	old := topicID(t, srv, "health")
	srv.DeleteTopic(forum, old)
	_, err := s.Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: "two"})
	if !errors.Is(err, envelope.ErrTargetUnavailable) || !envelope.Retryable(err) || !strings.Contains(err.Error(), "was deleted; a new one is made") {
		t.Fatalf("to the deleted topic: %v, want a retry", err)
	}
	if _, err := s.Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: "two"}); err != nil {
		t.Fatal(err)
	}
	if th := threadOf(srv)["two"]; th == old || th != topicID(t, srv, "health") {
		t.Fatalf("the retry went into thread %d (old %d), want the new topic", th, old)
	}
}

// TestTopicRights: a bot that may not make topics in the forum is
// forbidden, saying what right it needs.
func TestTopicRights(t *testing.T) {
	srv, _, js := startForum(t, true)
	srv.FailNext("createForumTopic", 1, 400, "Bad Request: not enough rights to create a topic", 0)
	_, err := topicSender(t, srv, js).Deliver(t.Context(), deliver.Delivery{Butler: "health", Message: "hello"})
	if !errors.Is(err, envelope.ErrForbidden) || !strings.Contains(err.Error(), "make the bot an admin of the group that may manage topics") {
		t.Fatalf("without the right: %v", err)
	}
	if n := len(srv.Calls("sendMessage")); n != 0 {
		t.Fatalf("%d messages went to the group anyway", n)
	}
}
