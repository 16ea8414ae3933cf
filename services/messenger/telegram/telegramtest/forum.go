package telegramtest

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Forum topics, as the Bot API has them: a supergroup with topics turned on
// (MakeForum) is a forum; createForumTopic opens a topic there, whose
// message_thread_id is the id of the service message that opens it, and
// answers a ForumTopic. A message sent or written with message_thread_id
// goes into that topic (is_topic_message); one without goes to the General
// topic, unless it replies to a message in a topic, where a reply goes.
// createForumTopic in a chat that is not a forum is refused with 400 "Bad
// Request: the chat is not a forum", and a message_thread_id that names no
// topic (one deleted meanwhile, DeleteTopic) with 400 "Bad Request: message
// thread not found".

func init() {
	register("createForumTopic", false, createForumTopic)
}

// NotForumDescription is what Telegram answers createForumTopic in a chat
// that is not a forum.
const NotForumDescription = "Bad Request: the chat is not a forum"

// ThreadNotFoundDescription is what Telegram answers a message to a topic
// that does not exist (or no longer does).
const ThreadNotFoundDescription = "Bad Request: message thread not found"

// topicColors are the colors createForumTopic takes for a topic's icon
// (Bot API: icon_color), the default one chosen in turn.
var topicColors = []int{0x6FB9F0, 0xFFD67E, 0xCB86DB, 0x8EEE98, 0xFF93B2, 0xFB6F5F}

// MakeForum turns topics on in supergroup chatID (an id from
// -1000000000000 down), as its owner does in the group's settings.
func (s *Server) MakeForum(chatID int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.chatLocked(strconv.FormatInt(chatID, 10))
	if err != nil || c.chat.Type != "supergroup" {
		s.t.Fatalf("telegramtest: MakeForum: chat %d is not a supergroup (ids from -1000000000000 down); only a supergroup can be a forum", chatID)
	}
	c.chat.IsForum = true
	if c.topics == nil {
		c.topics = map[int64]*ForumTopic{}
	}
}

// Topics returns the topics open in chatID, oldest first.
func (s *Server) Topics(chatID int64) []ForumTopic {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil {
		return nil
	}
	var out []ForumTopic
	for _, t := range c.topics {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b ForumTopic) int { return int(a.MessageThreadID - b.MessageThreadID) })
	return out
}

// DeleteTopic deletes topic threadID of chatID with its messages, as a
// person with the right to do so does in the group.
func (s *Server) DeleteTopic(chatID, threadID int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil || c.topics[threadID] == nil {
		s.t.Fatalf("telegramtest: DeleteTopic: chat %d has no topic %d", chatID, threadID)
	}
	delete(c.topics, threadID)
	for id, m := range c.messages {
		if m.MessageThreadID == threadID && m.IsTopicMessage {
			delete(c.messages, id)
		}
	}
}

func createForumTopic(s *Server, req *request) (any, error) {
	p := req.params
	chat, err := s.chatLocked(p["chat_id"])
	if err != nil {
		return nil, err
	}
	if !chat.chat.IsForum {
		return nil, &apiError{code: http.StatusBadRequest, description: NotForumDescription}
	}
	name := p["name"]
	if strings.TrimSpace(name) == "" {
		return nil, badRequest("TOPIC_TITLE_EMPTY")
	}
	color := topicColors[len(chat.topics)%len(topicColors)]
	if raw, ok := p["icon_color"]; ok {
		if color, err = strconv.Atoi(raw); err != nil || !slices.Contains(topicColors, color) {
			return nil, badRequest("invalid icon_color: it must be one of 7322096, 16766590, 13338331, 9367192, 16749490 or 16478047")
		}
	}
	chat.lastID++
	bot := req.bot.user
	t := &ForumTopic{MessageThreadID: chat.lastID, Name: name, IconColor: color, IconCustomEmojiID: p["icon_custom_emoji_id"]}
	chat.topics[t.MessageThreadID] = t
	chat.messages[chat.lastID] = &Message{
		MessageID: chat.lastID, MessageThreadID: chat.lastID, IsTopicMessage: true,
		From: &bot, Date: time.Now().Unix(), Chat: chat.chat,
		ForumTopicCreated: &ForumTopicCreated{Name: t.Name, IconColor: t.IconColor, IconCustomEmojiID: t.IconCustomEmojiID},
	}
	c := *t
	return &c, nil
}

// threadOf is the thread a new message in the chat goes into: thread, which
// must be one of its topics in a forum (elsewhere it names a reply thread,
// taken as given), else the thread of the message it replies to in a
// forum, else none.
func (c *chatState) threadOf(thread int64, replyTo *Message) (int64, error) {
	switch {
	case thread < 0:
		return 0, &apiError{code: http.StatusBadRequest, description: ThreadNotFoundDescription}
	case thread > 0 && c.chat.IsForum:
		if c.topics[thread] == nil {
			return 0, &apiError{code: http.StatusBadRequest, description: ThreadNotFoundDescription}
		}
		return thread, nil
	case thread > 0:
		// A reply thread of a group without topics: the fake keeps no
		// record of those and takes the id as given.
		return thread, nil
	case replyTo != nil && c.chat.IsForum && replyTo.IsTopicMessage:
		return replyTo.MessageThreadID, nil
	}
	return 0, nil
}
