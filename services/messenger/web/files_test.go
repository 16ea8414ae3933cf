package web_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/web/webtest"
)

// pngBytes is a small real PNG.
func pngBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// takesFiles fails a test of visitors' files where configuration gives
// the web channel none to take.
func takesFiles(t *testing.T) int64 {
	t.Helper()
	limits, _ := config.ChannelOf("web")
	if limits.MaxFile == 0 {
		t.Fatal("pkg/channel/web gives the web channel MaxFile 0, so it takes no files: set it to 50 << 20")
	}
	return limits.MaxFile
}

// spooled is a delivery's file as the messenger spools it.
func spooled(t *testing.T, name, typ string, data []byte) deliver.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return deliver.File{Name: name, Size: int64(len(data)), MediaType: typ, SHA256: hex.EncodeToString(sum[:]), Path: path}
}

func TestUploadReachesTheButler(t *testing.T) {
	takesFiles(t)
	nc, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	v := newVisitor(t, ch)
	events := v.events("")
	chart := pngBytes(t)
	log := []byte(strings.Repeat("ok  \tgithub.com/heraldhq/herald\n", 100))
	tests := []struct {
		name  string
		text  string
		files []upFile
		want  []envelope.Attachment // Ref aside
	}{
		{
			name: "a message with two files; the bytes tell a PNG whatever the browser claims",
			text: "the chart and the log",
			files: []upFile{
				{name: "chart (final).png", typ: "application/octet-stream", data: chart},
				{name: "build.log", typ: "text/plain", data: log},
			},
			want: []envelope.Attachment{
				{Name: "chart (final).png", Mime: "image/png", Size: int64(len(chart))},
				{Name: "build.log", Mime: "text/plain", Size: int64(len(log))},
			},
		},
		{
			name:  "only a file, no text",
			files: []upFile{{name: "résumé.pdf", typ: "application/pdf", data: []byte("%PDF-1.4\n%...")}},
			want:  []envelope.Attachment{{Name: "résumé.pdf", Mime: "application/pdf", Size: 13}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := uuid()
			if code, resp := v.upload(map[string]string{"text": tt.text, "client_id": id}, tt.files, nil); code != http.StatusAccepted {
				t.Fatalf("upload: %d %s", code, resp)
			}
			in := sk.next(t)
			if err := envelope.Check(schemas.Ingress, in); err != nil {
				t.Fatalf("not a valid ingress.v1: %v", err)
			}
			if in.Content.Text != tt.text || in.Meta["message_id"] != id || len(in.Attachments) != len(tt.want) {
				t.Fatalf("ingress text %q, message %q, %d attachments; want %q, %s, %d", in.Content.Text, in.Meta["message_id"], len(in.Attachments), tt.text, id, len(tt.want))
			}
			echo := events.next()
			for i, a := range in.Attachments {
				if want := tt.want[i]; a.Name != want.Name || a.Mime != want.Mime || a.Size != want.Size || !bus.Held(a.Ref) {
					t.Errorf("attachment %d: %+v, want %+v with a held ref", i, a, want)
				}
				// What the butler downloads is what the visitor sent.
				var held bytes.Buffer
				if err := bus.GetHeld(t.Context(), nc, "home", a.Ref, a.Size, &held); err != nil || !bytes.Equal(held.Bytes(), tt.files[i].data) {
					t.Errorf("attachment %d held as %d bytes (%v), want the %d sent", i, held.Len(), err, len(tt.files[i].data))
				}
				// The visitor's own message links its files.
				if got := v.download(echo.Files[i].URL); got.code != http.StatusOK || !bytes.Equal(got.data, tt.files[i].data) || got.name() != a.Name {
					t.Errorf("the echo's link %d served %d, %q, %d bytes", i, got.code, got.name(), len(got.data))
				}
			}
		})
	}
}

