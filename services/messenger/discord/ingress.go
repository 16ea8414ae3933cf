package discord

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// discordEpoch is the first millisecond of 2015, where snowflakes count from.
const discordEpoch = 1420070400000

// user is a Discord user as events carry it.
type user struct {
	ID         string `json:"id"`
	Username   string `json:"username"`
	GlobalName string `json:"global_name"`
	Bot        bool   `json:"bot"`
	System     bool   `json:"system"`
}

// name is what people see: the display name, else the username, else the id.
func (u *user) name() string {
	for _, n := range []string{u.GlobalName, u.Username} {
		if n = strings.TrimSpace(n); n != "" {
			return n
		}
	}
	return u.ID
}

// messageEvent is MESSAGE_CREATE's data: a message, with the server it was
// written in (none in a direct message).
type messageEvent struct {
	ID               string `json:"id"`
	ChannelID        string `json:"channel_id"`
	GuildID          string `json:"guild_id"`
	Author           user   `json:"author"`
	Content          string `json:"content"`
	Timestamp        string `json:"timestamp"`
	Type             int    `json:"type"`
	WebhookID        string `json:"webhook_id"`
	MessageReference *struct {
		MessageID string `json:"message_id"`
		ChannelID string `json:"channel_id"`
	} `json:"message_reference"`
	// ReferencedMessage is the message a reply answers, as Discord sends
	// it with the reply (null if it was deleted).
	ReferencedMessage *struct {
		Content string `json:"content"`
		Author  user   `json:"author"`
	} `json:"referenced_message"`
	Attachments []struct {
		ID          string `json:"id"`
		Filename    string `json:"filename"`
		ContentType string `json:"content_type"`
		Size        int64  `json:"size"`
		URL         string `json:"url"`
	} `json:"attachments"`
	Member *struct {
		Nick string `json:"nick"`
	} `json:"member"`
}

// Message types a person writes: a plain message and a reply. Every other
// type is a system message (joins, pins, thread starts, boosts).
const (
	messageDefault = 0
	messageReply   = 19
)

// interactionEvent is INTERACTION_CREATE's data, as far as a button press
// needs it.
type interactionEvent struct {
	ID        string `json:"id"`
	Type      int    `json:"type"`
	Token     string `json:"token"`
	GuildID   string `json:"guild_id"`
	ChannelID string `json:"channel_id"`
	Data      struct {
		CustomID      string `json:"custom_id"`
		ComponentType int    `json:"component_type"`
	} `json:"data"`
	Member *struct {
		User user `json:"user"`
	} `json:"member"`
	User    *user `json:"user"`
	Message *struct {
		ID        string `json:"id"`
		ChannelID string `json:"channel_id"`
	} `json:"message"`
}

// interactionComponent is a press of a message component (a button).
const interactionComponent = 3

// where is a message's place: its channel, and whether that channel is a
// thread and of which channel.
type where struct {
	thread bool
	parent string
}

