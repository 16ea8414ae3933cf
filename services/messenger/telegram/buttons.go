package telegram

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/envelope"
)

// MaxCallbackData is Telegram's limit on a button's callback_data, in bytes.
const MaxCallbackData = 64

// buttonsPerRow lays buttons out two to a row: "Allow | Deny" side by side,
// longer lists still readable on a phone.
const buttonsPerRow = 2

// inlineKeyboard is the reply_markup of a message with inline buttons. It is
// Herald's own type because go-telegram/bot's InlineKeyboardButton always
// serializes "copy_text":{"text":""}, which Telegram rejects
// (BUTTON_COPY_TEXT_INVALID).
type inlineKeyboard struct {
	InlineKeyboard [][]inlineButton `json:"inline_keyboard"`
}

type inlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// keyboard turns a delivery's actions into inline buttons, nil for none. A
// tap comes back as a callback query whose data is the action's Data.
func keyboard(actions []envelope.Action) (*inlineKeyboard, error) {
	if len(actions) == 0 {
		return nil, nil
	}
	k := &inlineKeyboard{}
	for i, a := range actions {
		label := strings.TrimSpace(a.Label)
		if label == "" {
			return nil, fmt.Errorf("%w: action %d has no label; give every button the text to show", envelope.ErrValidation, i+1)
		}
		if a.Data == "" || len(a.Data) > MaxCallbackData || !utf8.ValidString(a.Data) {
			return nil, fmt.Errorf("%w: action %d (%q) has data of %d bytes; Telegram takes 1 to %d bytes of UTF-8 as a button's callback data",
				envelope.ErrValidation, i+1, label, len(a.Data), MaxCallbackData)
		}
		if i%buttonsPerRow == 0 {
			k.InlineKeyboard = append(k.InlineKeyboard, nil)
		}
		row := &k.InlineKeyboard[len(k.InlineKeyboard)-1]
		*row = append(*row, inlineButton{Text: label, CallbackData: a.Data})
	}
	return k, nil
}
