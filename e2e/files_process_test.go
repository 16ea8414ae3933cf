package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/butler/butlertest"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// TestFilesThroughProcesses: with the real binaries as processes and
// transcribe pointing at a stand-in of the transcription API (it parses the
// multipart form as the API does), a voice note sent to the bot reaches
// the model as what was said, marked transcript, and its audio is still
// downloadable, the same bytes the person sent; a photo is downloaded by
// the model with the bytes the person sent; a file notified by mail arrives
// as an attachment a MIME parser reads back.
func TestFilesThroughProcesses(t *testing.T) {
	if _, err := serviceBins(); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	audio := append([]byte("OggS\x00\x02"), bytes.Repeat([]byte{0x4f, 0x70, 0x75, 0x73}, 5000)...)
	var mu sync.Mutex
	var heard []byte
	stt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" || r.Header.Get("Authorization") != "Bearer sk-e2e" || r.ParseMultipartForm(1<<20) != nil || r.FormValue("model") != "whisper-large-v3" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		file, _, err := r.FormFile("file")
		if err != nil {
			http.Error(w, `{"error":{"message":"no file"}}`, http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(file)
		mu.Lock()
		heard = b
		mu.Unlock()
		_, _ = w.Write([]byte(`{"text":"Did the backup finish last night?"}`))
	}))
	t.Cleanup(stt.Close)

	mcpAddr := testkit.FreeAddr(t)
	file := filepath.Join(t.TempDir(), "herald.yaml")
	yaml := fmt.Sprintf(`transcribe: { url: %q, model: whisper-large-v3, api_key_env: STT_KEY }
butlers:
  - { name: health, default_channel: telegram, mcp_http: %q, mcp_token_env: MCP_TOKEN, files: { roots: [%q], inbox: %q } }
integrations:
  - { id: tg_main, type: telegram, token_env: TG_TOKEN, default_chat: %q, grants: all, inbound: { allow_from: [%q] } }
  - { id: mail, type: email, smtp_url_env: SMTP_URL, from: herald@example.com, default_to: me@example.com, ca_file: %q, grants: all }
`, stt.URL+"/v1", mcpAddr, f.dir, filepath.Join(f.dir, "inbox"), chatID, chatID, f.smtp.WriteCertFile(t))
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"NATS_URL=" + f.bus.URL(), "HERALD_CONFIG=" + file, "MCP_TOKEN=" + f.env["HERALD_E2E_MCP_TOKEN"],
		"TG_TOKEN=" + f.tg.Token(), "TELEGRAM_API_URL=" + f.tg.URL(), "STT_KEY=sk-e2e", "SMTP_URL=" + f.smtp.URL()}
	if out, err := heraldCLI(t, env, "setup"); err != nil {
		t.Fatalf("herald setup: %v\n%s", err, out)
	}
	startService(t, "switchboard", "switchboard", env)
	startService(t, "messenger", "messenger", env)
	startService(t, "butler", "butler health", env, "--name", "health")
	c := butlertest.Connect(t, "http://"+mcpAddr+"/mcp", "2025-06-18", f.bearer())

	id, uid := f.tg.AddFile(audio, "voice/file_7.oga")
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: alice.ID, Type: "private"}, From: &alice,
		Voice: &telegramtest.Voice{FileID: id, FileUniqueID: uid, Duration: 3, MimeType: "audio/ogg", FileSize: int64(len(audio))}})
	got := c.Wait(butler.MethodChannel, 1)[0]
	m := meta(got)
	if got["content"] != "Did the backup finish last night?" || m["transcript"] != "true" || m["attachment_count"] != "1" {
		t.Fatalf("the model got %v; want the transcript, marked, with the voice note attached", got)
	}
	mu.Lock()
	sent := bytes.Equal(heard, audio)
	mu.Unlock()
	if !sent {
		t.Errorf("the transcription API got %d bytes, not the voice note's %d", len(heard), len(audio))
	}
	res := c.Call("download_attachment", map[string]any{"request_id": m["request_id"]})
	if res.IsError {
		t.Fatalf("download_attachment of the voice note: %s", text(res))
	}
	checkSaved(t, savedPath(t, text(res)), audio, filepath.Join(f.dir, "inbox"))

	photo := pngOf(t, 64, 48)
	pid, puid := f.tg.AddFile(photo, "photo.jpg")
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: alice.ID, Type: "private"}, From: &alice,
		Photo: []telegramtest.PhotoSize{{FileID: pid, FileUniqueID: puid, Width: 64, Height: 48, FileSize: int64(len(photo))}}})
	shown := c.Wait(butler.MethodChannel, 2)[1]
	if res := c.Call("download_attachment", map[string]any{"request_id": meta(shown)["request_id"]}); res.IsError {
		t.Errorf("download_attachment of the photo: %s", text(res))
	} else {
		checkSaved(t, savedPath(t, text(res)), photo, filepath.Join(f.dir, "inbox"))
	}

	if err := os.WriteFile(filepath.Join(f.dir, "chart.png"), photo, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := c.Call("notify", map[string]any{"channel": "email", "message": "the chart", "files": []any{filepath.Join(f.dir, "chart.png")}}); res.IsError {
		t.Fatalf("notify with a file by mail: %s", text(res))
	}
	mails := f.smtp.WaitMessages(t, 1, 20*time.Second)
	if got := mailAttachments(t, mails[0].Data); !bytes.Equal(got["chart.png"], photo) {
		t.Errorf("the mail carries %d attachments, chart.png %d bytes; want the chart, %d bytes", len(got), len(got["chart.png"]), len(photo))
	}
}
