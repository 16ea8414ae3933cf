package slack

import (
	"encoding/json"
	"strings"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// fileRefPrefix starts an attachment's ref; the file id after it is what
// files.info takes.
const fileRefPrefix = "slack:file:"

// callback is an Events API request body: an event_callback wrapping one
// event, or a url_verification.
type callback struct {
	Type           string          `json:"type"`
	Challenge      string          `json:"challenge"`
	TeamID         string          `json:"team_id"`
	APIAppID       string          `json:"api_app_id"`
	EventID        string          `json:"event_id"`
	Event          json.RawMessage `json:"event"`
	Authorizations []struct {
		UserID string `json:"user_id"`
		IsBot  bool   `json:"is_bot"`
	} `json:"authorizations"`
}

// event is a message or app_mention event.
type event struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	Channel     string `json:"channel"`
	ChannelType string `json:"channel_type"`
	User        string `json:"user"`
	BotID       string `json:"bot_id"`
	Text        string `json:"text"`
	TS          string `json:"ts"`
	ThreadTS    string `json:"thread_ts"`
	Team        string `json:"team"`
	UserProfile *struct {
		Name        string `json:"name"`
		DisplayName string `json:"display_name"`
		RealName    string `json:"real_name"`
	} `json:"user_profile"`
	// Reaction and Item are a reaction_added event's: the emoji's name,
	// and the message it is on.
	Reaction string `json:"reaction"`
	Item     struct {
		Type    string `json:"type"`
		Channel string `json:"channel"`
		TS      string `json:"ts"`
	} `json:"item"`
	EventTS string `json:"event_ts"`
	Files   []struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Mimetype string `json:"mimetype"`
		Size     int64  `json:"size"`
	} `json:"files"`
}

// userSubtypes are the message subtypes a person writes: a reply in a
// thread also sent to the channel, and a message with files. Every other
// subtype is a change (edits, deletions, joins) or not from a person.
var userSubtypes = map[string]bool{"": true, "thread_broadcast": true, "file_share": true}

// toIngress turns an event_callback into an ingress.v1 for integration, or
// nil and why not when it holds nothing a butler should get: another kind
// of event, an edit, a bot's message (the app's own included), a message
// with no text and no files.
//
// The conversation is a thread: a message in a channel starts one (the
// app answers in it), a message in a thread belongs to its thread. In a
// direct message people write without threads, so the direct message is
// the conversation, unless they write in a thread. Meta has thread_ts and
// thread_id (the thread's ts) only for a thread, so the switchboard keeps
// one session per thread, or per direct message.
//
// The native id is "<team id>:<channel>:<ts>", the message's own identity:
// Slack's retries of an event and the message and app_mention events of one
// message collapse into one.
func toIngress(integration string, cb *callback) (*envelope.Ingress, string) {
	if cb.Type != "event_callback" {
		return nil, "not an event_callback"
	}
	var ev event
	if err := json.Unmarshal(cb.Event, &ev); err != nil {
		return nil, "unreadable event"
	}
	if ev.Type == "reaction_added" {
		return reactionIngress(integration, cb, &ev)
	}
	botUser, why := personsMessage(cb, &ev)
	if why != "" {
		return nil, why
	}
	if ev.ThreadTS != "" && !tsPattern.MatchString(ev.ThreadTS) {
		ev.ThreadTS = ""
	}
	text := inboundText(ev.Text, botUser)
	files := attachments(&ev)
	if strings.TrimSpace(text) == "" && len(files) == 0 {
		return nil, "no text or files"
	}

	team := cb.TeamID
	if team == "" {
		team = ev.Team
	}
	at := place{channel: ev.Channel, ts: ev.TS, threadTS: ev.ThreadTS}
	native := ev.Channel + ":" + ev.TS
	if team != "" {
		native = team + ":" + native
	}
	meta := deliver.ClipMeta(messageMeta(&ev, at, team))
	in := envelope.NewIngress(integration, "slack", deliver.Clip(endpointFor(team, cb.APIAppID, integration), 512), deliver.Clip(ev.User, 512),
		at.thread(), deliver.Clip(text, deliver.MaxText), deliver.Clip(native, deliver.MaxNativeID), meta)
	in.Attachments = files
	return in, ""
}

