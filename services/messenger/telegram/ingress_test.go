package telegram

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// FuzzToIngress feeds arbitrary updates, as Telegram (or a broken server)
// could send them, through the conversion: whatever it makes must be a valid
// ingress.v1, with the update's native id.
func FuzzToIngress(f *testing.F) {
	for _, s := range []string{
		`{"update_id":1,"message":{"message_id":5,"date":1,"chat":{"id":42,"type":"private"},"from":{"id":42,"first_name":"Ada","username":"ada"},"text":"hi"}}`,
		`{"update_id":2,"message":{"message_id":6,"message_thread_id":3,"date":2,"chat":{"id":-100123,"type":"supergroup"},"from":{"id":7,"first_name":"G"},"caption":"c","photo":[{"file_id":"a","file_size":1},{"file_id":"b","file_size":2}],"reply_to_message":{"message_id":4,"date":1,"chat":{"id":-100123,"type":"supergroup"}}}}`,
		`{"update_id":3,"message":{"message_id":7,"date":3,"chat":{"id":-5,"type":"group"},"sender_chat":{"id":-5,"type":"group","title":"Ops"},"document":{"file_id":"d","file_name":"x.pdf","mime_type":"application/pdf","file_size":9}}}`,
		`{"update_id":4,"callback_query":{"id":"99","from":{"id":42,"first_name":"Ada"},"message":{"message_id":8,"date":4,"chat":{"id":42,"type":"private"}},"data":"perm:allow:abcde"}}`,
		`{"update_id":5,"callback_query":{"id":"98","from":{"id":42,"first_name":"Ada"},"message":{"message_id":8,"date":0,"chat":{"id":42,"type":"private"}},"data":"x"}}`,
		`{"update_id":6,"callback_query":{"id":"97","from":{"id":42,"first_name":"Ada"},"inline_message_id":"abc","data":"x"}}`,
		`{"update_id":7,"message":{"message_id":9,"date":5,"chat":{"id":42,"type":"private"},"sticker":{"file_id":"s","emoji":"👍","is_animated":true}}}`,
		`{"update_id":8,"message":{"message_id":10,"date":6,"chat":{"id":42,"type":"private"},"new_chat_members":[{"id":1}]}}`,
		`{"update_id":10,"message":{"message_id":11,"message_thread_id":4,"is_topic_message":true,"date":7,"chat":{"id":-1001234567890,"type":"supergroup","is_forum":true},"from":{"id":7,"first_name":"G"},"text":"in a topic"}}`,
		`{"update_id":9,"edited_message":{"message_id":10,"date":6,"chat":{"id":42,"type":"private"},"text":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var u models.Update
		if json.Unmarshal(raw, &u) != nil {
			return
		}
		in, queryID := toIngress("tg_main", "7000000001", &u, time.Unix(1767225600, 0))
		if in == nil {
			if queryID != "" {
				t.Fatalf("no ingress but a query to answer: %q", queryID)
			}
			return
		}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := envelope.Validate(schemas.Ingress, b); err != nil {
			t.Fatalf("invalid ingress from %s: %v\n%s", raw, err, b)
		}
		if !strings.HasPrefix(in.NativeID, "7000000001:") || in.RequestContext.SourceSenderIdentity == "" {
			t.Fatalf("native_id %q, sender %q", in.NativeID, in.RequestContext.SourceSenderIdentity)
		}
		if u.CallbackQuery != nil && (queryID != u.CallbackQuery.ID || in.Meta["callback_data"] != deliver.Clip(u.CallbackQuery.Data, maxMeta)) {
			t.Fatalf("callback: query %q, meta %v", queryID, in.Meta)
		}
	})
}
