package envelope

// Meta keys of a received message that answers another: what that one
// said (at most 500 characters) and who wrote it, so the model knows what
// "this" refers to.
const (
	MetaReplyToText = "reply_to_text"
	MetaReplyToFrom = "reply_to_from"
)
