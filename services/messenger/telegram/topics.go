package telegram

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/forum"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// errThreadGone is a send refused because its topic does not exist (any
// more): someone deleted the butler's topic.
var errThreadGone = errors.New("the forum topic was deleted")

// topics puts each butler's sends and replies to a group in the butler's
// own forum topic (topics: per_butler): the topic is made with
// createForumTopic the first time, named after the butler, and kept in
// herald_channel_state (pkg/forum), so a restart or another replica finds
// it, and the switchboard routes what people write there to that butler.
// A person's own chat with the bot has no topics; Herald's own messages
// (pairing codes, notices) stay where they are sent.
type topics struct {
	js     jetstream.JetStream
	holder string

	mu  sync.Mutex
	reg *forum.Registry
}

// newTopics is in's topics, nil when they are off.
func newTopics(in config.Integration, env deliver.Env) (*topics, error) {
	if !in.Topics.PerButler() {
		return nil, nil
	}
	if env.JS == nil {
		return nil, fmt.Errorf("%w: telegram integration %q: topics: per_butler needs the bus (deliver.Env.JS) to remember each butler's topic", config.ErrInvalid, in.ID)
	}
	return &topics{js: env.JS, holder: env.Instance}, nil
}

// registry opens the bucket the first time a topic is asked for.
func (t *topics) registry(ctx context.Context) (*forum.Registry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reg == nil {
		kv, err := t.js.KeyValue(ctx, bus.BucketChannelState)
		if err != nil {
			return nil, fmt.Errorf("%w: opening %s, where forum topics are kept: %w", envelope.ErrTargetUnavailable, bus.BucketChannelState, err)
		}
		t.reg = forum.NewRegistry(kv, t.holder)
	}
	return t.reg, nil
}

// topic is the thread id the delivery's messages to chat go into: its
// butler's topic, made now if it has none; 0 for no topic.
func (s *sender) topic(ctx context.Context, d deliver.Delivery, chat string) (int, error) {
	if s.topics == nil || d.Butler == "" || d.Butler == config.HeraldOrigin || !isGroup(chat) {
		return 0, nil
	}
	if strings.HasPrefix(chat, "@") {
		return 0, fmt.Errorf("%w: integration %q has topics: per_butler, which needs the group's numeric chat id (like -1001234567890) to keep each butler's topic, not %s; set recipient or default_chat to the id",
			envelope.ErrValidation, s.id, chat)
	}
	reg, err := s.topics.registry(ctx)
	if err != nil {
		return 0, err
	}
	thread, err := reg.Topic(ctx, s.id, chat, d.Butler, d.Butler, func(ctx context.Context) (int, error) {
		return s.createTopic(ctx, chat, d.Butler)
	})
	switch {
	case err == nil:
		return thread, nil
	case errors.Is(err, forum.ErrBusy):
		return 0, fmt.Errorf("%w: %s's forum topic in chat %s: %w; trying again shortly", envelope.ErrTargetUnavailable, d.Butler, chat, err)
	case envelope.ClassOf(err) != envelope.ErrInternal.Error():
		return 0, err // Telegram's answer, classified
	}
	return 0, fmt.Errorf("%w: %s's forum topic in chat %s: %w", envelope.ErrTargetUnavailable, d.Butler, chat, err)
}

// createTopic makes butler's topic in chat.
func (s *sender) createTopic(ctx context.Context, chat, butler string) (int, error) {
	if err := s.wait(ctx, chat); err != nil {
		return 0, err
	}
	var topic *models.ForumTopic
	err := s.call(ctx, "createForumTopic", chat, func(ctx context.Context) (err error) {
		topic, err = s.bot.CreateForumTopic(ctx, &bot.CreateForumTopicParams{ChatID: chat, Name: butler})
		return err
	})
	if err != nil {
		return 0, err
	}
	s.log.InfoContext(ctx, "forum topic made", "butler", butler, "chat", chat, "thread", topic.MessageThreadID)
	return topic.MessageThreadID, nil
}

// threadGone forgets butler's deleted topic, so that the next try makes a
// new one, and says so.
func (s *sender) threadGone(ctx context.Context, chat, butler string, thread int, err error) error {
	reg, rerr := s.topics.registry(ctx)
	if rerr == nil {
		rerr = reg.Forget(ctx, s.id, chat, butler, thread)
	}
	if rerr != nil {
		return fmt.Errorf("%w: %s's forum topic %d in chat %s is gone (%w), and forgetting it failed: %w", envelope.ErrTargetUnavailable, butler, thread, chat, err, rerr)
	}
	s.log.WarnContext(ctx, "forum topic gone; a new one is made on the next try", "butler", butler, "chat", chat, "thread", thread)
	return fmt.Errorf("%w: %s's forum topic %d in chat %s was deleted; a new one is made on the next try", envelope.ErrTargetUnavailable, butler, thread, chat)
}
