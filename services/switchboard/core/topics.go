package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/forum"
)

// topicButler is the butler a message goes to when it was written in a
// butler's forum topic (a Telegram integration with topics: per_butler):
// the topic's butler, whatever the bindings say; else butler. The messenger
// records whose each topic is when it makes one (pkg/forum); the
// switchboard reads that record, key by key. A topic of a butler no longer
// configured or granted the integration, the General topic and topics
// people made go by the bindings. A claim (claim_thread) still wins over
// the topic: it is applied after this.
func (g *intake) topicButler(ctx context.Context, it *config.Integration, meta map[string]string, butler string) (string, error) {
	if !it.Topics.PerButler() || meta[forum.MetaTopic] == "" {
		return butler, nil
	}
	thread, err := strconv.Atoi(meta[forum.MetaTopic])
	if err != nil || thread <= 0 {
		return butler, nil // not a topic the messenger could have made
	}
	owner, err := forum.Owner(ctx, bus.NewDirectKV(g.JS, bus.BucketChannelState), it.ID, meta["chat_id"], thread)
	if errors.Is(err, forum.ErrKey) {
		return butler, nil // a chat no topic of the messenger's is in
	}
	if err != nil {
		return "", fmt.Errorf("%w: whose forum topic %d of chat %s is: %w", envelope.ErrTargetUnavailable, thread, meta["chat_id"], err)
	}
	if owner == "" || g.Config.Butler(owner) == nil || !it.Grants.Allows(owner) {
		return butler, nil
	}
	return owner, nil
}
