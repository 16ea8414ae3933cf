package telegram

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/heraldhq/herald/pkg/forum"
)

// TestTopicMeta: a message or a tap in a forum topic names the topic
// (topic_id) beside its thread; a reply thread in a group that is not a
// forum, and the General topic, name none.
func TestTopicMeta(t *testing.T) {
	for _, tc := range []struct {
		name, update string
		topic        string // meta topic_id; "" for none
		thread       string // meta thread_id
	}{
		{"in a topic", `{"update_id":1,"message":{"message_id":9,"message_thread_id":4,"is_topic_message":true,"date":1,"chat":{"id":-1001,"type":"supergroup","is_forum":true},"from":{"id":7,"first_name":"A"},"text":"hi"}}`, "4", "4"},
		{"a tap in a topic", `{"update_id":2,"callback_query":{"id":"5","from":{"id":7,"first_name":"A"},"message":{"message_id":9,"message_thread_id":4,"is_topic_message":true,"date":1,"chat":{"id":-1001,"type":"supergroup","is_forum":true}},"data":"x"}}`, "4", "4"},
		{"General", `{"update_id":3,"message":{"message_id":9,"date":1,"chat":{"id":-1001,"type":"supergroup","is_forum":true},"from":{"id":7,"first_name":"A"},"text":"hi"}}`, "", ""},
		{"a reply thread", `{"update_id":4,"message":{"message_id":9,"message_thread_id":3,"date":1,"chat":{"id":-1002,"type":"supergroup"},"from":{"id":7,"first_name":"A"},"text":"hi"}}`, "", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u models.Update
			if err := json.Unmarshal([]byte(tc.update), &u); err != nil {
				t.Fatal(err)
			}
			in, _ := toIngress("tg_main", "7000000001", &u, time.Unix(1767225600, 0))
			if in == nil {
				t.Fatal("no ingress")
			}
			if got := in.Meta[forum.MetaTopic]; got != tc.topic {
				t.Errorf("meta %s = %q, want %q", forum.MetaTopic, got, tc.topic)
			}
			if got := in.Meta["thread_id"]; got != tc.thread {
				t.Errorf("meta thread_id = %q, want %q", got, tc.thread)
			}
		})
	}
}
