package discordtest

import (
	"encoding/json"
	"strings"
)

// MessageOptions describe a person's message.
type MessageOptions struct {
	// Channel is where it is written (a server's channel or a thread);
	// default ChannelGeneral.
	Channel string
	// Author is who writes it; default HumanID.
	Author string
	// Content is its text.
	Content string
	// ReplyTo, if set, is the id of the message of the channel it answers
	// (Discord's reply).
	ReplyTo string
	// Attachments are its files.
	Attachments []Attachment
	// WebhookID marks it as a webhook's.
	WebhookID string
}

// UserMessage makes a person write a message: the fake keeps it (so that a
// reply or a reaction finds it) and dispatches MESSAGE_CREATE, with
// guild_id and member, to a session with the GUILD_MESSAGES intent; without
// MESSAGE_CONTENT its text and files are left out, as Discord leaves them
// out unless the bot is mentioned.
func (s *Server) UserMessage(o MessageOptions) Message {
	s.t.Helper()
	if o.Channel == "" {
		o.Channel = ChannelGeneral
	}
	if o.Author == "" {
		o.Author = HumanID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[o.Channel]
	u := s.users[o.Author]
	if c == nil || u == nil {
		s.t.Errorf("discordtest: UserMessage in unknown channel %q or by unknown user %q", o.Channel, o.Author)
		return Message{}
	}
	m := s.newMessageLocked(c, u, o)
	need := intentGuildMessages
	if c.Type == TypeDM {
		need = intentDirectMessages
	}
	s.gw.dispatchLocked(s, "MESSAGE_CREATE", s.messageEventLocked(c, m), need)
	return copyMessage(m)
}

// DirectMessage makes user write content to the bot in their direct
// message (opened if need be), dispatching MESSAGE_CREATE without guild_id
// to a session with the DIRECT_MESSAGES intent.
func (s *Server) DirectMessage(user, content string) Message {
	s.t.Helper()
	s.mu.Lock()
	u := s.users[user]
	if u == nil {
		s.mu.Unlock()
		s.t.Errorf("discordtest: DirectMessage from unknown user %q", user)
		return Message{}
	}
	ch := s.dmLocked(u).ID
	s.mu.Unlock()
	return s.UserMessage(MessageOptions{Channel: ch, Author: user, Content: content})
}

// Again dispatches MESSAGE_CREATE for m a second time, as a new event:
// what a client sees when Discord replays an event it already handled.
func (s *Server) Again(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[m.ChannelID]
	if c == nil {
		return
	}
	need := intentGuildMessages
	if c.Type == TypeDM {
		need = intentDirectMessages
	}
	s.gw.dispatchLocked(s, "MESSAGE_CREATE", s.messageEventLocked(c, &m), need)
}

func (s *Server) newMessageLocked(c *Channel, u *User, o MessageOptions) *Message {
	m := &Message{
		ID: s.nextIDLocked(), ChannelID: c.ID, Author: *u, Content: o.Content, Timestamp: now(),
		Mentions: []User{}, MentionRoles: []string{}, Attachments: o.Attachments, Embeds: []json.RawMessage{},
		Type: MessageDefault, Components: []Component{}, WebhookID: o.WebhookID,
	}
	if m.Attachments == nil {
		m.Attachments = []Attachment{}
	}
	if o.ReplyTo != "" {
		m.Type = MessageReply
		m.MessageReference = &MessageReference{Type: ptr(0), MessageID: o.ReplyTo, ChannelID: c.ID, GuildID: c.GuildID}
	}
	if strings.Contains(o.Content, "<@"+BotID+">") {
		m.Mentions = append(m.Mentions, *s.users[BotID])
	}
	s.addMessageLocked(c, m)
	return m
}

// messageEventLocked is MESSAGE_CREATE's data for m in c.
func (s *Server) messageEventLocked(c *Channel, m *Message) map[string]any {
	var ev map[string]any
	b, _ := json.Marshal(m)
	_ = json.Unmarshal(b, &ev)
	if c.GuildID != "" {
		ev["guild_id"] = c.GuildID
		ev["member"] = map[string]any{"nick": nil, "roles": []string{}, "joined_at": now(), "deaf": false, "mute": false, "flags": 0}
	}
	if ref := m.MessageReference; ref != nil {
		if orig := s.messageLocked(c.ID, ref.MessageID); orig != nil {
			ev["referenced_message"] = orig
		}
	}
	mentioned := len(m.Mentions) > 0
	if sess := s.gw.current; sess != nil && sess.intents&intentMessageContent == 0 && c.GuildID != "" && !mentioned {
		ev["content"] = ""
		ev["attachments"] = []any{}
		ev["embeds"] = []any{}
		ev["components"] = []any{}
	}
	return ev
}

// StartThread makes a person start a thread from message of channel, named
// name, and dispatches THREAD_CREATE; it returns the thread's id (the
// message's, as Discord has it).
func (s *Server) StartThread(channel, message, name string) string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[channel]
	var m *Message
	if c != nil {
		m = s.messageLocked(channel, message)
	}
	if m == nil {
		s.t.Errorf("discordtest: StartThread on unknown message %s of channel %s", message, channel)
		return ""
	}
	th, err := s.threadLocked(c, m, name, HumanID)
	if err != nil {
		s.t.Errorf("discordtest: StartThread: %v", err)
		return ""
	}
	return th.ID
}

