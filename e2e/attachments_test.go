package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	stdimage "image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/bus"

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
		{"(no text; attached: voice.ogg (audio/ogg, 12 KB, 12 s))", "voice.ogg (audio/ogg, 12 KB, 12 s)"},
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

// TestDownloadAttachment: the model downloads a photo and a document a
// person sent on Telegram; each is saved in the butler's files inbox,
// readable by its user alone, with the bytes Telegram held (sha256), and
// the photo also comes back as image content. A download for a message
// that is not the butler's, or of an attachment it does not have, is
// refused, saying why.
func TestDownloadAttachment(t *testing.T) {
	f := newFleet(t)
	f.start("switchboard", "messenger")
	c := f.listen("health")
	chat := telegramtest.Chat{ID: alice.ID, Type: "private"}

	photo := pngOf(t, 64, 48)
	pid, puid := f.tg.AddFile(photo, "photo.jpg")
	doc := make([]byte, 300_000+17) // three chunks and a bit
	_, _ = rand.Read(doc)
	did, duid := f.tg.AddFile(doc, "results.bin")
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Photo: []telegramtest.PhotoSize{
		{FileID: pid, FileUniqueID: puid, Width: 64, Height: 48, FileSize: int64(len(photo))},
	}})
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: chat, From: &alice, Caption: "the log",
		Document: &telegramtest.Document{FileID: did, FileUniqueID: duid, FileName: "../../results.bin", MimeType: "application/octet-stream", FileSize: int64(len(doc))}})
	got := c.Wait(butler.MethodChannel, 2)
	photoID, docID := meta(got[0])["request_id"].(string), meta(got[1])["request_id"].(string)

	res := c.Call("download_attachment", map[string]any{"request_id": photoID})
	if res.IsError {
		t.Fatalf("download_attachment of the photo: %s", text(res))
	}
	path := savedPath(t, text(res))
	checkSaved(t, path, photo, filepath.Join(f.dir, ".herald", "files", "health"))
	var image *mcp.ImageContent
	for _, content := range res.Content {
		if ic, ok := content.(mcp.ImageContent); ok {
			image = &ic
		}
	}
	if image == nil || image.MIMEType != "image/png" {
		t.Errorf("the photo came back without image content (image/png, as its bytes say): %+v", res.Content)
	} else if data, _ := base64.StdEncoding.DecodeString(image.Data); !bytes.Equal(data, photo) {
		t.Errorf("the image content is not the photo (%d bytes, want %d)", len(data), len(photo))
	}

	res = c.Call("download_attachment", map[string]any{"request_id": docID, "index": 0})
	if res.IsError {
		t.Fatalf("download_attachment of the document: %s", text(res))
	}
	path = savedPath(t, text(res))
	checkSaved(t, path, doc, filepath.Join(f.dir, ".herald", "files", "health"))
	if filepath.Base(path) != docID+"-0-results.bin" {
		t.Errorf("the document was saved as %s; want its own name without the directories it claimed", filepath.Base(path))
	}
	for _, content := range res.Content {
		if _, ok := content.(mcp.ImageContent); ok {
			t.Error("a document came back as image content")
		}
	}

	if res := c.Call("download_attachment", map[string]any{"request_id": docID, "index": 1}); !res.IsError || !strings.Contains(text(res), "has 1 attachment") {
		t.Errorf("an attachment the message does not have: %s", text(res))
	}
	// Another butler asking the messenger for health's message, as the
	// subject that is its own: the messenger checks it was routed to it.
	body, _ := json.Marshal(bus.DownloadRequest{RequestID: photoID})
	msg, err := f.nc.Request(bus.DownloadSubject("finance"), body, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var a bus.DownloadAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil || a.Error == nil || a.Error.Class != "forbidden" || !strings.Contains(a.Error.Message, "not a message routed to finance") {
		t.Errorf("finance asking for health's attachment: %s", msg.Data)
	}
	if n := f.tg.Downloads(); n != 2 {
		t.Errorf("Telegram served %d downloads, want 2 (none for a refused request)", n)
	}
}

// savedPath is the path download_attachment's answer names.
func savedPath(t *testing.T, answer string) string {
	t.Helper()
	_, path, ok := strings.Cut(answer, ") to ")
	if !ok || !filepath.IsAbs(path) {
		t.Fatalf("download_attachment answered %q, with no path", answer)
	}
	return path
}

// checkSaved checks the file at path holds want, mode 0600, inside dir.
func checkSaved(t *testing.T, path string, want []byte, dir string) {
	t.Helper()
	if filepath.Dir(path) != dir {
		t.Errorf("saved in %s, want the files inbox %s", filepath.Dir(path), dir)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(data) != sha256.Sum256(want) {
		t.Errorf("the saved file (%d bytes) is not what was sent (%d bytes)", len(data), len(want))
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the saved file's mode is %v, want 0600 (the butler's user alone)", st.Mode().Perm())
	}
}

// pngOf is a w×h PNG.
func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := stdimage.NewRGBA(stdimage.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: 200, A: 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
