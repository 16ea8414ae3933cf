package e2e

import (
	"strings"
	"testing"

	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// TestAttachmentsReachTheModel: a photo without a caption, a voice note and
// a document with a caption reach the model, each saying what came (meta
// attachments and attachment_count) and none of them empty.
func TestAttachmentsReachTheModel(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	chat := telegramtest.Chat{ID: alice.ID, Type: "private"}
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Photo: []telegramtest.PhotoSize{
		{FileID: "small", FileUniqueID: "p1", Width: 90, Height: 60, FileSize: 1_200},
		{FileID: "large", FileUniqueID: "p1", Width: 1280, Height: 853, FileSize: 183_400},
	}})
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Voice: &telegramtest.Voice{FileID: "v1", FileUniqueID: "v1", Duration: 12, MimeType: "audio/ogg", FileSize: 12_345}})
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Caption: "my blood test",
		Document: &telegramtest.Document{FileID: "d1", FileUniqueID: "d1", FileName: "results.pdf", MimeType: "application/pdf", FileSize: 2_400_000}})

	got := c.Wait(butler.MethodChannel, 3)
	for i, want := range []struct{ content, files string }{
		{"(no text; attached: photo.jpg (image/jpeg, 183 KB))", "photo.jpg (image/jpeg, 183 KB)"},
		{"(no text; attached: voice.ogg (audio/ogg, 12 KB))", "voice.ogg (audio/ogg, 12 KB)"},
		{"my blood test", "results.pdf (application/pdf, 2.4 MB)"},
	} {
		m := meta(got[i])
		if got[i]["content"] != want.content || m["attachments"] != want.files || m["attachment_count"] != "1" {
			t.Errorf("message %d reached the model as %q with attachments %q (%v); want %q with %q, 1",
				i+1, got[i]["content"], m["attachments"], m["attachment_count"], want.content, want.files)
		}
		if strings.TrimSpace(got[i]["content"].(string)) == "" {
			t.Errorf("message %d reached the model empty", i+1)
		}
	}
}
