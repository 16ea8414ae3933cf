package slacktest

import (
	"encoding/json"
	"unicode/utf8"
)

// Block Kit's limits, as Slack checks them
// (https://api.slack.com/reference/block-kit).
const (
	// MaxBlocks is the most blocks a message holds.
	MaxBlocks = 50
	// MaxSectionText is the most a section's text holds, in characters.
	MaxSectionText = 3000
	// MaxButtons is the most elements an actions block holds.
	MaxButtons = 25
	// MaxButtonText is the most a button's label holds, in characters.
	MaxButtonText = 75
	// MaxButtonValue is the most a button's value holds, in characters.
	MaxButtonValue = 2000
	// MaxActionID is the most an action_id or a block_id holds, in
	// characters.
	MaxActionID = 255
	// maxHeaderText is the most a header's text holds, in characters.
	maxHeaderText = 150
)

// Block is a layout block as the client sent it, in the parts the fake
// reads: a section's text, an actions block's elements.
type Block struct {
	Type     string       `json:"type"`
	BlockID  string       `json:"block_id,omitempty"`
	Text     *TextObject  `json:"text,omitempty"`
	Fields   []TextObject `json:"fields,omitempty"`
	Elements []Element    `json:"elements,omitempty"`
}

// TextObject is a Block Kit text object.
type TextObject struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Emoji    *bool  `json:"emoji,omitempty"`
	Verbatim bool   `json:"verbatim,omitempty"`
}

// Element is an interactive element of an actions block; a button has
// text, value and style.
type Element struct {
	Type     string      `json:"type"`
	ActionID string      `json:"action_id,omitempty"`
	Text     *TextObject `json:"text,omitempty"`
	Value    string      `json:"value,omitempty"`
	Style    string      `json:"style,omitempty"`
	URL      string      `json:"url,omitempty"`
}

// DecodedBlocks are the message's blocks, decoded.
func (m Message) DecodedBlocks() []Block {
	out := make([]Block, 0, len(m.Blocks))
	for _, raw := range m.Blocks {
		var b Block
		_ = json.Unmarshal(raw, &b) // checked when the message was sent
		out = append(out, b)
	}
	return out
}

// Shown is what a person reads of the message, in the order Slack shows
// it: the message's text, unless it has blocks (then the text is only what
// notifications show); its blocks' texts, a button as its label in
// brackets; then each attachment's pretext, title, text and footer.
func (m Message) Shown() []string {
	var out []string
	blocks := m.DecodedBlocks()
	if len(blocks) == 0 && m.Text != "" {
		out = append(out, m.Text)
	}
	for _, b := range blocks {
		if b.Text != nil {
			out = append(out, b.Text.Text)
		}
		for _, f := range b.Fields {
			out = append(out, f.Text)
		}
		for _, e := range b.Elements {
			if e.Text != nil {
				out = append(out, "["+e.Text.Text+"]")
			}
		}
	}
	for _, a := range m.Attachments {
		for _, s := range []string{a.Pretext, a.Title, a.Text, a.Footer} {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// Buttons are the buttons of a message's actions blocks, in order.
func (m Message) Buttons() []Element {
	var out []Element
	for _, b := range m.DecodedBlocks() {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type == "button" {
				out = append(out, e)
			}
		}
	}
	return out
}

// checkBlocks refuses blocks as Slack does, with invalid_blocks: an unknown
// type, a section without text or with text over MaxSectionText, an
// actions block of no or over MaxButtons elements, a button without a
// plain_text label of 1 to MaxButtonText characters, with a value over
// MaxButtonValue or a style other than primary and danger, ids over
// MaxActionID, and block_id or action_id used twice in the message.
func checkBlocks(blocks []json.RawMessage) error {
	if len(blocks) > MaxBlocks {
		return refuse("invalid_blocks")
	}
	blockIDs, actionIDs := map[string]bool{}, map[string]bool{}
	for _, raw := range blocks {
		var b Block
		if err := json.Unmarshal(raw, &b); err != nil {
			return refuse("invalid_blocks")
		}
		if err := checkBlock(b, blockIDs, actionIDs); err != nil {
			return err
		}
	}
	return nil
}

func checkBlock(b Block, blockIDs, actionIDs map[string]bool) error {
	if b.BlockID != "" {
		if blockIDs[b.BlockID] || utf8.RuneCountInString(b.BlockID) > MaxActionID {
			return refuse("invalid_blocks")
		}
		blockIDs[b.BlockID] = true
	}
	switch b.Type {
	case "section":
		if b.Text == nil && len(b.Fields) == 0 {
			return refuse("invalid_blocks")
		}
		if b.Text != nil && !validText(*b.Text, MaxSectionText, "plain_text", "mrkdwn") {
			return refuse("invalid_blocks")
		}
	case "header":
		if b.Text == nil || !validText(*b.Text, maxHeaderText, "plain_text") {
			return refuse("invalid_blocks")
		}
	case "actions":
		if len(b.Elements) == 0 || len(b.Elements) > MaxButtons {
			return refuse("invalid_blocks")
		}
		for _, e := range b.Elements {
			if e.ActionID != "" {
				if actionIDs[e.ActionID] || utf8.RuneCountInString(e.ActionID) > MaxActionID {
					return refuse("invalid_blocks")
				}
				actionIDs[e.ActionID] = true
			}
			if e.Type == "button" && !validButton(e) {
				return refuse("invalid_blocks")
			}
		}
	case "divider", "context", "image", "rich_text", "input", "file", "video":
		// Not read by the fake.
	default:
		return refuse("invalid_blocks")
	}
	return nil
}

func validButton(e Element) bool {
	return e.Text != nil && validText(*e.Text, MaxButtonText, "plain_text") &&
		utf8.RuneCountInString(e.Value) <= MaxButtonValue &&
		(e.Style == "" || e.Style == "primary" || e.Style == "danger")
}

func validText(t TextObject, limit int, types ...string) bool {
	n := utf8.RuneCountInString(t.Text)
	if n == 0 || n > limit {
		return false
	}
	for _, ty := range types {
		if t.Type == ty {
			return true
		}
	}
	return false
}
