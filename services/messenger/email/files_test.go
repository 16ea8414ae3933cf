package email_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/email/smtptest"
)

// testFile is a file of a delivery, spooled to a temp dir.
func testFile(t *testing.T, name, typ string, data []byte) deliver.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spooled")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return deliver.File{Name: name, Size: int64(len(data)), MediaType: typ, Path: path}
}

// Bytes like a PDF's and a PNG's, long enough for many base64 lines.
var (
	pdfData = append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte{0x00, 0xff, 0x25, 0x0a}, 3000)...)
	pngData = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0x01, 0x80, 0xfe}, 700)...)
)

// b64 is data in base64 lines of 76 characters, as mail clients write it.
func b64(data []byte) string {
	s := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	return b.String() + s
}

// part is one MIME part as Go's own parser reads it.
type part struct {
	header textproto.MIMEHeader
	name   string
	data   []byte
}

// readMail parses a mail with net/mail and mime/multipart only: the
// text/plain of its body, and its attachments, base64 undone.
func readMail(t *testing.T, data []byte) (mail.Header, string, []part) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	typ, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || typ != "multipart/mixed" {
		t.Fatalf("Content-Type %q (%v), want multipart/mixed", m.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	body, err := mr.NextPart()
	if err != nil {
		t.Fatal(err)
	}
	_, alt, err := mime.ParseMediaType(body.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := multipart.NewReader(body, alt["boundary"]).NextPart() // quoted-printable undone
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(plain)
	var files []part
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if enc := p.Header.Get("Content-Transfer-Encoding"); enc != "base64" {
			t.Errorf("file %s: Content-Transfer-Encoding %q, want base64", p.FileName(), enc)
		}
		b, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, p))
		if err != nil {
			t.Fatalf("file %s: %v", p.FileName(), err)
		}
		files = append(files, part{header: p.Header, name: p.FileName(), data: b})
	}
	return m.Header, string(text), files
}

func TestSendFiles(t *testing.T) {
	srv := smtptest.NewServer(t)
	long := strings.Repeat("годовой ", 20) + "отчёт.pdf" // past one header line
	files := []deliver.File{
		testFile(t, "отчёт.pdf", "application/pdf", pdfData),
		testFile(t, "chart.png", "image/png", pngData),
		testFile(t, long, "application/pdf", []byte("%PDF-1.4\n")),
	}
	r := deliverOne(t, newSender(t, srv), deliver.Delivery{Key: "k-files", Intent: "reply", Butler: "finance",
		Message: "The report and its chart.", Thread: thread, Files: files})

	m := srv.WaitMessages(t, 1, wait)[0]
	for i, line := range strings.Split(string(m.Data), "\r\n") {
		if len(line) > 78 || strings.ContainsFunc(line, func(r rune) bool { return r >= 0x80 || r == '\r' || r == '\n' }) {
			t.Fatalf("line %d is not a 7-bit line of at most 78 characters: %q", i+1, line)
		}
	}
	h, text, got := readMail(t, m.Data)
	if text != "The report and its chart." {
		t.Errorf("text %q, want the message", text)
	}
	if id := h.Get("Message-ID"); id != "<k-files@example.com>" || len(r.MessageIDs) != 1 || r.MessageIDs[0] != id {
		t.Errorf("Message-ID %q, receipt %v; want <k-files@example.com> for both", id, r.MessageIDs)
	}
	if h.Get("In-Reply-To") != thread {
		t.Errorf("In-Reply-To %q, want %q", h.Get("In-Reply-To"), thread)
	}
	if len(got) != len(files) {
		t.Fatalf("%d files in the mail, want %d", len(got), len(files))
	}
	for i, f := range files {
		want, _ := os.ReadFile(f.Path)
		typ, params, _ := mime.ParseMediaType(got[i].header.Get("Content-Type"))
		if got[i].name != f.Name || params["name"] != f.Name || typ != f.MediaType || !bytes.Equal(got[i].data, want) {
			t.Errorf("file %d: %q (name %q), %s, %d bytes; want %q, %s, %d bytes as sent", i+1, got[i].name, params["name"], typ, len(got[i].data), f.Name, f.MediaType, len(want))
		}
	}
	full := 0
	for line := range strings.SplitSeq(string(m.Data), "\r\n") {
		if len(line) == 76 {
			full++
		}
	}
	if want := (len(pdfData) + len(pngData)) * 4 / 3 / 76; full < want-2 {
		t.Errorf("%d lines of 76 characters, want about %d: the files' base64 is not in lines of 76", full, want)
	}
}

