package telegramtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxTextLength is Telegram's limit on a message's text after entity parsing,
// in UTF-16 code units.
const MaxTextLength = 4096

func init() {
	register("getMe", false, getMe)
	register("sendMessage", false, sendMessage)
	register("setMessageReaction", false, setMessageReaction)
	register("getUpdates", true, getUpdates)
	register("answerCallbackQuery", false, answerCallbackQuery)
	register("editMessageText", false, editMessageText)
	register("sendChatAction", false, sendChatAction)
}

// chatActions are the actions sendChatAction takes.
var chatActions = map[string]bool{"typing": true, "upload_photo": true, "record_video": true, "upload_video": true, "record_voice": true,
	"upload_voice": true, "upload_document": true, "choose_sticker": true, "find_location": true, "record_video_note": true, "upload_video_note": true}

// sendChatAction is Telegram's: the chat must exist and the action be one
// of its names; the answer is true.
func sendChatAction(s *Server, req *request) (any, error) {
	p := req.params
	if _, err := s.chatLocked(p["chat_id"]); err != nil {
		return nil, err
	}
	if !chatActions[p["action"]] {
		return nil, badRequest("wrong parameter action in request")
	}
	return true, nil
}

func getMe(_ *Server, req *request) (any, error) {
	return req.bot.user, nil
}

func sendMessage(s *Server, req *request) (any, error) {
	p := req.params
	chat, err := s.chatLocked(p["chat_id"])
	if err != nil {
		return nil, err
	}
	visible, entities, err := messageText(p)
	if err != nil {
		return nil, err
	}
	if raw, ok := p["link_preview_options"]; ok {
		var lp LinkPreviewOptions
		if err := json.Unmarshal([]byte(raw), &lp); err != nil {
			return nil, badRequest("can't parse link preview options JSON object")
		}
		req.call.LinkPreviewOptions = &lp
	}
	return s.postLocked(req, chat, func(m *Message) { m.Text, m.Entities = visible, entities })
}

// postLocked adds the bot's message to chat, with what fill sets (its text
// or its files), as every sending method does: its buttons, the message it
// replies to and its forum topic, from the call's parameters.
func (s *Server) postLocked(req *request, chat *chatState, fill func(*Message)) (*Message, error) {
	p := req.params
	markup, err := inlineKeyboard(p)
	if err != nil {
		return nil, err
	}
	req.call.ReplyMarkup = markup

	var replyTo, replyInChat *Message
	rp, err := replyParameters(p)
	if err != nil {
		return nil, err
	}
	if rp != nil {
		req.call.ReplyParameters = rp
		target := chat
		if rp.ChatID != "" {
			if target, err = s.chatLocked(rp.ChatID); err != nil {
				return nil, err
			}
		}
		if m := target.messages[rp.MessageID]; m != nil {
			c := *m
			c.ReplyToMessage = nil
			replyTo = &c
			if target == chat {
				replyInChat = m
			}
		} else if !rp.AllowSendingWithoutReply {
			return nil, badRequest("message to be replied not found")
		}
	}
	var thread int64
	if raw, ok := p["message_thread_id"]; ok && raw != "" && raw != "0" {
		if thread, err = strconv.ParseInt(raw, 10, 64); err != nil {
			return nil, badRequest("message thread not found")
		}
	}
	if thread, err = chat.threadOf(thread, replyInChat); err != nil {
		return nil, err
	}

	chat.lastID++
	bot := req.bot.user
	m := &Message{
		MessageID:       chat.lastID,
		MessageThreadID: thread,
		IsTopicMessage:  chat.chat.IsForum && thread != 0,
		From:            &bot,
		Date:            time.Now().Unix(),
		Chat:            chat.chat,
		ReplyToMessage:  replyTo,
		ReplyMarkup:     markup,
	}
	fill(m)
	chat.messages[m.MessageID] = m
	c := *m
	req.call.Message = &c
	return m, nil
}

// messageText is what a message's text and parse_mode show, checked as
// Telegram checks them: UTF-8, HTML that parses, not empty, not too long.
func messageText(p map[string]string) (string, []Entity, error) {
	text := p["text"]
	if !utf8.ValidString(text) {
		return "", nil, badRequest("strings must be encoded in UTF-8")
	}
	visible := text
	var entities []Entity
	switch strings.ToLower(p["parse_mode"]) {
	case "":
	case "html":
		var err error
		visible, entities, err = ParseHTML(text)
		if err != nil {
			return "", nil, badRequest("can't parse entities: %v", err)
		}
	case "markdown", "markdownv2":
		// Accepted but not checked: the fake only validates HTML.
	default:
		return "", nil, badRequest("unsupported parse_mode")
	}
	if strings.TrimSpace(visible) == "" {
		return "", nil, badRequest("message text is empty")
	}
	if UTF16Len(visible) > MaxTextLength {
		return "", nil, badRequest("message is too long")
	}
	return visible, entities, nil
}

