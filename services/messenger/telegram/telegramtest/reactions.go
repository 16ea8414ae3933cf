package telegramtest

// ReactionEmoji is Telegram's fixed set of reaction emoji, in the order of the
// Bot API documentation (ReactionTypeEmoji). setMessageReaction refuses any
// other emoji with "Bad Request: REACTION_INVALID" — including the same glyph
// with a variation selector, such as "❤️" (U+2764 U+FE0F) for "❤".
var ReactionEmoji = []string{
	"👍", "👎", "❤", "🔥", "🥰", "👏", "😁", "🤔", "🤯", "😱",
	"🤬", "😢", "🎉", "🤩", "🤮", "💩", "🙏", "👌", "🕊", "🤡",
	"🥱", "🥴", "😍", "🐳", "❤\u200d🔥", "🌚", "🌭", "💯", "🤣", "⚡",
	"🍌", "🏆", "💔", "🤨", "😐", "🍓", "🍾", "💋", "🖕", "😈",
	"😴", "😭", "🤓", "👻", "👨\u200d💻", "👀", "🎃", "🙈", "😇", "😨",
	"🤝", "✍", "🤗", "🫡", "🎅", "🎄", "☃", "💅", "🤪", "🗿",
	"🆒", "💘", "🙉", "🦄", "😘", "💊", "🙊", "😎", "👾", "🤷\u200d♂",
	"🤷", "🤷\u200d♀", "😡",
}

var reactionSet = func() map[string]bool {
	m := make(map[string]bool, len(ReactionEmoji))
	for _, e := range ReactionEmoji {
		m[e] = true
	}
	return m
}()
