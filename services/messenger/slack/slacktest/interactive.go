package slacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// Interaction is the payload of an interactivity request of type
// block_actions, as Slack posts it to an app's Interactivity Request URL
// when a person clicks a button
// (https://api.slack.com/reference/interaction-payloads/block-actions).
type Interaction struct {
	Type                string              `json:"type"`
	User                InteractionUser     `json:"user"`
	APIAppID            string              `json:"api_app_id"`
	Token               string              `json:"token"`
	Container           Container           `json:"container"`
	TriggerID           string              `json:"trigger_id"`
	Team                *InteractionTeam    `json:"team"`
	Enterprise          *string             `json:"enterprise"`
	IsEnterpriseInstall bool                `json:"is_enterprise_install"`
	Channel             *InteractionChannel `json:"channel,omitempty"`
	Message             *Message            `json:"message,omitempty"`
	State               struct {
		Values map[string]any `json:"values"`
	} `json:"state"`
	ResponseURL string   `json:"response_url"`
	Actions     []Action `json:"actions"`
}

// InteractionUser is the person who clicked.
type InteractionUser struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Name     string `json:"name"`
	TeamID   string `json:"team_id"`
}

// InteractionTeam is the workspace of the click.
type InteractionTeam struct {
	ID     string `json:"id"`
	Domain string `json:"domain"`
}

// InteractionChannel is the conversation of the message clicked.
type InteractionChannel struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Container is where the clicked button is: a message.
type Container struct {
	Type        string `json:"type"`
	MessageTS   string `json:"message_ts"`
	ChannelID   string `json:"channel_id"`
	IsEphemeral bool   `json:"is_ephemeral"`
	// ThreadTS is the thread of a message inside one.
	ThreadTS string `json:"thread_ts,omitempty"`
}

// Action is the button clicked.
type Action struct {
	ActionID string     `json:"action_id"`
	BlockID  string     `json:"block_id"`
	Text     TextObject `json:"text"`
	Value    string     `json:"value"`
	Style    string     `json:"style,omitempty"`
	Type     string     `json:"type"`
	ActionTS string     `json:"action_ts"`
}

// AddUser names user id, as its username; a user the fake does not know is
// named by its id in lower case.
func (s *Server) AddUser(id, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == nil {
		s.users = map[string]string{}
	}
	s.users[id] = name
}

// Click is the interactivity request Slack sends the app when user clicks
// the button with value under the message ts of channel, which the fake
// holds: its block_ids and action_id as the message has them (ids a block
// or button was sent without are given as Slack gives them), a fresh
// action_ts and trigger_id, so that each click is another. The test fails
// if there is no such message or button, or if user cannot see the
// message: a direct message the fake opened (D + the user id's rest) is
// seen only by its person. Body encodes it as Slack sends it.
func (s *Server) Click(channel, ts, value, user string) Interaction {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.messageLocked(channel, ts)
	if m == nil {
		s.t.Fatalf("slacktest: Click: no message %s in channel %s", ts, channel)
		return Interaction{}
	}
	if strings.HasPrefix(channel, "D") && len(user) > 1 && channel[1:] != user[1:] {
		s.t.Fatalf("slacktest: Click: %s cannot see the direct message %s", user, channel)
	}
	msg := copyMessage(m)
	var action *Action
	for i, b := range msg.DecodedBlocks() {
		for j, e := range b.Elements {
			if e.Type != "button" || e.Value != value || action != nil {
				continue
			}
			a := Action{ActionID: e.ActionID, BlockID: b.BlockID, Value: e.Value, Style: e.Style, Type: "button"}
			if e.Text != nil {
				a.Text = *e.Text
			}
			if a.BlockID == "" {
				a.BlockID = generatedID(ts, i, -1)
			}
			if a.ActionID == "" {
				a.ActionID = generatedID(ts, i, j)
			}
			action = &a
		}
	}
	if action == nil {
		s.t.Fatalf("slacktest: Click: message %s in channel %s has no button with value %q", ts, channel, value)
		return Interaction{}
	}
	action.ActionTS = s.nextTSLocked()
	name := s.users[user]
	if name == "" {
		name = strings.ToLower(user)
	}
	p := Interaction{
		Type:        "block_actions",
		User:        InteractionUser{ID: user, Username: name, Name: name, TeamID: s.team},
		APIAppID:    s.appID,
		Token:       "Jhj5dZrVaK7ZwHHjRyZWjbDl",
		Container:   Container{Type: "message", MessageTS: ts, ChannelID: channel},
		TriggerID:   "1000000001.2000000002." + strings.ReplaceAll(uuid(), "-", "")[:21],
		Team:        &InteractionTeam{ID: s.team, Domain: "herald-test"},
		Channel:     &InteractionChannel{ID: channel, Name: s.channelNameLocked(channel)},
		Message:     &msg,
		ResponseURL: "https://hooks.slack.com/actions/" + s.team + "/" + randomSecret(12) + "/" + randomSecret(24),
		Actions:     []Action{*action},
	}
	p.State.Values = map[string]any{}
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		p.Container.ThreadTS = m.ThreadTS
	}
	return p
}

// generatedID is the id Slack gives a block (j < 0) or a button sent
// without one: short, and the same for the same message.
func generatedID(ts string, i, j int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	h := uint32(2166136261)
	for _, c := range fmt.Sprintf("%s/%d/%d", ts, i, j) {
		h = (h ^ uint32(c)) * 16777619
	}
	id := make([]byte, 4)
	for k := range id {
		id[k] = alphabet[h%uint32(len(alphabet))]
		h /= uint32(len(alphabet))
	}
	return string(id)
}

// channelNameLocked is a channel's name as a click names it.
func (s *Server) channelNameLocked(id string) string {
	if strings.HasPrefix(id, "D") {
		return "directmessage"
	}
	for name, cid := range s.names {
		if cid == id {
			return name
		}
	}
	return strings.ToLower(id)
}

// Body is the request body and Content-Type Slack sends p with: a form
// whose one field, payload, is p's JSON.
func (p Interaction) Body() (body []byte, contentType string) {
	// Only blocks a caller wrote as invalid JSON fail to marshal; the
	// payload is then empty, which an endpoint refuses.
	j, _ := json.Marshal(p)
	return []byte(url.Values{"payload": {string(j)}}.Encode()), "application/x-www-form-urlencoded"
}

// SendInteraction posts payload to url as Slack posts to an Interactivity
// Request URL: an Interaction form-encoded by Body (a []byte or string is
// sent as the form as it is), Content-Type
// application/x-www-form-urlencoded, X-Slack-Request-Timestamp and
// X-Slack-Signature signed with secret as events are (At and WithSignature
// apply). It returns the endpoint's answer; an error only if there was
// none.
func SendInteraction(ctx context.Context, url, secret string, payload any, opts ...EventOption) (Answer, error) {
	var body []byte
	switch p := payload.(type) {
	case []byte:
		body = p
	case string:
		body = []byte(p)
	case Interaction:
		body, _ = p.Body()
	case *Interaction:
		body, _ = p.Body()
	default:
		return Answer{}, fmt.Errorf("slacktest: SendInteraction takes an Interaction or a body, not %T", payload)
	}
	return send(ctx, url, secret, "application/x-www-form-urlencoded", body, opts)
}
