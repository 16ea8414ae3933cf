package envelope

// Meta keys the switchboard adds to an inbound message on its way to a
// butler (ingress.v1 meta): the switchboard writes them, the butler reads
// them, so they are defined here once.
const (
	// MetaThread is the session id of the message's conversation.
	MetaThread = "thread"
	// MetaThreadKey is the channel's own name of the conversation (a chat id,
	// "<chat_id>/<topic>" for a Telegram topic, an email thread's root
	// Message-ID, ...), absent when it had none.
	MetaThreadKey = "thread_key"
	// MetaTruncated is how many characters were cut off the text.
	MetaTruncated = "truncated_chars"
	// Permission verdicts: the prompt answered, allow or deny, and the MCP
	// session that asked.
	MetaPermissionRequestID = "permission_request_id"
	MetaPermissionBehavior  = "permission_behavior"
	MetaPermissionSession   = "permission_session"
	// MetaClaimSession tags the MCP session that claimed the conversation
	// (claim_thread); the butler takes it off before the model sees meta.
	MetaClaimSession = "claim_session"
	// MetaPermissionGrant names the grant an "Allow for this session" made.
	MetaPermissionGrant = "permission_grant"
	// An answer to the ask tool is of MetaKind KindAnswer, with the
	// question it answers, the answer and who gave it.
	KindAnswer     = "answer"
	MetaQuestionID = "question_id"
	MetaAnswer     = "answer"
	MetaAnsweredBy = "answered_by"
)
