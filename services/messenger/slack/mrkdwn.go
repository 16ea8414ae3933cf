package slack

import "github.com/heraldhq/herald/pkg/markdown"

// ChunkLimit is the most a message's text may hold, in UTF-16 code units of
// the mrkdwn sent (markdown.SlackMax says why).
const ChunkLimit = markdown.SlackMax

// chunk is one message of a delivery: its text as Slack mrkdwn, and as plain
// text for the places that show no formatting (push notifications).
type chunk struct {
	text     string
	fallback string
}

// chunks renders md as Slack mrkdwn split into messages of at most
// ChunkLimit each, every one well formed on its own (Doc.SlackChunks:
// pkg/markdown writes mrkdwn, beside the markdown.SlackLimit that bounds
// it).
func chunks(md string) []chunk {
	var out []chunk
	for _, c := range markdown.Parse(md).SlackChunks(ChunkLimit) {
		out = append(out, chunk{text: c.Text, fallback: c.Fallback})
	}
	return out
}

// Mrkdwn renders md as one Slack mrkdwn text, however long (Doc.Slack says
// how).
func Mrkdwn(md string) string { return markdown.Parse(md).Slack() }