// editMessageText replaces the text of a message the bot sent in a chat, as
// Telegram does: parse_mode as in sendMessage; the inline keyboard is the
// reply_markup given, so one left out is removed; a message not found, or
// not the bot's, is 400; the same text and markup again is 400 "message is
// not modified".
func editMessageText(s *Server, req *request) (any, error) {
	p := req.params
	if p["inline_message_id"] != "" {
		return nil, badRequest("the fake edits only messages in chats (chat_id and message_id)")
	}
	chat, err := s.chatLocked(p["chat_id"])
	if err != nil {
		return nil, err
	}
	id, err := strconv.ParseInt(p["message_id"], 10, 64)
	if err != nil {
		return nil, badRequest("message identifier is not specified")
	}
	m := chat.messages[id]
	if m == nil || m.From == nil || m.From.ID != req.bot.user.ID {
		return nil, badRequest("message to edit not found")
	}
	visible, entities, err := messageText(p)
	if err != nil {
		return nil, err
	}
	markup, err := inlineKeyboard(p)
	if err != nil {
		return nil, err
	}
	if markup != nil && len(markup.InlineKeyboard) == 0 {
		markup = nil
	}
	req.call.ReplyMarkup = markup
	if visible == m.Text && markup == nil && m.ReplyMarkup == nil {
		return nil, badRequest("message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	}
	m.Text, m.Entities, m.ReplyMarkup = visible, entities, markup
	c := *m
	req.call.Message = &c
	return m, nil
}

// replyParameters decodes reply_parameters, or the older reply_to_message_id
// and allow_sending_without_reply parameters.
func replyParameters(p map[string]string) (*ReplyParameters, error) {
	if raw, ok := p["reply_parameters"]; ok {
		var v struct {
			ReplyParameters
			ChatID json.RawMessage `json:"chat_id"`
		}
		if err := json.Unmarshal([]byte(raw), &v); err != nil || v.MessageID == 0 {
			return nil, badRequest("can't parse reply parameters JSON object")
		}
		rp := v.ReplyParameters
		if len(v.ChatID) > 0 {
			var str string
			if json.Unmarshal(v.ChatID, &str) == nil {
				rp.ChatID = str
			} else {
				rp.ChatID = string(v.ChatID)
			}
		}
		return &rp, nil
	}
	if raw, ok := p["reply_to_message_id"]; ok {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return nil, badRequest("message to be replied not found")
		}
		return &ReplyParameters{MessageID: id, AllowSendingWithoutReply: p["allow_sending_without_reply"] == "true"}, nil
	}
	return nil, nil
}

// maxCallbackData is Telegram's limit on a button's callback_data, in bytes.
const maxCallbackData = 64

// inlineKeyboard decodes and checks an inline keyboard in reply_markup; other
// markups (a reply keyboard, force_reply) are accepted unchecked.
func inlineKeyboard(p map[string]string) (*InlineKeyboardMarkup, error) {
	raw, ok := p["reply_markup"]
	if !ok || raw == "" {
		return nil, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &top); err != nil {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	rowsRaw, ok := top["inline_keyboard"]
	if !ok {
		return nil, nil
	}
	var rows [][]map[string]json.RawMessage
	if err := json.Unmarshal(rowsRaw, &rows); err != nil {
		return nil, badRequest("can't parse inline keyboard button: field \"inline_keyboard\" must be an Array of Arrays")
	}
	m := &InlineKeyboardMarkup{}
	for _, row := range rows {
		var out []InlineKeyboardButton
		for _, fields := range row {
			var b InlineKeyboardButton
			for k := range fields {
				b.Fields = append(b.Fields, k)
			}
			slices.Sort(b.Fields)
			if err := json.Unmarshal(mustJSON(fields), &b); err != nil || b.Text == "" {
				return nil, badRequest("can't parse inline keyboard button: Text must be non-empty")
			}
			if ct, ok := fields["copy_text"]; ok {
				var v struct {
					Text string `json:"text"`
				}
				if json.Unmarshal(ct, &v) != nil || v.Text == "" {
					return nil, badRequest("BUTTON_COPY_TEXT_INVALID")
				}
			}
			if _, ok := fields["callback_data"]; ok && (b.CallbackData == "" || len(b.CallbackData) > maxCallbackData) {
				return nil, badRequest("BUTTON_DATA_INVALID")
			}
			actions := 0
			for _, k := range []string{"url", "callback_data", "web_app", "login_url", "switch_inline_query",
				"switch_inline_query_current_chat", "switch_inline_query_chosen_chat", "copy_text", "callback_game", "pay"} {
				if _, ok := fields[k]; ok {
					actions++
				}
			}
			if actions != 1 {
				return nil, badRequest("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
			}
			out = append(out, b)
		}
		m.InlineKeyboard = append(m.InlineKeyboard, out)
	}
	return m, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func answerCallbackQuery(_ *Server, req *request) (any, error) {
	id := req.params["callback_query_id"]
	answered, known := req.bot.queries[id]
	if !known || answered {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	req.bot.queries[id] = true
	return true, nil
}

func setMessageReaction(s *Server, req *request) (any, error) {
	p := req.params
	if _, err := s.chatLocked(p["chat_id"]); err != nil {
		return nil, err
	}
	if id, err := strconv.ParseInt(p["message_id"], 10, 64); err != nil || id <= 0 {
		return nil, badRequest("MESSAGE_ID_INVALID")
	}
	raw, ok := p["reaction"]
	if !ok || raw == "" {
		return true, nil // an empty reaction removes the bot's reaction
	}
	var reactions []Reaction
	if err := json.Unmarshal([]byte(raw), &reactions); err != nil {
		return nil, badRequest("can't parse reaction types JSON object")
	}
	req.call.Reaction = reactions
	for _, r := range reactions {
		switch r.Type {
		case "emoji":
			if !reactionSet[r.Emoji] {
				return nil, badRequest("REACTION_INVALID")
			}
		case "custom_emoji", "paid":
		default:
			return nil, badRequest("REACTION_INVALID")
		}
	}
	if len(reactions) > 1 {
		return nil, badRequest("REACTIONS_TOO_MANY")
	}
	return true, nil
}

// ConflictDescription is what Telegram answers a getUpdates that another
// getUpdates of the same bot ended, and what to pass FailNext to fake one.
const ConflictDescription = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"

// maxPoll bounds a long poll, so that a client asking for a long timeout
// cannot hold a test; the real server holds up to 50 seconds.
const maxPoll = 50 * time.Second

// startPollLocked makes a long poll the bot's one: a new one ends the
// pending one with 409, as Telegram does when two clients poll one token.
// It runs before the call is recorded pending, so that a test that sees a
// poll pending knows a later one ends it.
func (s *Server) startPollLocked(bot *botState) chan struct{} {
	if bot.poll != nil {
		close(bot.poll)
	}
	bot.poll = make(chan struct{})
	return bot.poll
}

func getUpdates(s *Server, req *request) (any, error) {
	p := req.params
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	limit, err := strconv.Atoi(p["limit"])
	if err != nil || limit <= 0 || limit > 100 {
		limit = 100
	}
	timeout, _ := strconv.Atoi(p["timeout"])
	wait := min(time.Duration(max(timeout, 0))*time.Second, maxPoll)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()

	mine := req.poll
	defer func() {
		s.mu.Lock()
		if req.bot.poll == mine {
			req.bot.poll = nil
		}
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		bot := req.bot
		if offset > 0 {
			// Asking from offset confirms every update before it.
			i := 0
			for i < len(bot.updates) && bot.updates[i].id < offset {
				i++
			}
			bot.updates = bot.updates[i:]
		}
		pending := bot.updates
		if offset < 0 && int(-offset) < len(pending) {
			pending = pending[len(pending)+int(offset):]
		}
		pending = pending[:min(limit, len(pending))]
		result := make([]json.RawMessage, 0, len(pending))
		for _, u := range pending {
			if allowed(p["allowed_updates"], u.kind) {
				result = append(result, u.raw)
			}
		}
		wake := bot.wake
		s.mu.Unlock()
		if len(result) > 0 {
			return result, nil
		}
		select {
		case <-wake:
		case <-mine:
			return nil, &apiError{code: http.StatusConflict, description: ConflictDescription}
		case <-deadline.C:
			return result, nil
		case <-s.closed:
			return result, nil
		case <-req.r.Context().Done():
			return result, nil
		}
	}
}

// chatLocked resolves a chat_id parameter, a number or @username, to the
// chat's state, creating it on first use: the fake knows every chat, except
// those made unreachable with FailChat.
func (s *Server) chatLocked(chatID string) (*chatState, error) {
	if chatID == "" {
		return nil, badRequest("chat_id is empty")
	}
	id, err := strconv.ParseInt(chatID, 10, 64)
	var username string
	if err != nil {
		name, ok := strings.CutPrefix(chatID, "@")
		if !ok || name == "" {
			return nil, badRequest("chat not found")
		}
		username = name
		key := "@" + strings.ToLower(name)
		if id, ok = s.names[key]; !ok {
			id = -1001000000000 - int64(len(s.names)) - 1
			s.names[key] = id
		}
	}
	if id == 0 {
		return nil, badRequest("chat not found")
	}
	c := s.chats[id]
	if c == nil {
		chat := Chat{ID: id, Type: "private", Username: username}
		switch {
		case username != "":
			chat.Type = "channel"
		case id <= -1000000000000:
			chat.Type = "supergroup"
		case id < 0:
			chat.Type = "group"
		}
		c = &chatState{chat: chat, messages: map[int64]*Message{}}
		s.chats[id] = c
	}
	return c, nil
}
