package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
)

// threadKeys are the standard meta keys that name a conversation, most
// specific first, in the order nexo-rs derives its channel
// sessions: a thread (a Slack thread's thread_ts, a Telegram topic, an email
// thread's root), then the chat, conversation or room, then the channel, then
// the address written to.
var threadKeys = []string{"thread_ts", "thread_id", "chat_id", "conversation_id", "room_id", "channel_id", "to"}

// ThreadOf is the conversation an inbound message belongs to; "" means the
// integration's one shared conversation. Receivers emit the standard meta
// keys, so this knows no channel. A thread (thread_ts or thread_id) is
// unique only within its chat, so it is qualified by the chat_id, else the
// channel_id ("-100123/5", "C1/1700000000.1"); Slack sends thread_ts and
// thread_id alike, so its threads keep the sessions they had.
func ThreadOf(meta map[string]string) string {
	for _, k := range threadKeys {
		v := meta[k]
		if v == "" {
			continue
		}
		if k == "thread_ts" || k == "thread_id" {
			for _, chat := range []string{"chat_id", "channel_id"} {
				if c := meta[chat]; c != "" {
					return c + "/" + v
				}
			}
		}
		return v
	}
	return ""
}

// session is a conversation's entry in the herald_sessions bucket, keyed
// "<integration>.<thread>".
type session struct {
	Session string    `json:"session"`
	Butler  string    `json:"butler"`
	Created time.Time `json:"created"`
}

// sessions maps threads to sessions. The bucket, not memory, is the record, so
// a restarted or second switchboard puts a chat on the session it had.
type sessions struct {
	kv jetstream.KeyValue
}

func openSessions(ctx context.Context, js jetstream.JetStream) (*sessions, error) {
	kv, err := js.KeyValue(ctx, bus.BucketSessions)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", bus.BucketSessions, err)
	}
	return &sessions{kv: kv}, nil
}

// of returns the session of (integration, thread), creating it on first
// sight. Of two replicas creating it at once, one wins and both use its id.
// The butler recorded is the one that had the conversation first; if a
// binding changes later, the conversation moves and keeps its session.
func (s *sessions) of(ctx context.Context, integration, thread, butler string) (string, error) {
	key := integration + "." + bus.KeyToken(thread)
	for range 3 {
		e, err := s.kv.Get(ctx, key)
		if err == nil {
			var v session
			if err := json.Unmarshal(e.Value(), &v); err != nil || v.Session == "" {
				return "", fmt.Errorf("%w: session %s is unreadable: %w", envelope.ErrInternal, key, err)
			}
			return v.Session, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return "", fmt.Errorf("%w: reading session %s: %w", envelope.ErrTargetUnavailable, key, err)
		}
		b, _ := json.Marshal(session{Session: envelope.NewRequestID(), Butler: butler, Created: time.Now().UTC()})
		_, err = s.kv.Create(ctx, key, b)
		if err == nil {
			var v session
			_ = json.Unmarshal(b, &v)
			return v.Session, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", fmt.Errorf("%w: creating session %s: %w", envelope.ErrTargetUnavailable, key, err)
		}
	}
	return "", fmt.Errorf("%w: session %s keeps changing", envelope.ErrTargetUnavailable, key)
}

// butlerFor picks the butler of an inbound message: the first binding of its
// integration whose chat is empty or its chat_id, else the default butler.
func butlerFor(cfg *config.Config, integration, chatID string) string {
	for _, b := range cfg.Bindings {
		if b.Integration == integration && (b.Chat == "" || b.Chat == chatID) {
			return b.Butler
		}
	}
	return cfg.DefaultButler
}

// truncate cuts text to limit characters (not bytes), marking the cut, and
// says how many characters it removed. A limit of 0 or less keeps everything.
func truncate(text string, limit int) (string, int) {
	n := utf8.RuneCountInString(text)
	if limit <= 0 || n <= limit {
		return text, 0
	}
	kept := 0
	for i := range text {
		if kept == limit {
			return text[:i] + "\n[… truncated " + strconv.Itoa(n-limit) + " characters]", n - limit
		}
		kept++
	}
	return text, 0 // not reached: n > limit
}