// personsMessage says why a message or app_mention event is not a
// person's message to pass on ("" when it is), and names the app's bot
// user, whose mention starts a message to it.
func personsMessage(cb *callback, ev *event) (botUser, why string) {
	switch {
	case ev.Type != "message" && ev.Type != "app_mention":
		return "", "event " + ev.Type + " is not a message"
	case !userSubtypes[ev.Subtype]:
		return "", "message subtype " + ev.Subtype
	case ev.BotID != "" || ev.Subtype == "bot_message":
		return "", "a bot's message"
	case ev.User == "":
		return "", "no user"
	case !idPattern.MatchString(ev.Channel) || !tsPattern.MatchString(ev.TS):
		return "", "no channel or ts"
	}
	for _, a := range cb.Authorizations {
		if a.IsBot {
			botUser = a.UserID
		}
		if a.UserID == ev.User && a.IsBot {
			return "", "the app's own message"
		}
	}
	return botUser, ""
}

// messageMeta is the meta of a person's message at its place: who wrote
// where, the thread it belongs to (in a channel, or a thread of a direct
// message), and the message it answers in a thread, named as receipts name
// Slack messages.
func messageMeta(ev *event, at place, team string) map[string]string {
	channelType := ev.ChannelType
	if channelType == "" {
		// app_mention events say no channel type.
		channelType = "channel"
		if isDM(ev.Channel) {
			channelType = "im"
		}
	}
	meta := map[string]string{
		"chat_id":      ev.Channel,
		"channel_id":   ev.Channel,
		"channel_type": channelType,
		"chat_type":    "group",
		"user_id":      ev.User,
		"user":         userName(ev),
		"message_id":   ev.TS,
		"ts":           ev.TS,
		"event_type":   ev.Type,
	}
	if channelType == "im" {
		meta["chat_type"] = "private"
	}
	if team != "" {
		meta["team_id"] = team
	}
	if at.inThread() || channelType != "im" {
		meta["thread_ts"] = at.root()
		meta["thread_id"] = at.root()
	}
	if at.inThread() {
		meta["reply_to_message_id"] = ev.Channel + ":" + ev.ThreadTS
	}
	return meta
}

// place is where a message, or the message clicked, is: its channel, its
// ts, and the ts of the thread it is in ("" for none).
type place struct {
	channel, ts, threadTS string
}

// inThread reports whether the message is a reply in a thread, not the
// thread's first message or a message outside any thread.
func (p place) inThread() bool { return p.threadTS != "" && p.threadTS != p.ts }

// root is the ts of the thread the message belongs to: the message starts
// one when it is in none.
func (p place) root() string {
	if p.threadTS != "" {
		return p.threadTS
	}
	return p.ts
}

// thread is the source_thread_identity: "<channel>:<ts>", and
// "<channel>:<thread ts>:<ts>" for a reply in a thread.
func (p place) thread() string {
	if p.inThread() {
		return p.channel + ":" + p.threadTS + ":" + p.ts
	}
	return p.channel + ":" + p.ts
}

// endpointFor is the source_endpoint_identity: the workspace, else the
// app, else the integration.
func endpointFor(team, appID, integration string) string {
	switch {
	case team != "":
		return team
	case appID != "":
		return appID
	}
	return integration
}

var inboundEscapes = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

// inboundText is the text as the person wrote it: Slack's escapes undone
// and the mention of the app that starts a message to it ("<@U0BOT> hi")
// left out. Other mentions and links stay in Slack's <…> form.
func inboundText(text, botUser string) string {
	if botUser != "" {
		if rest, ok := strings.CutPrefix(strings.TrimLeft(text, " "), "<@"+botUser+">"); ok {
			text = strings.TrimLeft(rest, " :,")
		}
	}
	return inboundEscapes.Replace(text)
}

