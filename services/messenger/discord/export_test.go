package discord

import (
	"time"

	discordspec "github.com/heraldhq/herald/pkg/channel/discord"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// SetTiming shortens r's waits for tests: every backoff, the lease TTL,
// the wait after an Invalid Session, the gap between identifies and how
// long a connection must last to count as stable.
func SetTiming(r deliver.Receiver, backoff, lease time.Duration) {
	rr := r.(*receiver)
	rr.timing = timing{
		retryMin: backoff, retryMax: 4 * backoff, lease: lease, hello: 5 * time.Second,
		invalidMin: backoff / 2, invalidMax: backoff, identifyGap: backoff, stable: 20 * backoff,
	}
}

// ChunkTexts are the messages md is sent as, undecorated.
func ChunkTexts(md string) []string {
	return chunks(md, discordspec.MaxMessage, func(text string, _, _ int) string { return text })
}