func TestFileLinksOnlyForTheirVisitor(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	alice, bob := newVisitor(t, ch), newVisitor(t, ch)
	toAlice, toBob := alice.events(""), bob.events("")
	alice.say("send me the report")
	sk.next(t)
	toAlice.next()
	report := []byte("quarterly numbers, private to alice")
	_, err := ch.Deliver(t.Context(), deliver.Delivery{
		Key: strings.Repeat("f", 64), Intent: envelope.IntentSend, Butler: "finance", Recipient: alice.id, Message: "Here it is.",
		Files: []deliver.File{spooled(t, "report.txt", "text/plain; charset=utf-8", report)},
	})
	if err != nil {
		t.Fatal(err)
	}
	msg := toAlice.next()
	if len(msg.Files) != 1 || msg.Files[0].Name != "report.txt" || msg.Files[0].Size != int64(len(report)) || msg.Files[0].Ref != "" {
		t.Fatalf("alice's message has files %+v: want report.txt, its size, and a link but no ref", msg.Files)
	}
	link := msg.Files[0].URL
	if got := alice.download(link); got.code != http.StatusOK || !bytes.Equal(got.data, report) {
		t.Fatalf("alice fetched %d, %q", got.code, got.data)
	}
	anonymous := &visitor{t: t, base: alice.base, client: &http.Client{}}
	for who, v := range map[string]*visitor{"bob": bob, "no cookie": anonymous} {
		if got := v.download(link); got.code != http.StatusNotFound || bytes.Contains(got.data, report) {
			t.Errorf("%s fetching alice's file: %d %q, want 404 without the bytes", who, got.code, got.data)
		}
	}
	// A link to an entry that is not a file's, or to no entry.
	for _, other := range []string{"/api/files/1/0", "/api/files/999999/0", strings.TrimSuffix(link, "0") + "1"} {
		if got := alice.download(other); got.code != http.StatusNotFound {
			t.Errorf("%s: %d %q, want 404", other, got.code, got.data)
		}
	}

	// A file sent to everyone is everyone's.
	if _, err := ch.Deliver(t.Context(), deliver.Delivery{
		Intent: envelope.IntentSend, Butler: "assistant", Message: "menu",
		Files: []deliver.File{spooled(t, "menu.txt", "text/plain", []byte("soup"))},
	}); err != nil {
		t.Fatal(err)
	}
	toAlice.next()
	broadcast := toBob.next().Files[0].URL
	for who, v := range map[string]*visitor{"alice": alice, "bob": bob} {
		if got := v.download(broadcast); got.code != http.StatusOK || string(got.data) != "soup" {
			t.Errorf("%s fetching the broadcast's file: %d %q", who, got.code, got.data)
		}
	}
}

func TestFilesServedSafely(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	v := newVisitor(t, ch)
	events := v.events("")
	v.say("hi")
	sk.next(t)
	events.next()
	script := []byte(`<html><script>fetch('/api/messages')</script></html>`)
	svg := []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)
	files := []deliver.File{
		spooled(t, "page.html", "text/html; charset=utf-8", script),
		spooled(t, "logo.svg", "image/svg+xml", svg),
		spooled(t, "chart.png", "image/png", pngBytes(t)),
	}
	if _, err := ch.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "health", Recipient: v.id, Message: "files", Files: files}); err != nil {
		t.Fatal(err)
	}
	msg := events.next()
	for i, want := range []struct{ typ, disposition string }{
		{"text/html; charset=utf-8", "attachment"},
		{"image/svg+xml", "attachment"},
		{"image/png", "inline"},
	} {
		got := v.download(msg.Files[i].URL)
		h := got.header
		if got.code != http.StatusOK || h.Get("Content-Type") != want.typ || !strings.HasPrefix(h.Get("Content-Disposition"), want.disposition+";") || got.name() != files[i].Name {
			t.Errorf("%s served %d as %q, %q; want %q, %s", files[i].Name, got.code, h.Get("Content-Type"), h.Get("Content-Disposition"), want.typ, want.disposition)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") || strings.Contains(h.Get("Content-Security-Policy"), "script-src") {
			t.Errorf("%s served with nosniff %q, CSP %q: want nosniff and a sandbox that allows no script", files[i].Name, h.Get("X-Content-Type-Options"), h.Get("Content-Security-Policy"))
		}
	}
}

func TestExpiredFileSaysSo(t *testing.T) {
	takesFiles(t)
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	v := newVisitor(t, ch)
	events := v.events("")
	if code, resp := v.upload(map[string]string{"client_id": uuid()}, []upFile{{name: "notes.txt", data: []byte("notes")}}, nil); code != http.StatusAccepted {
		t.Fatalf("upload: %d %s", code, resp)
	}
	sk.next(t)
	link := events.next().Files[0].URL
	// A day on, herald_files has let the file go.
	files, err := js.Stream(t.Context(), bus.StreamFiles)
	if err != nil {
		t.Fatal(err)
	}
	if err := files.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := v.download(link); got.code != http.StatusGone || !strings.Contains(string(got.data), "notes.txt is no longer kept") {
		t.Fatalf("an expired file's link: %d %q, want 410 saying it is no longer kept", got.code, got.data)
	}
}

