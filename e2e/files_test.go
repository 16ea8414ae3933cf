package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/butler"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// TestFilesOut: the model sends files with notify and reply. Telegram gets
// an image as a photo with the message as its caption, several files as
// one media group, a message too long for a caption first and the file
// after it, each with the bytes the butler read (sha256); the log channel
// writes a line per file. What a butler may not send is refused, naming
// the path and the rule: a path outside files.roots, a symlink to
// /etc/passwd, Herald's own state, an environment file, a file over
// files.max_bytes, a channel that carries no files.
func TestFilesOut(t *testing.T) {
	f := newFleet(t)
	f.cfg.Butler("health").Files.MaxBytes = 2 << 20
	f.start("switchboard", "messenger")
	c := f.listen("health")
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(f.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	chart := pngOf(t, 300, 200)
	write("out/chart.png", chart)
	logText := make([]byte, 400_000)
	_, _ = rand.Read(logText)
	logPath := write("out/test.log", logText)

	sent := func(call telegramtest.Call, field string) telegramtest.Upload {
		t.Helper()
		u, ok := call.Files[field]
		if !ok {
			t.Fatalf("%s carried no file %q: %v", call.Method, field, call.Params)
		}
		return u
	}
	same := func(what string, got, want []byte) {
		t.Helper()
		if sha256.Sum256(got) != sha256.Sum256(want) {
			t.Errorf("%s: Telegram got %d bytes that are not the file's %d", what, len(got), len(want))
		}
	}

	// One image: a photo, the message its caption (a relative path).
	res := c.Call("notify", map[string]any{"message": "the **chart**", "files": []any{"out/chart.png"}})
	if res.IsError {
		t.Fatalf("notify with a photo: %s", text(res))
	}
	photo := f.tg.WaitCalls(t, "sendPhoto", 1, 10*time.Second)[0]
	same("the photo", sent(photo, "photo").Data, chart)
	if photo.Params["caption"] != "the <b>chart</b>" || photo.Params["chat_id"] != chatID {
		t.Errorf("the photo's caption %q to chat %s; want the message, formatted", photo.Params["caption"], photo.Params["chat_id"])
	}
	if n := len(f.tg.Calls("sendMessage")); n != 0 {
		t.Errorf("%d text messages besides the photo; the message fits its caption", n)
	}

	// Two files, one not an image: a media group of documents.
	if res := c.Call("notify", map[string]any{"message": "chart and log", "files": []any{"out/chart.png", logPath}}); res.IsError {
		t.Fatalf("notify with two files: %s", text(res))
	}
	group := f.tg.WaitCalls(t, "sendMediaGroup", 1, 10*time.Second)[0]
	if !strings.Contains(group.Params["media"], `"type":"document"`) || strings.Contains(group.Params["media"], `"type":"photo"`) {
		t.Errorf("the media group mixes photos with a document, which Telegram refuses: %s", group.Params["media"])
	}
	var groupData [][]byte
	for _, u := range group.Files {
		groupData = append(groupData, u.Data)
	}
	if len(groupData) != 2 {
		t.Fatalf("the media group carried %d files, want 2", len(groupData))
	}

	// A message too long for a caption goes first; the file follows. And
	// a reply carries a file into its thread.
	long := strings.Repeat("A long report line. ", 80)
	if res := c.Call("notify", map[string]any{"message": long, "files": []any{"out/test.log"}}); res.IsError {
		t.Fatalf("notify with a long message and a file: %s", text(res))
	}
	doc := f.tg.WaitCalls(t, "sendDocument", 1, 10*time.Second)[0]
	same("the document", sent(doc, "document").Data, logText)
	if doc.Params["caption"] != "" || len(f.tg.Calls("sendMessage")) != 1 {
		t.Errorf("a message over Telegram's 1024-character caption: caption %q, %d text messages; want the text first, then the file", doc.Params["caption"], len(f.tg.Calls("sendMessage")))
	}
	f.tg.SendUserMessage(f.tg.Token(), telegramtest.Message{Chat: telegramtest.Chat{ID: alice.ID, Type: "private"}, From: &alice, Text: "send me the log"})
	in := c.Wait(butler.MethodChannel, 1)[0]
	if res := c.Call("reply", map[string]any{"request_id": meta(in)["request_id"], "message": "here", "files": []any{"out/test.log"}}); res.IsError {
		t.Fatalf("reply with a file: %s", text(res))
	}
	reply := f.tg.WaitCalls(t, "sendDocument", 2, 10*time.Second)[1]
	if reply.ReplyParameters == nil || reply.Params["caption"] != "here" {
		t.Errorf("the reply's file: reply_parameters %+v, caption %q; want it threaded under the message, the answer its caption", reply.ReplyParameters, reply.Params["caption"])
	}

	// The log: a line per file, naming its sha256.
	if res := c.Call("notify", map[string]any{"channel": "log", "message": "archived", "files": []any{"out/chart.png"}}); res.IsError {
		t.Fatalf("notify with a file to the log: %s", text(res))
	}
	sum := sha256.Sum256(chart)
	if recs := f.logs.Records(map[string]string{"msg": "file", "sha256": hex.EncodeToString(sum[:])}); len(recs) != 1 {
		t.Errorf("the log channel wrote %d lines for the file, want 1 naming its sha256", len(recs))
	}

	// By mail: an attachment of multipart/mixed, as a real MIME parser
	// reads it.
	if res := c.Call("notify", map[string]any{"channel": "email", "message": "the chart", "files": []any{"out/chart.png"}}); res.IsError {
		t.Fatalf("notify with a file by mail: %s", text(res))
	}
	mails := f.smtp.WaitMessages(t, 1, 20*time.Second)
	if got := mailAttachments(t, mails[len(mails)-1].Data); len(got) != 1 || got["chart.png"] == nil || !bytes.Equal(got["chart.png"], chart) {
		t.Errorf("the mail's attachments: %d, chart.png %d bytes; want the chart, %d bytes", len(got), len(got["chart.png"]), len(chart))
	}

	// What may not be sent.
	outside := filepath.Join(t.TempDir(), "outside.txt")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(f.dir, "out", "passwd")); err != nil {
		t.Fatal(err)
	}
	write(".herald/tokens/health.token", []byte("secret"))
	write("out/.env", []byte("TOKEN=secret"))
	write("out/big.bin", make([]byte, 3<<20))
	for _, bad := range []struct {
		args map[string]any
		says string
	}{
		{map[string]any{"message": "x", "files": []any{outside}}, "outside files.roots"},
		{map[string]any{"message": "x", "files": []any{"out/passwd"}}, "/etc/passwd, outside files.roots"},
		{map[string]any{"message": "x", "files": []any{".herald/tokens/health.token"}}, "Herald's own state"},
		{map[string]any{"message": "x", "files": []any{"out/.env"}}, "environment file"},
		{map[string]any{"message": "x", "files": []any{"out/big.bin"}}, "over files.max_bytes (2 MB)"},
		{map[string]any{"message": "x", "files": []any{"out/none.txt"}}, "does not exist"},
	} {
		res := c.Call("notify", bad.args)
		if !res.IsError || !strings.Contains(text(res), bad.says) {
			t.Errorf("notify %v: %s; want it refused, saying %q", bad.args["files"], text(res), bad.says)
		}
	}
	for m, want := range map[string]int{"sendPhoto": 1, "sendDocument": 2, "sendMediaGroup": 1} {
		if got := len(f.tg.Accepted(m)); got != want {
			t.Errorf("%d %s calls, want %d: a refused file went out", got, m, want)
		}
	}
}