func TestMailTooLarge(t *testing.T) {
	srv := smtptest.NewServer(t, smtptest.WithAuth(user, password), smtptest.WithSTARTTLS(), smtptest.WithMaxBytes(10_000))
	s := newSender(t, srv)
	_, err := s.Deliver(t.Context(), deliver.Delivery{Key: "k-big", Message: "the report", Files: []deliver.File{testFile(t, "report.pdf", "application/pdf", pdfData)}})
	if !errors.Is(err, envelope.ErrValidation) {
		t.Fatalf("Deliver: %v, want a validation_error", err)
	}
	for _, want := range []string{"too large", "10 KB", "18 MB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("error %q holds the password", err)
	}
}

// A file that cannot be read mid-mail leaves the mail unended: the server
// discards it, and nothing half-written reaches anyone.
func TestUnreadableFileSendsNothing(t *testing.T) {
	srv := smtptest.NewServer(t)
	f := testFile(t, "gone.pdf", "application/pdf", pdfData)
	f.Path = filepath.Join(t.TempDir(), "missing")
	d := deliver.Delivery{Key: "k-gone", Message: "the report", Files: []deliver.File{testFile(t, "ok.png", "image/png", pngData), f}}
	if _, err := newSender(t, srv).Deliver(t.Context(), d); !errors.Is(err, envelope.ErrInternal) || !strings.Contains(err.Error(), "gone.pdf") {
		t.Fatalf("Deliver: %v, want an internal error naming gone.pdf", err)
	}
	// A second mail after it shows the server is done with the first.
	deliverOne(t, newSender(t, srv), deliver.Delivery{Key: "k-next", Message: "next"})
	if got := srv.WaitMessages(t, 1, wait); len(got) != 1 || got[0].Header.Get("Message-ID") != "<k-next@example.com>" {
		t.Fatalf("server took %d mails, want only the next one", len(got))
	}
}

// holding starts a receiver whose attachments go to a real NATS server's
// herald_files; filesMax, if set, bounds that store.
func holding(t *testing.T, filesMax int64) (*recorder, string, *nats.Conn) {
	t.Helper()
	nc, js := bustest.RunServer(t).Connect()
	if filesMax > 0 {
		st, err := js.Stream(t.Context(), bus.StreamFiles)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		cfg.MaxBytes = filesMax
		if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	rec, _ := runWith(t, inboundIntegration(), deliver.Env{JS: js, Instance: "test-1",
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return rec, listening(t, rec), nc
}

// held reads the bytes of a back as the messenger's download does.
func held(t *testing.T, nc *nats.Conn, a envelope.Attachment) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := bus.GetHeld(t.Context(), nc, "mail", a.Ref, a.Size, &b); err != nil {
		t.Fatalf("GetHeld %s: %v", a.Name, err)
	}
	return b.Bytes()
}

func TestAttachments(t *testing.T) {
	pdf := bytes.Repeat([]byte{0x25, 0x50, 0x44, 0x46, 0x00, 0xff}, 50) // 300 bytes
	png := []byte("\x89PNG\r\n\x1a\n\x00\x01")                          // 10 bytes
	msg := "From: ann@example.org\nSubject: report\nMessage-ID: <att@example.org>\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=\"b1\"\n\n" +
		"--b1\nContent-Type: multipart/alternative; boundary=\"b2\"\n\n" +
		"--b2\nContent-Type: text/plain; charset=utf-8\n\nSee the report.\n" +
		"--b2\nContent-Type: text/html; charset=utf-8\n\n<p>See the report.</p>\n--b2--\n" +
		"--b1\nContent-Type: application/pdf; name=\"report.pdf\"\nContent-Disposition: attachment; filename=\"report.pdf\"\n" +
		"Content-Transfer-Encoding: base64\n\n" + base64.StdEncoding.EncodeToString(pdf) + "\n" +
		// An image shown inline, its type wrongly claimed: the bytes say.
		"--b1\nContent-Type: application/octet-stream\nContent-Disposition: inline; filename*=UTF-8''Gr%C3%BC%C3%9Fe.png\n" +
		"Content-Transfer-Encoding: base64\n\n" + base64.StdEncoding.EncodeToString(png) + "\n--b1--\n"

	rec, addr, nc := holding(t, 0)
	mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(msg))
	in := oneIngress(t, rec)
	if in.Content.Text != "See the report." {
		t.Errorf("text %q, want the text part", in.Content.Text)
	}
	want := []struct {
		name, mime string
		data       []byte
	}{{"report.pdf", "application/pdf", pdf}, {"Grüße.png", "image/png", png}}
	if len(in.Attachments) != len(want) {
		t.Fatalf("attachments %+v, want %d", in.Attachments, len(want))
	}
	for i, w := range want {
		a := in.Attachments[i]
		if a.Name != w.name || a.Mime != w.mime || a.Size != int64(len(w.data)) || !bus.Held(a.Ref) {
			t.Errorf("attachment %d: %+v, want %s, %s, %d bytes, held", i+1, a, w.name, w.mime, len(w.data))
			continue
		}
		if got := held(t, nc, a); !bytes.Equal(got, w.data) {
			t.Errorf("%s: held %d bytes that differ from the %d sent", a.Name, len(got), len(w.data))
		}
	}
}

// A mail of a file and no words is still a message.
func TestAttachmentOnly(t *testing.T) {
	rec, addr, nc := holding(t, 0)
	msg := "From: ann@example.org\nMessage-ID: <only@example.org>\nMIME-Version: 1.0\n" +
		"Content-Type: application/pdf; name=\"scan.pdf\"\nContent-Transfer-Encoding: base64\n\n" +
		b64(pdfData) + "\n"
	mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(msg))
	in := oneIngress(t, rec)
	if in.Content.Text != "" || len(in.Attachments) != 1 || in.Attachments[0].Name != "scan.pdf" {
		t.Fatalf("text %q, attachments %+v; want no text and scan.pdf", in.Content.Text, in.Attachments)
	}
	if got := held(t, nc, in.Attachments[0]); !bytes.Equal(got, pdfData) {
		t.Errorf("held %d bytes that differ from the %d sent", len(got), len(pdfData))
	}
}

