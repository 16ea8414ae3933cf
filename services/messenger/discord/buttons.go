package discord

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/envelope"
)

// Discord's limits on message components.
const (
	// MaxCustomID is the most a button's custom_id holds, in characters.
	MaxCustomID = 100
	// maxLabel is the most a button's label holds, in characters.
	maxLabel = 80
	// buttonsPerRow is how many buttons an action row holds.
	buttonsPerRow = 5
	// maxRows is how many action rows a message holds.
	maxRows = 5
)

// Component types and button styles of Discord's API.
const (
	componentActionRow = 1
	componentButton    = 2

	stylePrimary   = 1
	styleSecondary = 2
	styleSuccess   = 3
	styleDanger    = 4
)

// component is an action row or a button, as a message's components hold
// them.
type component struct {
	Type       int         `json:"type"`
	Components []component `json:"components,omitempty"`
	Style      int         `json:"style,omitempty"`
	Label      string      `json:"label,omitempty"`
	CustomID   string      `json:"custom_id,omitempty"`
}

// buttons turns a delivery's actions into action rows of buttons, nil for
// none. A press comes back as an INTERACTION_CREATE whose data.custom_id is
// the action's Data. An approval's Allow is green and its Deny red; the
// first other action is the primary one.
func buttons(actions []envelope.Action) ([]component, error) {
	if len(actions) == 0 {
		return nil, nil
	}
	if len(actions) > buttonsPerRow*maxRows {
		return nil, fmt.Errorf("%w: %d actions; a Discord message holds at most %d buttons", envelope.ErrValidation, len(actions), buttonsPerRow*maxRows)
	}
	var rows []component
	for i, a := range actions {
		label := strings.TrimSpace(a.Label)
		if label == "" {
			return nil, fmt.Errorf("%w: action %d has no label; give every button the text to show", envelope.ErrValidation, i+1)
		}
		if n := utf8.RuneCountInString(label); n > maxLabel {
			label = string([]rune(label)[:maxLabel-1]) + "…"
		}
		if a.Data == "" || !utf8.ValidString(a.Data) || utf8.RuneCountInString(a.Data) > MaxCustomID {
			return nil, fmt.Errorf("%w: action %d (%q) has data of %d characters; Discord takes 1 to %d characters of UTF-8 as a button's custom_id",
				envelope.ErrValidation, i+1, label, utf8.RuneCountInString(a.Data), MaxCustomID)
		}
		style := styleSecondary
		if _, behavior, ok := approval.Parse("", a.Data); ok {
			style = styleDanger
			switch behavior {
			case approval.Allow:
				style = styleSuccess
			case approval.Session:
				style = stylePrimary // allows too, for longer: not the plain Allow's green
			}
		} else if i == 0 {
			style = stylePrimary
		}
		if i%buttonsPerRow == 0 {
			rows = append(rows, component{Type: componentActionRow})
		}
		row := &rows[len(rows)-1]
		row.Components = append(row.Components, component{Type: componentButton, Style: style, Label: label, CustomID: a.Data})
	}
	return rows, nil
}