// userName is the best name the event gives for its user, else the id.
func userName(ev *event) string {
	if p := ev.UserProfile; p != nil {
		for _, n := range []string{p.DisplayName, p.RealName, p.Name} {
			if n = strings.TrimSpace(n); n != "" {
				return n
			}
		}
	}
	return ev.User
}

// attachments describes the files of a message without downloading them:
// their ref is the file id files.info takes.
func attachments(ev *event) []envelope.Attachment {
	var out []envelope.Attachment
	for _, f := range ev.Files {
		if f.ID == "" || len(out) == deliver.MaxFiles {
			continue
		}
		out = append(out, deliver.Attachment(f.Name, f.Mimetype, f.Size, fileRefPrefix+f.ID))
	}
	return out
}

// interaction is the payload of an interactivity request. Herald reads
// block_actions, a click on a button of a message
// (https://api.slack.com/reference/interaction-payloads/block-actions).
type interaction struct {
	Type string `json:"type"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		Name     string `json:"name"`
		TeamID   string `json:"team_id"`
	} `json:"user"`
	Team *struct {
		ID string `json:"id"`
	} `json:"team"`
	APIAppID  string `json:"api_app_id"`
	TriggerID string `json:"trigger_id"`
	Channel   *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"channel"`
	// Container is where the button is: a message ("message", or
	// "message_attachment" for one inside an attachment) or a view.
	Container struct {
		Type      string `json:"type"`
		MessageTS string `json:"message_ts"`
		ChannelID string `json:"channel_id"`
		ThreadTS  string `json:"thread_ts"`
	} `json:"container"`
	Message *struct {
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts"`
	} `json:"message"`
	Actions []struct {
		Type     string `json:"type"`
		ActionID string `json:"action_id"`
		BlockID  string `json:"block_id"`
		Value    string `json:"value"`
		ActionTS string `json:"action_ts"`
	} `json:"actions"`
}

// clicks turns a block_actions payload into one ingress.v1 per button
// clicked (Slack sends one), or none and why not: another kind of
// interaction, a button outside a message (a modal's), no person.
//
// A click is a message from the person who clicked, in the conversation of
// the message clicked, as that message's events would be: its text and
// meta callback_data are the button's value (the action's data), its
// callback_query_id the click's action_ts; message_id is the ts of the
// message clicked, ts the click's. chat_type is private in a direct message
// (D…), so that a verdict clicked there counts as given in a direct chat.
//
// The native id is "click:<team>:<channel>:<message ts>:<action ts>": a
// request sent twice is one click, two clicks are two.
func clicks(integration string, p *interaction) ([]*envelope.Ingress, string) {
	if p.Type != "block_actions" {
		return nil, "interaction " + p.Type + " is not a click"
	}
	at := clicked(p)
	switch {
	case !idPattern.MatchString(at.channel) || !tsPattern.MatchString(at.ts):
		return nil, "not on a message"
	case !idPattern.MatchString(p.User.ID):
		return nil, "no user"
	}
	if !tsPattern.MatchString(at.threadTS) {
		at.threadTS = ""
	}
	team := p.User.TeamID
	if p.Team != nil && p.Team.ID != "" {
		team = p.Team.ID
	}
	endpoint := endpointFor(team, p.APIAppID, integration)
	var out []*envelope.Ingress
	why := "no button with a value"
	for _, a := range p.Actions {
		if a.Type != "button" || a.Value == "" {
			continue
		}
		click := a.ActionTS
		if click == "" {
			click = p.TriggerID
		}
		if click == "" {
			why = "a click with neither action_ts nor trigger_id"
			continue
		}
		meta := deliver.ClipMeta(clickMeta(p, at, team, a.Value, click))
		native := at.channel + ":" + at.ts + ":" + click
		if team != "" {
			native = team + ":" + native
		}
		out = append(out, envelope.NewIngress(integration, "slack", deliver.Clip(endpoint, 512), deliver.Clip(p.User.ID, 512), at.thread(),
			deliver.Clip(a.Value, deliver.MaxText), deliver.Clip("click:"+native, deliver.MaxNativeID), meta))
	}
	if len(out) == 0 {
		return nil, why
	}
	return out, ""
}