// A file the store cannot take leaves the mail to arrive without it, the
// text saying so.
func TestAttachmentNotKept(t *testing.T) {
	rec, addr, _ := holding(t, 4<<10)
	msg := "From: ann@example.org\nMessage-ID: <full@example.org>\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/plain\n\nThe scan.\n" +
		"--b\nContent-Type: application/pdf\nContent-Disposition: attachment; filename=\"scan.pdf\"\nContent-Transfer-Encoding: base64\n\n" +
		b64(pdfData) + "\n--b--\n"
	mustSend(t, addr, "ann@example.org", []string{"herald@example.com"}, crlf(msg))
	in := oneIngress(t, rec)
	if len(in.Attachments) != 0 {
		t.Errorf("attachments %+v, want none listed that cannot be downloaded", in.Attachments)
	}
	if want := "The scan.\n\n[attachment scan.pdf (12 KB) could not be kept: the file store is full]"; in.Content.Text != want {
		t.Errorf("text %q, want %q", in.Content.Text, want)
	}
}

// What the sender sends, the receiver takes in: names, types and bytes.
func TestFilesRoundTrip(t *testing.T) {
	srv := smtptest.NewServer(t)
	files := []deliver.File{testFile(t, "отчёт.pdf", "application/pdf", pdfData), testFile(t, "chart.png", "image/png", pngData)}
	deliverOne(t, newSender(t, srv), deliver.Delivery{Key: "k-round", Message: "Both files.", Files: files})
	sent := srv.WaitMessages(t, 1, wait)[0]

	// Herald's mail says it is auto-generated, which the receiver drops
	// (no loops); as a person's mail, with that line gone, it goes in.
	raw := strings.Replace(string(sent.Data), "Auto-Submitted: auto-generated\r\n", "", 1)
	rec, addr, nc := holding(t, 0)
	mustSend(t, addr, "herald@example.com", []string{"herald@example.com"}, raw)
	in := oneIngress(t, rec)
	if in.Content.Text != "Both files." || len(in.Attachments) != len(files) {
		t.Fatalf("text %q, attachments %+v; want the message and %d files", in.Content.Text, in.Attachments, len(files))
	}
	for i, f := range files {
		a := in.Attachments[i]
		want, _ := os.ReadFile(f.Path)
		if a.Name != f.Name || a.Mime != f.MediaType || !bytes.Equal(held(t, nc, a), want) {
			t.Errorf("file %d: %q, %s; want %q, %s, with the bytes sent", i+1, a.Name, a.Mime, f.Name, f.MediaType)
		}
	}
}
