package slack

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/heraldhq/herald/pkg/envelope"
)

// emojiNames are the Slack names of the emoji a model most often reacts
// with; reactions.add takes a name, never the character.
var emojiNames = map[string]string{
	"👍": "+1", "👎": "-1", "❤": "heart", "💔": "broken_heart", "🔥": "fire",
	"🎉": "tada", "🥳": "partying_face", "👀": "eyes", "✅": "white_check_mark",
	"✔": "heavy_check_mark", "☑": "ballot_box_with_check", "❌": "x", "❎": "negative_squared_cross_mark",
	"🙏": "pray", "👏": "clap", "🙌": "raised_hands", "👌": "ok_hand", "👋": "wave",
	"💪": "muscle", "🤝": "handshake", "✍": "writing_hand", "🫡": "saluting_face",
	"😀": "grinning", "😃": "smiley", "😄": "smile", "😁": "grin", "😂": "joy",
	"🤣": "rolling_on_the_floor_laughing", "😊": "blush", "🙂": "slightly_smiling_face",
	"😉": "wink", "😍": "heart_eyes", "🥰": "smiling_face_with_3_hearts", "😘": "kissing_heart",
	"😎": "sunglasses", "🤗": "hugging_face", "🤔": "thinking_face", "🤨": "face_with_raised_eyebrow",
	"😐": "neutral_face", "😴": "sleeping", "😢": "cry", "😭": "sob", "😮": "open_mouth",
	"😱": "scream", "🤯": "exploding_head", "😡": "rage", "🤬": "face_with_symbols_on_mouth",
	"😇": "innocent", "🤓": "nerd_face", "🙈": "see_no_evil", "🤷": "shrug", "🤡": "clown_face",
	"👻": "ghost", "💩": "hankey", "🚀": "rocket", "💯": "100", "⭐": "star", "🌟": "star2",
	"✨": "sparkles", "⚡": "zap", "💡": "bulb", "📌": "pushpin", "📝": "memo", "📎": "paperclip",
	"🔔": "bell", "⏰": "alarm_clock", "⏳": "hourglass_flowing_sand", "⌛": "hourglass",
	"⚠": "warning", "🚨": "rotating_light", "🛑": "octagonal_sign", "❓": "question",
	"❗": "exclamation", "‼": "bangbang", "🆗": "ok", "🆒": "cool", "🎯": "dart",
	"🏆": "trophy", "🐛": "bug", "💊": "pill", "🩺": "stethoscope", "💰": "moneybag",
	"📈": "chart_with_upwards_trend", "📉": "chart_with_downwards_trend", "🔁": "repeat",
	"👨\u200d💻": "male-technologist", "🧠": "brain", "☕": "coffee", "🍾": "champagne",
}

// skinTones maps Unicode's skin tone modifiers to Slack's suffixes.
var skinTones = map[rune]string{
	'\U0001F3FB': "::skin-tone-2", '\U0001F3FC': "::skin-tone-3", '\U0001F3FD': "::skin-tone-4",
	'\U0001F3FE': "::skin-tone-5", '\U0001F3FF': "::skin-tone-6",
}

// emojiName matches what Slack accepts as a reaction's name: standard and
// custom emoji names, optionally with a skin tone.
var emojiName = regexp.MustCompile(`^[a-z0-9_+'-]{1,100}(::skin-tone-[2-6])?$`)

// reactionName is the Slack name of emoji: ":thumbsup:" and "thumbsup" as
// they are, a Unicode emoji by the table above (a variation selector and a
// skin tone are allowed).
func reactionName(emoji string) (string, error) {
	e := strings.TrimSpace(emoji)
	if e == "" {
		return "", fmt.Errorf("%w: react needs an emoji: a Slack emoji name like thumbsup or :white_check_mark:, or a common emoji like 👍", envelope.ErrValidation)
	}
	if name := strings.ToLower(strings.Trim(e, ":")); emojiName.MatchString(name) {
		return name, nil
	}
	e = strings.ReplaceAll(e, "\uFE0F", "")
	tone := ""
	if r := []rune(e); len(r) > 1 {
		if t, ok := skinTones[r[len(r)-1]]; ok {
			e, tone = string(r[:len(r)-1]), t
		}
	}
	if name, ok := emojiNames[e]; ok {
		return name + tone, nil
	}
	return "", fmt.Errorf("%w: Slack reacts with emoji names, and %q is not an emoji Herald knows the name of; pass its Slack name instead, like thumbsup or :white_check_mark: (in Slack, hover over the emoji in the picker to see it)",
		envelope.ErrValidation, emoji)
}
