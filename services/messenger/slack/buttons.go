package slack

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/envelope"
)

// Block Kit's limits on buttons
// (https://api.slack.com/reference/block-kit/block-elements#button).
const (
	// MaxButtonValue is the most a button's value (an action's data) holds,
	// in characters.
	MaxButtonValue = 2000
	// MaxButtons is the most buttons an actions block holds.
	MaxButtons = 25
	// maxButtonText is the most a button's label shows, in characters.
	maxButtonText = 75
)

// actionIDPrefix starts the action_id of Herald's buttons: "herald_1",
// "herald_2"..., unique within the message as Slack requires and far
// below its 255 characters. The click is read by its value, not its id.
const actionIDPrefix = "herald_"

// Button styles of Block Kit; a button without one is Slack's default.
const (
	stylePrimary = "primary"
	styleDanger  = "danger"
)

// block is a Block Kit layout block: a section of mrkdwn text, or an
// actions block of buttons.
type block struct {
	Type     string      `json:"type"`
	Text     *textObject `json:"text,omitempty"`
	Elements []button    `json:"elements,omitempty"`
}

// textObject is a Block Kit text object. Verbatim keeps Slack from
// preprocessing mrkdwn (turning bare names into mentions and links), as
// parse "none" does for a message's attachments: no text forms a mention.
type textObject struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Verbatim bool   `json:"verbatim,omitempty"`
}

// button is a button element of an actions block.
type button struct {
	Type     string     `json:"type"`
	ActionID string     `json:"action_id"`
	Text     textObject `json:"text"`
	Value    string     `json:"value"`
	Style    string     `json:"style,omitempty"`
}

// section is a section block showing mrkdwn, already escaped.
func section(mrkdwn string) block {
	return block{Type: "section", Text: &textObject{Type: "mrkdwn", Text: mrkdwn, Verbatim: true}}
}

// actionsBlock turns a delivery's actions into an actions block of
// buttons, nil for none. A click comes back to the interactive endpoint as
// a block_actions payload whose action value is the action's Data. An
// approval's Allow (and Allow for this session) is green, its Deny red;
// other buttons keep Slack's default look.
func actionsBlock(actions []envelope.Action) (*block, error) {
	if len(actions) == 0 {
		return nil, nil
	}
	if len(actions) > MaxButtons {
		return nil, fmt.Errorf("%w: %d actions; a Slack actions block holds at most %d buttons", envelope.ErrValidation, len(actions), MaxButtons)
	}
	b := &block{Type: "actions"}
	for i, a := range actions {
		label := strings.TrimSpace(a.Label)
		if label == "" {
			return nil, fmt.Errorf("%w: action %d has no label; give every button the text to show", envelope.ErrValidation, i+1)
		}
		if utf8.RuneCountInString(label) > maxButtonText {
			label = string([]rune(label)[:maxButtonText-1]) + "…"
		}
		if a.Data == "" || !utf8.ValidString(a.Data) || utf8.RuneCountInString(a.Data) > MaxButtonValue {
			return nil, fmt.Errorf("%w: action %d (%q) has data of %d characters; Slack takes 1 to %d characters of UTF-8 as a button's value",
				envelope.ErrValidation, i+1, label, utf8.RuneCountInString(a.Data), MaxButtonValue)
		}
		b.Elements = append(b.Elements, button{Type: "button", ActionID: actionIDPrefix + strconv.Itoa(i+1), Text: textObject{Type: "plain_text", Text: label}, Value: a.Data, Style: style(a.Data)})
	}
	return b, nil
}

// style is the look of a button by what it answers.
func style(data string) string {
	_, behavior, ok := approval.Parse("", data)
	switch {
	case !ok:
		return ""
	case behavior == approval.Deny:
		return styleDanger
	}
	return stylePrimary // allow, and allow for this session
}
