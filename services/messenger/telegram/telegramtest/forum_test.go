package telegramtest_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

const forumID = -1001234567890

// TestCreateForumTopic: createForumTopic in a forum answers a ForumTopic
// with the Bot API's fields, its thread id the id of the service message
// that opens it; in a chat that is not a forum it is refused as Telegram
// refuses it.
func TestCreateForumTopic(t *testing.T) {
	srv := telegramtest.NewServer(t)
	srv.MakeForum(forumID)
	b := newBot(t, srv, srv.Token())

	topic, err := b.CreateForumTopic(t.Context(), &bot.CreateForumTopicParams{ChatID: int64(forumID), Name: "health"})
	if err != nil {
		t.Fatal(err)
	}
	if topic.MessageThreadID != 1 || topic.Name != "health" || topic.IconColor != 0x6FB9F0 {
		t.Errorf("topic = %+v, want thread 1 named health with the first icon color", topic)
	}
	if c := srv.Calls("createForumTopic"); len(c) != 1 || c[0].ContentType != "multipart/form-data" || c[0].Params["name"] != "health" {
		t.Errorf("recorded %+v, want one multipart call naming health", c)
	}
	msgs := srv.Messages(forumID)
	if len(msgs) != 1 || msgs[0].ForumTopicCreated == nil || msgs[0].ForumTopicCreated.Name != "health" || !msgs[0].IsTopicMessage || msgs[0].MessageThreadID != 1 {
		t.Errorf("messages = %+v, want the topic's service message", msgs)
	}

	// The wire answer is exactly a ForumTopic.
	resp, err := http.PostForm(srv.URL()+"/bot"+srv.Token()+"/createForumTopic", url.Values{"chat_id": {"-1001234567890"}, "name": {"finance"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		OK     bool                       `json:"ok"`
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &out); err != nil || !out.OK {
		t.Fatalf("createForumTopic = %s", body)
	}
	var keys []string
	for k := range out.Result {
		keys = append(keys, k)
	}
	if len(keys) != 3 || string(out.Result["message_thread_id"]) != "2" || string(out.Result["name"]) != `"finance"` || string(out.Result["icon_color"]) != "16766590" {
		t.Errorf("result = %s, want {message_thread_id: 2, name: finance, icon_color: 16766590}", body)
	}
	if got := srv.Topics(forumID); len(got) != 2 || got[0].Name != "health" || got[1].Name != "finance" {
		t.Errorf("Topics = %+v", got)
	}

	for _, chat := range []int64{-1009999999999, -4000, 42} {
		_, err := b.CreateForumTopic(t.Context(), &bot.CreateForumTopicParams{ChatID: chat, Name: "health"})
		if !errors.Is(err, bot.ErrorBadRequest) || !strings.Contains(err.Error(), "the chat is not a forum") {
			t.Errorf("chat %d: err = %v, want 400 the chat is not a forum", chat, err)
		}
	}
	if _, err := b.CreateForumTopic(t.Context(), &bot.CreateForumTopicParams{ChatID: int64(forumID), Name: " "}); !errors.Is(err, bot.ErrorBadRequest) {
		t.Errorf("an empty name: err = %v, want 400", err)
	}
}

// TestMessagesInTopics: a message sent with message_thread_id is in that
// topic; one to a topic that does not exist is refused; a reply without
// message_thread_id goes where its message is; a person's message in a
// topic says so; a deleted topic takes no more messages.
func TestMessagesInTopics(t *testing.T) {
	srv := telegramtest.NewServer(t)
	srv.MakeForum(forumID)
	b := newBot(t, srv, srv.Token())
	topic, err := b.CreateForumTopic(t.Context(), &bot.CreateForumTopicParams{ChatID: int64(forumID), Name: "health"})
	if err != nil {
		t.Fatal(err)
	}

	in, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: int64(forumID), MessageThreadID: topic.MessageThreadID, Text: "in the topic"})
	if err != nil {
		t.Fatal(err)
	}
	if in.MessageThreadID != topic.MessageThreadID || !in.IsTopicMessage || !in.Chat.IsForum {
		t.Errorf("sent = thread %d topic %v forum %v, want thread %d in a forum", in.MessageThreadID, in.IsTopicMessage, in.Chat.IsForum, topic.MessageThreadID)
	}
	general, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: int64(forumID), Text: "in General"})
	if err != nil || general.MessageThreadID != 0 || general.IsTopicMessage {
		t.Errorf("without a thread: %+v, %v; want the General topic", general, err)
	}
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: int64(forumID), MessageThreadID: 999, Text: "nowhere"}); !errors.Is(err, bot.ErrorBadRequest) || !strings.Contains(err.Error(), "message thread not found") {
		t.Errorf("an unknown thread: err = %v, want 400 message thread not found", err)
	}

	_, person := srv.SendUserMessage(srv.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: forumID}, From: &telegramtest.User{ID: 12345, FirstName: "Ann"}, MessageThreadID: int64(topic.MessageThreadID), Text: "hello"})
	if person.MessageThreadID != int64(topic.MessageThreadID) || !person.IsTopicMessage || !person.Chat.IsForum || person.Chat.Type != "supergroup" {
		t.Errorf("the person's message = %+v, want it in the topic of a forum supergroup", person)
	}
	reply, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: int64(forumID), Text: "a reply",
		ReplyParameters: &models.ReplyParameters{MessageID: int(person.MessageID)}})
	if err != nil || reply.MessageThreadID != topic.MessageThreadID || !reply.IsTopicMessage {
		t.Errorf("a reply to the topic's message: %+v, %v; want it in the topic", reply, err)
	}
	_, byReply := srv.SendUserMessage(srv.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: forumID}, Text: "re", ReplyToMessage: &telegramtest.Message{MessageID: int64(in.ID)}})
	if byReply.MessageThreadID != int64(topic.MessageThreadID) || !byReply.IsTopicMessage {
		t.Errorf("a person's reply in the topic = %+v, want it in the topic", byReply)
	}

	srv.DeleteTopic(forumID, int64(topic.MessageThreadID))
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: int64(forumID), MessageThreadID: topic.MessageThreadID, Text: "after"}); err == nil || !strings.Contains(err.Error(), "message thread not found") {
		t.Errorf("after the topic was deleted: err = %v, want message thread not found", err)
	}
	if got := srv.Topics(forumID); len(got) != 0 {
		t.Errorf("Topics after the delete = %+v", got)
	}
}
