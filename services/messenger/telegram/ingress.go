package telegram

import (
	"strconv"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/forum"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// allowedUpdates are the update types the receiver asks for: messages to the
// bot and taps on its buttons. Edits are left out: an edited message would
// reach the butler as a second message with no link to the first.
var allowedUpdates = []string{"message", "callback_query", "message_reaction"}

// Limits of ingress.v1 on what comes from Telegram. Telegram's own limits are
// far lower (4096 characters of text, 64 bytes of callback data), so these
// only keep a broken or hostile server from producing an envelope the bus
// refuses.
const (
	maxText     = 262144
	maxMeta     = 4096
	maxFileName = 512
	maxMime     = 255
	maxRef      = 2048
)

// fileRefPrefix starts an attachment's ref; the file id after it is what the
// Bot API's getFile takes.
const fileRefPrefix = "telegram:file:"

// toIngress turns an update into an ingress.v1 for integration (received by
// the bot botID at now), or nil if it holds nothing a butler can use (a
// service message: someone joined, the chat photo changed). queryID is the
// callback query to answer once the ingress is stored.
func toIngress(integration, botID string, u *models.Update, now time.Time) (in *envelope.Ingress, queryID string) {
	nativeID := botID + ":" + strconv.FormatInt(u.ID, 10)
	switch {
	case u.Message != nil:
		return fromMessage(integration, nativeID, u.Message), ""
	case u.CallbackQuery != nil:
		return fromCallback(integration, nativeID, u.CallbackQuery, now), u.CallbackQuery.ID
	case u.MessageReaction != nil:
		return fromReaction(integration, nativeID, u.MessageReaction), ""
	}
	return nil, ""
}

// fromReaction is a person's reaction set on a message: its text the emoji,
// meta event_type "reaction", reaction the emoji and reply_to_message_id the
// message it is on. It acknowledges a note that must be seen (the
// switchboard's attention); no other reaction goes further. A reaction
// taken off (none new), a custom or paid one, and an anonymous admin's (no
// user) are nil.
func fromReaction(integration, nativeID string, r *models.MessageReactionUpdated) *envelope.Ingress {
	emoji := ""
	for _, t := range r.NewReaction {
		if t.ReactionTypeEmoji != nil && t.ReactionTypeEmoji.Emoji != "" {
			emoji = t.ReactionTypeEmoji.Emoji
		}
	}
	if emoji == "" || r.User == nil || r.MessageID == 0 {
		return nil
	}
	meta := chatMeta(r.Chat, 0, 0)
	meta[envelope.MetaEventType] = envelope.EventReaction
	meta["reaction"] = emoji
	meta["reply_to_message_id"] = strconv.Itoa(r.MessageID)
	meta["ts"] = strconv.Itoa(r.Date)
	userMeta(meta, r.User)
	sender := strconv.FormatInt(r.User.ID, 10)
	return envelope.NewIngress(integration, "telegram", integration, sender, threadIdentity(r.Chat.ID, r.MessageID), deliver.Clip(emoji, maxText), nativeID, deliver.ClipMeta(meta))
}

func fromMessage(integration, nativeID string, m *models.Message) *envelope.Ingress {
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	if text == "" && m.Sticker != nil {
		text = m.Sticker.Emoji
	}
	files := attachments(m)
	if text == "" && len(files) == 0 {
		return nil
	}
	meta := chatMeta(m.Chat, m.ID, m.MessageThreadID)
	topicMeta(meta, m)
	meta["ts"] = strconv.Itoa(m.Date)
	if r := m.ReplyToMessage; r != nil && r.ID != 0 {
		meta["reply_to_message_id"] = strconv.Itoa(r.ID)
		text := r.Text
		if text == "" {
			text = r.Caption
		}
		from := ""
		if r.From != nil {
			from = displayName(r.From)
		}
		envelope.Quoted(meta, text, from)
	}
	sender := strconv.FormatInt(m.Chat.ID, 10)
	switch {
	case m.From != nil:
		sender = strconv.FormatInt(m.From.ID, 10)
		userMeta(meta, m.From)
	case m.SenderChat != nil:
		// An anonymous group admin or a channel writes as a chat.
		sender = strconv.FormatInt(m.SenderChat.ID, 10)
		meta["user_id"] = sender
		meta["user"] = chatName(*m.SenderChat)
	}
	in := envelope.NewIngress(integration, "telegram", integration, sender, threadIdentity(m.Chat.ID, m.ID), deliver.Clip(text, maxText), nativeID, deliver.ClipMeta(meta))
	in.Attachments = files
	return in
}

func fromCallback(integration, nativeID string, q *models.CallbackQuery, now time.Time) *envelope.Ingress {
	meta := map[string]string{}
	threadID := ""
	switch {
	case q.Message.Message != nil:
		m := q.Message.Message
		meta = chatMeta(m.Chat, m.ID, m.MessageThreadID)
		topicMeta(meta, m)
		threadID = threadIdentity(m.Chat.ID, m.ID)
	case q.Message.InaccessibleMessage != nil && q.Message.InaccessibleMessage.Chat.ID != 0:
		// The message with the button is older than Telegram shows bots.
		m := q.Message.InaccessibleMessage
		meta = chatMeta(m.Chat, m.MessageID, 0)
		threadID = threadIdentity(m.Chat.ID, m.MessageID)
	}
	// A tap has no date of its own; it happened now.
	meta["ts"] = strconv.FormatInt(now.Unix(), 10)
	meta["callback_data"] = q.Data
	meta["callback_query_id"] = q.ID
	userMeta(meta, &q.From)
	sender := strconv.FormatInt(q.From.ID, 10)
	return envelope.NewIngress(integration, "telegram", integration, sender, threadID, deliver.Clip(q.Data, maxText), nativeID, deliver.ClipMeta(meta))
}

// chatMeta is the meta every message has: where it was written.
func chatMeta(c models.Chat, messageID, threadID int) map[string]string {
	meta := map[string]string{"chat_id": strconv.FormatInt(c.ID, 10)}
	if c.Type != "" {
		meta["chat_type"] = string(c.Type)
	}
	if messageID != 0 {
		meta["message_id"] = strconv.Itoa(messageID)
	}
	if threadID != 0 {
		meta["thread_id"] = strconv.Itoa(threadID)
	}
	return meta
}

// topicMeta names the forum topic m was written in (forum.MetaTopic), by
// which the switchboard finds the butler whose topic it is. A reply in a
// group that is not a forum has a message_thread_id too, but no topic.
func topicMeta(meta map[string]string, m *models.Message) {
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		meta[forum.MetaTopic] = strconv.Itoa(m.MessageThreadID)
	}
}

