package core

import (
	"testing"
)

func TestThreadOf(t *testing.T) {
	tests := []struct {
		name string
		meta map[string]string
		want string
	}{
		{"telegram private chat", map[string]string{"chat_id": "111", "message_id": "5"}, "111"},
		{"telegram topic, qualified by its chat", map[string]string{"chat_id": "-100123", "thread_id": "7"}, "-100123/7"},
		{"email thread, by its root, with its correspondent", map[string]string{"chat_id": "me@example.com", "thread_id": "<root@example.com>", "to": "herald@example.com"}, "me@example.com/<root@example.com>"},
		{"slack thread, qualified by its channel", map[string]string{"chat_id": "C1", "thread_id": "1700000000.1"}, "C1/1700000000.1"},
		{"a room", map[string]string{"room_id": "r1", "to": "x"}, "r1"},
		{"only an address", map[string]string{"to": "herald@example.com"}, "herald@example.com"},
		{"nothing: the integration's one conversation", map[string]string{"user": "x"}, ""},
		// docs/inbound.md's order: thread_ts, thread_id, chat_id,
		// conversation_id, room_id, channel_id, to.
		{"slack thread as the Slack receiver sends it", map[string]string{"chat_id": "C1", "channel_id": "C1", "thread_ts": "1700000000.1", "thread_id": "1700000000.1", "ts": "1700000000.5"}, "C1/1700000000.1"},
		{"thread_ts before thread_id", map[string]string{"chat_id": "C1", "thread_ts": "1700000000.1", "thread_id": "other"}, "C1/1700000000.1"},
		{"thread_ts qualified by the channel when there is no chat", map[string]string{"channel_id": "C9", "thread_ts": "1700000000.2"}, "C9/1700000000.2"},
		{"thread_ts alone", map[string]string{"thread_ts": "1700000000.3"}, "1700000000.3"},
		{"a conversation before a room", map[string]string{"conversation_id": "c1", "room_id": "r1"}, "c1"},
		{"a room before a channel", map[string]string{"room_id": "r1", "channel_id": "D1"}, "r1"},
		{"a channel before the address", map[string]string{"channel_id": "D1", "to": "x@example.com"}, "D1"},
		{"a chat before a channel", map[string]string{"chat_id": "12", "channel_id": "D1"}, "12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ThreadOf(tt.meta); got != tt.want {
				t.Errorf("threadOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name, text string
		limit      int
		want       string
		cut        int
	}{
		{"short", "hello", 10, "hello", 0},
		{"exactly the limit", "héllo", 5, "héllo", 0},
		{"characters, not bytes", "ééééé", 3, "ééé\n[… truncated 2 characters]", 2},
		{"no limit", "hello", 0, "hello", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := truncate(tt.text, tt.limit)
			if got != tt.want || cut != tt.cut {
				t.Errorf("truncate = %q, %d; want %q, %d", got, cut, tt.want, tt.cut)
			}
		})
	}
}