// fromMessage turns a MESSAGE_CREATE into an ingress.v1 for integration,
// received by the bot botUser, or nil and why not when it holds nothing a
// butler should get: a bot's or webhook's message (the bot's own included),
// a system message, a message with no text and no files.
//
// The conversation is the channel: a server's channel, a direct message, or
// a thread, which in Discord is a channel of its own; a message in a thread
// also names it (meta thread_id, and parent_id the channel it hangs off).
// source_thread_identity is "<channel id>:<message id>", where a reply
// (message_reference) and a reaction go; the native id is the same pair,
// unique for good, so a resumed session's replay and a second replica's copy
// of one message collapse into one.
func fromMessage(integration, botUser string, m *messageEvent, at where) (*envelope.Ingress, string) {
	switch {
	case m.Author.Bot || m.Author.System || m.WebhookID != "":
		return nil, "a bot's or webhook's message"
	case m.Author.ID == "" || (botUser != "" && m.Author.ID == botUser):
		return nil, "the bot's own message"
	case m.Type != messageDefault && m.Type != messageReply:
		return nil, "a system message (type " + strconv.Itoa(m.Type) + ")"
	case !snowflakePattern.MatchString(m.ChannelID) || !snowflakePattern.MatchString(m.ID):
		return nil, "no channel or message id"
	}
	text := inboundText(m.Content, botUser)
	files := messageFiles(m)
	if strings.TrimSpace(text) == "" && len(files) == 0 {
		return nil, "no text or files"
	}
	meta := map[string]string{
		"chat_id":    m.ChannelID,
		"channel_id": m.ChannelID,
		"chat_type":  "private",
		"message_id": m.ID,
		"user_id":    m.Author.ID,
		"user":       m.Author.name(),
		"ts":         strconv.FormatInt(timeOf(m.ID, m.Timestamp).Unix(), 10),
	}
	if m.GuildID != "" {
		meta["chat_type"] = "group"
		meta["guild_id"] = m.GuildID
		if m.Member != nil && strings.TrimSpace(m.Member.Nick) != "" {
			meta["user"] = strings.TrimSpace(m.Member.Nick)
		}
	}
	if at.thread {
		meta["thread_id"] = m.ChannelID
		if at.parent != "" {
			meta["parent_id"] = at.parent
		}
	}
	if r := m.MessageReference; r != nil && m.Type == messageReply && r.MessageID != "" && (r.ChannelID == "" || r.ChannelID == m.ChannelID) {
		meta["reply_to_message_id"] = r.MessageID
		if q := m.ReferencedMessage; q != nil {
			envelope.Quoted(meta, q.Content, q.Author.name())
		}
	}
	endpoint := botUser
	if endpoint == "" {
		endpoint = integration
	}
	in := envelope.NewIngress(integration, "discord", endpoint, m.Author.ID, m.ChannelID+":"+m.ID,
		deliver.Clip(text, deliver.MaxText), m.ChannelID+":"+m.ID, deliver.ClipMeta(meta))
	in.Attachments = files
	return in, ""
}

// fromInteraction turns a button press into an ingress.v1, or nil and why
// not. Its text and meta callback_data are the button's custom_id (the
// action's data), callback_query_id the interaction; it is about the message
// the button is under, whose thread identity it has. The native id is the
// interaction's, unique for good.
func fromInteraction(integration, botUser string, ev *interactionEvent, at where) (*envelope.Ingress, string) {
	var u *user
	switch {
	case ev.Member != nil:
		u = &ev.Member.User
	case ev.User != nil:
		u = ev.User
	}
	switch {
	case ev.Type != interactionComponent:
		return nil, "not a component interaction (type " + strconv.Itoa(ev.Type) + ")"
	case ev.Data.CustomID == "":
		return nil, "no custom_id"
	case u == nil || u.ID == "" || u.Bot:
		return nil, "no person pressed it"
	case !snowflakePattern.MatchString(ev.ID) || !snowflakePattern.MatchString(ev.ChannelID):
		return nil, "no interaction or channel id"
	}
	meta := map[string]string{
		"chat_id":           ev.ChannelID,
		"channel_id":        ev.ChannelID,
		"chat_type":         "private",
		"user_id":           u.ID,
		"user":              u.name(),
		"callback_data":     ev.Data.CustomID,
		"callback_query_id": ev.ID,
		"ts":                strconv.FormatInt(timeOf(ev.ID, "").Unix(), 10),
	}
	if ev.GuildID != "" {
		meta["chat_type"] = "group"
		meta["guild_id"] = ev.GuildID
	}
	if at.thread {
		meta["thread_id"] = ev.ChannelID
		if at.parent != "" {
			meta["parent_id"] = at.parent
		}
	}
	thread := ""
	if m := ev.Message; m != nil && snowflakePattern.MatchString(m.ID) {
		meta["message_id"] = m.ID
		thread = ev.ChannelID + ":" + m.ID
	}
	endpoint := botUser
	if endpoint == "" {
		endpoint = integration
	}
	return envelope.NewIngress(integration, "discord", endpoint, u.ID, thread, deliver.Clip(ev.Data.CustomID, deliver.MaxText), "interaction:"+ev.ID, deliver.ClipMeta(meta)), ""
}

// inboundText is the text as the person wrote it, without the mention of
// the bot that starts a message to it ("<@123> hi").
func inboundText(text, botUser string) string {
	if botUser == "" {
		return text
	}
	trimmed := strings.TrimLeft(text, " ")
	for _, m := range []string{"<@" + botUser + ">", "<@!" + botUser + ">"} {
		if rest, ok := strings.CutPrefix(trimmed, m); ok {
			return strings.TrimLeft(rest, " :,")
		}
	}
	return text
}