func userMeta(meta map[string]string, u *models.User) {
	meta["user_id"] = strconv.FormatInt(u.ID, 10)
	if name := displayName(u); name != "" {
		meta["user"] = name
	}
}

// displayName is how meta names a Telegram user: the username, else the
// first name.
func displayName(u *models.User) string {
	if u.Username != "" {
		return u.Username
	}
	return u.FirstName
}

func chatName(c models.Chat) string {
	if c.Username != "" {
		return c.Username
	}
	return c.Title
}

// threadIdentity is a source_thread_identity, "<chat_id>:<message_id>", what a reply
// or a reaction needs.
func threadIdentity(chat int64, message int) string {
	if chat == 0 || message == 0 {
		return ""
	}
	return strconv.FormatInt(chat, 10) + ":" + strconv.Itoa(message)
}

// attachments describes the files of m without downloading them: their ref
// is the file id the Bot API's getFile takes.
func attachments(m *models.Message) []envelope.Attachment {
	var out []envelope.Attachment
	add := func(id, name, mime, fallbackName, fallbackMime string, size int64, seconds ...int) {
		if id == "" {
			return
		}
		if name == "" {
			name = fallbackName
		}
		if mime == "" {
			mime = fallbackMime
		}
		out = append(out, envelope.Attachment{
			Name: deliver.Clip(name, maxFileName), Mime: deliver.Clip(mime, maxMime), Size: max(size, 0), Ref: deliver.Clip(fileRefPrefix+id, maxRef),
		})
		for _, sec := range seconds {
			out[len(out)-1].Seconds = max(sec, 0)
		}
	}
	if n := len(m.Photo); n > 0 {
		// Telegram sends each photo in several sizes, the largest last.
		p := m.Photo[n-1]
		add(p.FileID, "", "", "photo.jpg", "image/jpeg", int64(p.FileSize))
	}
	if d := m.Document; d != nil {
		add(d.FileID, d.FileName, d.MimeType, "document", "application/octet-stream", d.FileSize)
	}
	if a := m.Audio; a != nil {
		add(a.FileID, a.FileName, a.MimeType, "audio.mp3", "audio/mpeg", a.FileSize, a.Duration)
	}
	if v := m.Voice; v != nil {
		add(v.FileID, "", v.MimeType, "voice.ogg", "audio/ogg", v.FileSize, v.Duration)
	}
	if v := m.Video; v != nil {
		add(v.FileID, v.FileName, v.MimeType, "video.mp4", "video/mp4", v.FileSize)
	}
	if v := m.VideoNote; v != nil {
		add(v.FileID, "", "", "video_note.mp4", "video/mp4", int64(v.FileSize))
	}
	if a := m.Animation; a != nil && m.Document == nil {
		// An animation comes with a document describing the same file.
		add(a.FileID, a.FileName, a.MimeType, "animation.mp4", "video/mp4", a.FileSize)
	}
	if s := m.Sticker; s != nil {
		name, mime := "sticker.webp", "image/webp"
		switch {
		case s.IsAnimated:
			name, mime = "sticker.tgs", "application/x-tgsticker"
		case s.IsVideo:
			name, mime = "sticker.webm", "video/webm"
		}
		add(s.FileID, "", "", name, mime, int64(s.FileSize))
	}
	return out
}