// clicked is the place of the message a click was on: the container's
// channel and ts, which the payload's channel and message, when it has
// them, complete or replace.
func clicked(p *interaction) place {
	at := place{channel: p.Container.ChannelID, ts: p.Container.MessageTS, threadTS: p.Container.ThreadTS}
	if p.Channel != nil && p.Channel.ID != "" {
		at.channel = p.Channel.ID
	}
	if m := p.Message; m != nil {
		if at.ts == "" {
			at.ts = m.TS
		}
		if m.ThreadTS != "" {
			at.threadTS = m.ThreadTS
		}
	}
	return at
}

// clickMeta is the meta of one click on a button with value, as the clicked
// message's events would have it, with the click's own ts and
// callback_data.
func clickMeta(p *interaction, at place, team, value, click string) map[string]string {
	meta := map[string]string{
		"chat_id":           at.channel,
		"channel_id":        at.channel,
		"channel_type":      "channel",
		"chat_type":         "group",
		"user_id":           p.User.ID,
		"user":              clickerName(p),
		"message_id":        at.ts,
		"ts":                click,
		"event_type":        p.Type,
		"callback_data":     value,
		"callback_query_id": click,
	}
	if isDM(at.channel) {
		meta["channel_type"], meta["chat_type"] = "im", "private"
	}
	if team != "" {
		meta["team_id"] = team
	}
	if at.inThread() || !isDM(at.channel) {
		meta["thread_ts"] = at.root()
		meta["thread_id"] = at.root()
	}
	return meta
}

// clickerName is the best name the payload gives for who clicked, else
// their id.
func clickerName(p *interaction) string {
	for _, n := range []string{p.User.Username, p.User.Name} {
		if n = strings.TrimSpace(n); n != "" {
			return n
		}
	}
	return p.User.ID
}

// reactionIngress turns a reaction_added event on a message into an
// ingress.v1: its text the emoji (":name:" as Slack names it), meta
// event_type "reaction", reaction the name, and reply_to_message_id the
// message reacted to, named as receipts name it. A reaction acknowledges a
// note that must be seen (the switchboard's attention); no other reaction
// goes further. Its native id is the reaction's own: the same person's
// same emoji on the same message is one.
func reactionIngress(integration string, cb *callback, ev *event) (*envelope.Ingress, string) {
	switch {
	case ev.Item.Type != "message" || !idPattern.MatchString(ev.Item.Channel) || !tsPattern.MatchString(ev.Item.TS):
		return nil, "a reaction on something other than a message"
	case ev.User == "" || ev.Reaction == "" || len(ev.Reaction) > 100:
		return nil, "a reaction with no user or emoji"
	}
	for _, a := range cb.Authorizations {
		if a.UserID == ev.User && a.IsBot {
			return nil, "the app's own reaction"
		}
	}
	team := cb.TeamID
	endpoint := team
	if endpoint == "" {
		endpoint = integration
	}
	chatType := "group"
	if isDM(ev.Item.Channel) {
		chatType = "private"
	}
	meta := map[string]string{
		"chat_id": ev.Item.Channel, "channel_id": ev.Item.Channel, "chat_type": chatType,
		"user_id": ev.User, envelope.MetaEventType: envelope.EventReaction, "reaction": ev.Reaction,
		"reply_to_message_id": ev.Item.Channel + ":" + ev.Item.TS,
	}
	if team != "" {
		meta["team_id"] = team
	}
	native := "reaction:" + ev.Item.Channel + ":" + ev.Item.TS + ":" + ev.User + ":" + ev.Reaction
	if team != "" {
		native = team + ":" + native
	}
	thread := ev.Item.Channel + ":" + ev.Item.TS
	return envelope.NewIngress(integration, "slack", deliver.Clip(endpoint, 512), deliver.Clip(ev.User, 512), thread, ":"+ev.Reaction+":", deliver.Clip(native, deliver.MaxNativeID), meta), ""
}