func TestUploadRefused(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	v := newVisitor(t, ch)
	anonymous := &visitor{t: t, base: v.base, client: &http.Client{}}
	maxFile := takesFiles(t)
	small := []upFile{{name: "a.txt", data: []byte("a")}}
	tests := []struct {
		name  string
		who   *visitor
		text  string
		files []upFile
		edit  func(*http.Request)
		want  int
		says  string
	}{
		{name: "a file over the channel's limit", files: []upFile{{name: "big.bin", data: make([]byte, maxFile+1)}}, want: http.StatusRequestEntityTooLarge, says: "big.bin is over 50 MB"},
		{name: "more than ten files", files: repeat(small, 11), want: http.StatusRequestEntityTooLarge, says: "at most 10 files"},
		{name: "neither text nor files", want: http.StatusBadRequest, says: "empty"},
		{name: "a file without a name", files: []upFile{{data: []byte("x")}}, want: http.StatusBadRequest, says: "filename"},
		{name: "no CSRF header", text: "hi", files: small, edit: func(r *http.Request) { r.Header.Del("X-Herald") }, want: http.StatusForbidden, says: "X-Herald"},
		{name: "from another site", text: "hi", files: small, edit: func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, want: http.StatusForbidden, says: "cross-origin"},
		{name: "no visitor cookie", who: anonymous, text: "hi", files: small, want: http.StatusForbidden, says: "reload the page"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			who := tt.who
			if who == nil {
				who = v
			}
			code, resp := who.upload(map[string]string{"text": tt.text, "client_id": uuid()}, tt.files, tt.edit)
			if code != tt.want || !strings.Contains(resp, tt.says) {
				t.Fatalf("status %d (%s), want %d saying %q", code, resp, tt.want, tt.says)
			}
			sk.none(t)
		})
	}

	t.Run("a chat without a bus keeps no files", func(t *testing.T) {
		memory, sk := serve(t, nil, "memory")
		code, resp := newVisitor(t, memory).upload(map[string]string{"text": "hi", "client_id": uuid()}, small, nil)
		if code != http.StatusBadRequest || !strings.Contains(resp, "takes no files") {
			t.Fatalf("status %d (%s), want 400 saying it takes no files", code, resp)
		}
		sk.none(t)
		if _, err := memory.Deliver(t.Context(), deliver.Delivery{Intent: "send", Message: "x", Files: []deliver.File{spooled(t, "a.txt", "text/plain", []byte("a"))}}); envelope.ClassOf(err) != envelope.ErrValidation.Error() {
			t.Fatalf("deliver with a file: %v, want a validation error", err)
		}
	})
}

func repeat(files []upFile, n int) []upFile {
	var out []upFile
	for range n {
		out = append(out, files...)
	}
	return out
}

// TestFilesInChromium is a person sending and getting files in a real
// browser: attach one, send it with no text, see it linked in the
// conversation; get a butler's file and open its link with the page's
// cookie.
func TestFilesInChromium(t *testing.T) {
	takesFiles(t)
	nc, js := bustest.RunServer(t).Connect()
	ch, sk := serve(t, js, "home")
	ctx := webtest.Browser(t)
	console := watchConsole(ctx)
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	chart := pngBytes(t)
	path := filepath.Join(t.TempDir(), "chart.png")
	if err := os.WriteFile(path, chart, 0o600); err != nil {
		t.Fatal(err)
	}
	do(chromedp.Navigate(ch.URL()), chromedp.WaitVisible(`#attach`),
		chromedp.SetUploadFiles(`#file`, []string{path}), chromedp.WaitVisible(`#attached li`),
		chromedp.Click(`#send`))
	in := sk.next(t)
	if len(in.Attachments) != 1 || in.Content.Text != "" {
		t.Fatalf("ingress %q with attachments %+v, want chart.png alone", in.Content.Text, in.Attachments)
	}
	a := in.Attachments[0]
	var held bytes.Buffer
	if err := bus.GetHeld(t.Context(), nc, "home", a.Ref, a.Size, &held); err != nil || a.Name != "chart.png" || a.Mime != "image/png" || !bytes.Equal(held.Bytes(), chart) {
		t.Fatalf("attachment %+v held as %d bytes (%v), want chart.png, image/png, the bytes chosen", a, held.Len(), err)
	}
	do(chromedp.WaitVisible(`.msg.visitor .files a`), chromedp.WaitNotVisible(`#attached`))

	if _, err := ch.Deliver(t.Context(), deliver.Delivery{
		Intent: envelope.IntentReply, Butler: "health", Thread: in.RequestContext.SourceThreadIdentity, Message: "Your **report**.",
		Files: []deliver.File{spooled(t, "report.html", "text/html; charset=utf-8", []byte("<script>alert(1)</script>"))},
	}); err != nil {
		t.Fatal(err)
	}
	do(chromedp.WaitVisible(`.msg.butler .files a`))
	link, err := chromedp.Run(ctx, chromedp.Evaluate[servedLink](`(async () => {
		const a = document.querySelector('.msg.butler .files a');
		const res = await fetch(a.href);
		return {name: a.textContent, size: a.nextElementSibling.textContent, status: res.status,
			disposition: res.headers.get('content-disposition'), body: await res.text()};
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := servedLink{Name: "report.html", Size: "25 B", Status: 200, Disposition: "attachment; filename=report.html", Body: "<script>alert(1)</script>"}
	if link != want {
		t.Errorf("the butler's file link %+v, want %+v", link, want)
	}
	screenshot(t, ctx)
	for _, m := range console() {
		t.Errorf("browser console %s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line)
	}
}

type servedLink struct {
	Name        string `json:"name"`
	Size        string `json:"size"`
	Status      int    `json:"status"`
	Disposition string `json:"disposition"`
	Body        string `json:"body"`
}
