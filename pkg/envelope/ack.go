package envelope

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Inbound events that are not messages, by their meta event_type: a
// person's reaction on a message (its emoji in meta reaction, the message
// in reply_to_message_id), and a click on a link that acknowledges a note
// (public_url; the link's token in ack_token).
const (
	MetaEventType = "event_type"
	EventReaction = "reaction"
	EventAckLink  = "ack_link"
	MetaAckToken  = "ack_token"
)

// AckTokenPattern is the shape of an acknowledge link's token: 26 of
// base32's letters (128 random bits).
var AckTokenPattern = regexp.MustCompile(`^[a-z2-7]{26}$`)

// The bounds of notify's ack_within (architecture.md §11, issue 24).
const (
	MinAckWithin = 30 * time.Second
	MaxAckWithin = 7 * 24 * time.Hour
)

// ParseAckWithin reads an ack_within such as 90s, 10m, 1h30m or 2d: whole
// numbers of days, hours, minutes and seconds.
func ParseAckWithin(s string) (time.Duration, error) {
	if !isAckWithin(s) {
		return 0, fmt.Errorf("%q is not a duration like 90s, 10m, 1h30m or 2d", s)
	}
	var d time.Duration
	start := 0
	for i := 0; i < len(s); i++ {
		unit := time.Duration(0)
		switch s[i] {
		case 's':
			unit = time.Second
		case 'm':
			unit = time.Minute
		case 'h':
			unit = time.Hour
		case 'd':
			unit = 24 * time.Hour
		default:
			continue
		}
		n, _ := strconv.Atoi(s[start:i]) // at most six digits: no overflow
		d += time.Duration(n) * unit
		start = i + 1
	}
	return d, nil
}
