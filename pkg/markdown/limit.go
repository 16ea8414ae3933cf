package markdown

import "strings"

// Limit is how much one message of a channel type holds, counted the way
// that channel counts it. It is the contract between whoever writes a
// message and the messenger that delivers it: a message that does not fit
// is split into several (Telegram, Slack) or refused, so a writer that needs
// one message (a permission prompt and its buttons) shortens it to fit.
type Limit struct {
	// Max is the most one message holds, in the units Size counts.
	Max int
	// Mark is room the channel's sender takes for a mark of its own in
	// front of the text (Telegram's "‼️ " on an urgent message).
	Mark int
	// size measures md; nil counts its bytes.
	size func(md string) int
}

// The channels' limits on one message, in UTF-16 code units, which their
// senders cut at: Telegram's sendMessage takes 4096; Slack takes up to
// 40,000 characters but stops showing a message in full (and push
// notifications stop arriving) well before, and 3,000 is what a person
// reads on one screen; Discord takes 2000 characters of content, never
// fewer than the UTF-16 code units its sender counts.
const (
	TelegramMax = 4096
	SlackMax    = 3000
	DiscordMax  = 2000
)

// Channel limits, each as its sender counts.
var (
	// TelegramLimit: a sendMessage text holds TelegramMax characters; the
	// sender cuts its HTML at that many UTF-16 code units.
	TelegramLimit = Limit{Max: TelegramMax, Mark: 3, size: func(md string) int { return UTF16Len(TelegramHTML(md)) }}
	// SlackLimit: the sender cuts messages at SlackMax UTF-16 code units of
	// mrkdwn.
	SlackLimit = Limit{Max: SlackMax, size: slackSize}
	// DiscordLimit: DiscordMax UTF-16 code units of the Discord markdown
	// the sender writes, with room for what it adds to a prompt: the urgent
	// mark, and the subtext line naming the butler (63 characters, each
	// escaped at worst) and its topic.
	DiscordLimit = Limit{Max: DiscordMax, Mark: 160, size: func(md string) int { return UTF16Len(Discord(md)) }}
	// WholeLimit is that of a channel that shows a message whole (email,
	// web chat, webhook, log): the notify's own bound on delivery.message,
	// 64 KiB (envelope.MaxMessageBytes).
	WholeLimit = Limit{Max: 64 << 10}
)

// Size is how long md is on the channel, in the units of Max.
func (l Limit) Size(md string) int {
	if l.size == nil {
		return len(md)
	}
	return l.size(md)
}

// Fits reports whether md goes as one message, mark included.
func (l Limit) Fits(md string) bool { return l.Size(md)+l.Mark <= l.Max }

// slackSize bounds from above the length of Slack(md). It is the length of
// TelegramHTML(md), which mrkdwn is never longer than except by what this
// adds: a zero-width space between two backticks (so that text opens no
// code block); per line break inside bold, italic, strike or a quote, the
// markers that line gets (Slack formatting ends at a line break, and each
// quoted line starts with "> "); a code block in a quote, whose fences
// become quoted lines; and the "%7C" that stands for a "|" in a link's
// address. It was first measured on the HTML that mrkdwn was written from,
// and stays so: what fits SlackLimit must not change.
func slackSize(md string) int {
	var s slackBound
	layout(Parse(md), &s)
	return s.n
}

type slackBound struct {
	n      int
	wraps  int // bold, italic, strike and quotes open
	quotes int
}

func (s *slackBound) text(t string) {
	s.n += UTF16Len(t) + 2*s.wraps*strings.Count(t, "\n") + strings.Count(t, "`") +
		4*strings.Count(t, "&") + 3*strings.Count(t, "<") + 3*strings.Count(t, ">")
}

func (s *slackBound) open(n *Node) {
	s.n += UTF16Len(tgOpen(n)) + len(tgClose(n))
	switch n.Kind {
	case KindStrong, KindEmphasis, KindStrike:
		s.wraps++
	case KindQuote:
		s.wraps++
		s.quotes++
	case KindCodeBlock:
		if s.quotes > 0 {
			s.n += 4
		}
	case KindLink:
		s.n += 2 * strings.Count(n.URL, "|")
	}
}

func (s *slackBound) close(n *Node) {
	switch n.Kind {
	case KindStrong, KindEmphasis, KindStrike:
		s.wraps--
	case KindQuote:
		s.wraps--
		s.quotes--
	}
}