// TestMessengerKilledMidUpload: the messenger is killed (SIGKILL) the
// moment Telegram has taken a file's upload, before its answer: the next
// messenger cannot know whether the person has it, so it sends it again
// (on_uncertain: resend) and the delivery is uncertain, in the ledger and
// the audit log; the file arrives whole both times, never silently twice.
func TestMessengerKilledMidUpload(t *testing.T) {
	if _, err := serviceBins(); err != nil {
		t.Fatal(err)
	}
	f := newFleet(t)
	dir := t.TempDir()
	report := make([]byte, 700_000)
	_, _ = rand.Read(report)
	path := filepath.Join(dir, "report.bin")
	if err := os.WriteFile(path, report, 0o600); err != nil {
		t.Fatal(err)
	}
	mcpAddr := testkit.FreeAddr(t)
	file := filepath.Join(t.TempDir(), "herald.yaml")
	yaml := fmt.Sprintf(`butlers:
  - { name: health, default_channel: telegram, mcp_http: %q, mcp_token_env: MCP_TOKEN, files: { roots: [%q] } }
integrations:
  - { id: tg_main, type: telegram, token_env: TG_TOKEN, default_chat: %q, grants: all, rate_limit_out: { disabled: true } }
`, mcpAddr, dir, chatID)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"NATS_URL=" + f.bus.URL(), "HERALD_CONFIG=" + file, "MCP_TOKEN=" + f.env["HERALD_E2E_MCP_TOKEN"],
		"TG_TOKEN=" + f.tg.Token(), "TELEGRAM_API_URL=" + f.tg.URL()}
	if out, err := heraldCLI(t, env, "setup"); err != nil {
		t.Fatalf("herald setup: %v\n%s", err, out)
	}
	startService(t, "switchboard", "switchboard", env)
	m := startService(t, "messenger", "messenger", env)
	startService(t, "butler", "butler health", env, "--name", "health")

	var killed atomic.Bool
	f.tg.OnAccept("sendDocument", func(telegramtest.Call) {
		if killed.CompareAndSwap(false, true) {
			_ = m.cmd.Process.Signal(syscall.SIGKILL)
			_ = m.cmd.Wait()
		}
	})
	c := f.connect("http://"+mcpAddr+"/mcp", "")
	answered := make(chan string, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "notify"
		req.Params.Arguments = map[string]any{"message": "the report", "files": []any{path}, "idempotency_key": "report-1"}
		res, err := c.CallTool(t.Context(), req)
		if err != nil {
			answered <- err.Error()
			return
		}
		answered <- text(res)
	}()
	testkit.Eventually(t, 20*time.Second, killed.Load, "the upload to reach Telegram")
	startService(t, "messenger", "messenger again", env)
	calls := f.tg.WaitCalls(t, "sendDocument", 2, 60*time.Second)
	for i, call := range calls {
		if u := call.Files["document"]; sha256.Sum256(u.Data) != sha256.Sum256(report) {
			t.Errorf("upload %d: %d bytes that are not the file's", i+1, len(u.Data))
		}
	}
	audits := f.auditN("uncertain", 1)
	if len(audits) != 1 || !strings.Contains(fmt.Sprint(audits[0]["reason"]), "twice") {
		t.Errorf("uncertain audit records %v; want one saying the person may have it twice", audits)
	}
	time.Sleep(2 * time.Second)
	if n := len(f.tg.Calls("sendDocument")); n != 2 {
		t.Errorf("Telegram got %d uploads, want 2 (the one in flight, sent again once)", n)
	}
	select {
	case a := <-answered:
		if !strings.Contains(a, "uncertain") && !strings.Contains(a, "twice") && !strings.Contains(a, "queued") {
			t.Errorf("the butler's answer %q says nothing of the uncertain upload", a)
		}
	case <-time.After(40 * time.Second):
		t.Error("notify never answered")
	}
}

// mailAttachments parses a mail with net/mail and mime/multipart and
// returns its attachments' bytes by file name.
func mailAttachments(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" {
		t.Fatalf("the mail is %s (%v), want multipart/mixed", mt, err)
	}
	out := map[string][]byte{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.FileName() == "" {
			continue
		}
		var r io.Reader = p
		if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "base64") {
			r = base64.NewDecoder(base64.StdEncoding, p)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		out[p.FileName()] = b
	}
}
