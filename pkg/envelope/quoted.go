package envelope

import (
	"strings"
	"unicode/utf8"
)

// Meta keys of a received message that answers another: what that one
// said (at most 500 characters) and who wrote it, so the model knows what
// "this" refers to.
const (
	MetaReplyToText = "reply_to_text"
	MetaReplyToFrom = "reply_to_from"
)

// MaxQuoted is how much of the text of the message a received one answers
// it carries (meta reply_to_text), in characters.
const MaxQuoted = 500

// Quoted sets meta reply_to_text and reply_to_from of a received message
// that answers another, where its provider (or Herald's store) says what
// that one said and who wrote it: the text cut to MaxQuoted characters
// ("…" where it was cut). Nothing is set for an empty text.
func Quoted(meta map[string]string, text, from string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	if utf8.RuneCountInString(text) > MaxQuoted {
		r := []rune(text)
		text = strings.TrimSpace(string(r[:MaxQuoted-1])) + "…"
	}
	meta[MetaReplyToText] = text
	if from = strings.TrimSpace(from); from != "" {
		meta[MetaReplyToFrom] = from
	}
}