// messageFiles describes the attachments of m without downloading them:
// their ref is the attachment's URL on Discord's CDN, signed and valid for
// about a day, with in its fragment ("#<channel>:<message>:<attachment>")
// the message it came with, whose fetching renews the link (Fetch).
func messageFiles(m *messageEvent) []envelope.Attachment {
	var out []envelope.Attachment
	for _, a := range m.Attachments {
		if a.ID == "" || len(out) == deliver.MaxFiles {
			continue
		}
		ref := a.URL
		switch {
		case ref == "":
			ref = "discord:attachment:" + a.ID
		case !strings.Contains(ref, "#"):
			ref += "#" + m.ChannelID + ":" + m.ID + ":" + a.ID
		}
		out = append(out, deliver.Attachment(a.Filename, a.ContentType, a.Size, ref))
	}
	return out
}

// timeOf is when a message was written: its timestamp, else the time its
// snowflake id holds.
func timeOf(id, timestamp string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, timestamp); err == nil {
		return t
	}
	if n, err := strconv.ParseUint(id, 10, 64); err == nil && n > 0 {
		return time.UnixMilli(int64(n>>22) + discordEpoch)
	}
	return time.Now()
}

// decodeMessage reads MESSAGE_CREATE's data.
func decodeMessage(d json.RawMessage) (*messageEvent, error) {
	var m messageEvent
	if err := json.Unmarshal(d, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// reactionEvent is MESSAGE_REACTION_ADD's data.
type reactionEvent struct {
	UserID    string `json:"user_id"`
	ChannelID string `json:"channel_id"`
	MessageID string `json:"message_id"`
	GuildID   string `json:"guild_id"`
	Member    *struct {
		User user   `json:"user"`
		Nick string `json:"nick"`
	} `json:"member"`
	Emoji struct {
		ID   *string `json:"id"`
		Name string  `json:"name"`
	} `json:"emoji"`
}

// fromReaction turns a person's reaction on a message into an ingress.v1,
// or nil and why not: its text the emoji (a custom emoji's name), meta
// event_type reaction, reaction the emoji and reply_to_message_id the
// message it is on. It acknowledges a note that must be seen (the
// switchboard's attention); no other reaction goes further. The native id
// is the reaction's: the same person's same emoji on a message is one.
func fromReaction(integration, botUser string, ev *reactionEvent) (*envelope.Ingress, string) {
	switch {
	case ev.UserID == "" || (botUser != "" && ev.UserID == botUser) || (ev.Member != nil && ev.Member.User.Bot):
		return nil, "the bot's own or no one's reaction"
	case !snowflakePattern.MatchString(ev.ChannelID) || !snowflakePattern.MatchString(ev.MessageID):
		return nil, "no channel or message id"
	case ev.Emoji.Name == "" || len(ev.Emoji.Name) > 100:
		return nil, "no emoji"
	}
	meta := map[string]string{
		"chat_id": ev.ChannelID, "channel_id": ev.ChannelID, "chat_type": "private", "user_id": ev.UserID,
		envelope.MetaEventType: envelope.EventReaction, "reaction": ev.Emoji.Name, "reply_to_message_id": ev.MessageID,
	}
	if ev.GuildID != "" {
		meta["chat_type"] = "group"
		meta["guild_id"] = ev.GuildID
		if ev.Member != nil {
			meta["user"] = ev.Member.User.name()
			if n := strings.TrimSpace(ev.Member.Nick); n != "" {
				meta["user"] = n
			}
		}
	}
	endpoint := botUser
	if endpoint == "" {
		endpoint = integration
	}
	native := "reaction:" + ev.ChannelID + ":" + ev.MessageID + ":" + ev.UserID + ":" + ev.Emoji.Name
	return envelope.NewIngress(integration, "discord", endpoint, ev.UserID, ev.ChannelID+":"+ev.MessageID, ev.Emoji.Name, deliver.Clip(native, deliver.MaxNativeID), deliver.ClipMeta(meta)), ""
}