// Press makes user press the button with customID under message of
// channel, and dispatches INTERACTION_CREATE (type 3, a message
// component), with member in a server and user in a direct message; it
// returns the interaction's id. The interaction's token is valid for 15
// minutes, for one callback.
func (s *Server) Press(channel, message, customID, user string) string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, m, u := s.onMessageLocked("Press", channel, message, user)
	if u == nil {
		return ""
	}
	id := s.nextIDLocked()
	token := "aW50ZXJhY3Rpb246" + randomSecret(120)
	s.interactions[id] = &interaction{token: token, created: timeNow()}
	ev := map[string]any{
		"id": id, "application_id": BotID, "type": 3, "token": token, "version": 1,
		"channel_id": c.ID, "channel": map[string]any{"id": c.ID, "type": c.Type},
		"data":    map[string]any{"custom_id": customID, "component_type": 2},
		"message": copyMessage(m), "locale": "en-US", "app_permissions": "562949953421311", "entitlements": []any{},
		"authorizing_integration_owners": map[string]any{"0": GuildID}, "context": 0,
	}
	if c.GuildID != "" {
		ev["guild_id"] = c.GuildID
		ev["guild_locale"] = "en-US"
		ev["member"] = map[string]any{"user": u, "nick": nil, "roles": []string{}, "permissions": "562949953421311", "joined_at": now()}
	} else {
		ev["user"] = u
		ev["context"] = 1
	}
	s.gw.dispatchLocked(s, "INTERACTION_CREATE", ev, 0)
	return id
}

// React makes user react with emoji (a Unicode emoji) on message of
// channel, and dispatches MESSAGE_REACTION_ADD as Discord does: only to a
// session that identified with the reaction intent of that kind of
// channel (GUILD_MESSAGE_REACTIONS, DIRECT_MESSAGE_REACTIONS).
func (s *Server) React(channel, message, user, emoji string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, m, u := s.onMessageLocked("React", channel, message, user)
	if u == nil {
		return
	}
	ev := map[string]any{
		"user_id": u.ID, "channel_id": c.ID, "message_id": m.ID, "message_author_id": m.Author.ID,
		"emoji": map[string]any{"id": nil, "name": emoji}, "burst": false, "burst_colors": []string{}, "type": 0,
	}
	need := intentDirectMessageReactions
	if c.GuildID != "" {
		need = intentGuildMessageReactions
		ev["guild_id"] = c.GuildID
		ev["member"] = map[string]any{"user": u, "nick": nil, "roles": []string{}, "joined_at": now()}
	}
	s.gw.dispatchLocked(s, "MESSAGE_REACTION_ADD", ev, need)
}

// NewThread makes a person open a thread in channel without a starter
// message (Discord's Create Thread from the channel's thread list), and
// dispatches THREAD_CREATE; it returns the thread's id.
func (s *Server) NewThread(channel, name string) string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[channel]
	if c == nil || c.Type != TypeGuildText {
		s.t.Errorf("discordtest: NewThread in unknown channel %s", channel)
		return ""
	}
	th, err := s.threadLocked(c, &Message{ID: s.nextIDLocked()}, name, HumanID)
	if err != nil {
		s.t.Errorf("discordtest: NewThread: %v", err)
		return ""
	}
	return th.ID
}

// onMessageLocked is what what (Press, React) acts on: message of channel,
// and user; all nil, the test failed, if any is unknown.
func (s *Server) onMessageLocked(what, channel, message, user string) (*Channel, *Message, *User) {
	s.t.Helper()
	c := s.channels[channel]
	u := s.users[user]
	var m *Message
	if c != nil {
		m = s.messageLocked(channel, message)
	}
	if m == nil || u == nil {
		s.t.Errorf("discordtest: %s on unknown message %s of channel %s, or by unknown user %s", what, message, channel, user)
		return nil, nil, nil
	}
	return c, m, u
}
