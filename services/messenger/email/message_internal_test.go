package email

import (
	"bytes"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// FuzzCompose checks the header-injection guard: whatever a notify carries,
// the mail has exactly the headers compose writes, every line is 7-bit and
// within RFC 5322's limit, and the text part is the message as written.
func FuzzCompose(f *testing.F) {
	f.Add("health", "Hello\r\nBcc: eve@example.com", "**bold** body", "<a@b>\r\nX-Evil: 1", "k1", "high")
	f.Add("", "", "\n\n# Grüße\r\nline\rline", "", "", "")
	f.Add("x", strings.Repeat("a", 2000), "m", strings.Repeat("b", 2000), strings.Repeat("c", 200), "low")
	f.Fuzz(func(t *testing.T, butler, subject, message, thread, key, urgency string) {
		from := &mail.Address{Name: "Herald", Address: "herald@example.com"}
		to := &mail.Address{Address: "me@example.com"}
		d := deliver.Delivery{Key: key, Intent: "reply", Butler: butler, Subject: subject, Message: message, Thread: thread, Urgency: urgency}
		c, err := compose(d, from, to, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		var data bytes.Buffer
		if err := c.writeTo(&data); err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(data.String(), "\r\n") {
			if len(line) > 998 {
				t.Fatalf("line %d is %d characters long", i+1, len(line))
			}
			if strings.ContainsAny(line, "\r\n") {
				t.Fatalf("line %d has a bare CR or LF: %q", i+1, line)
			}
			for _, b := range []byte(line) {
				if b >= 0x80 {
					t.Fatalf("line %d has 8-bit data: %q", i+1, line)
				}
			}
		}

		m, err := mail.ReadMessage(&data)
		if err != nil {
			t.Fatalf("the mail does not parse: %v", err)
		}
		allowed := map[string]bool{
			"From": true, "To": true, "Date": true, "Subject": true, "Message-Id": true,
			"In-Reply-To": true, "References": true, "Importance": true, "X-Priority": true,
			"Auto-Submitted": true, "Mime-Version": true, "Content-Type": true,
		}
		for k, v := range m.Header {
			if !allowed[k] || len(v) != 1 {
				t.Errorf("header %s: %q", k, v)
			}
		}
		if got := m.Header.Get("Message-Id"); got != c.messageID {
			t.Errorf("Message-ID %q, composed %q", got, c.messageID)
		}
		if !strings.Contains(subject, "=?") && !strings.Contains(message, "=?") && !strings.Contains(butler, "=?") {
			got, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
			if want := Subject(butler, subject, message, urgency); err != nil || got != want {
				t.Errorf("Subject decodes to %q (%v), want %q", got, err, want)
			}
		}

		_, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := multipart.NewReader(m.Body, params["boundary"]).NextRawPart()
		if err != nil {
			t.Fatal(err)
		}
		var plain bytes.Buffer
		if _, err := plain.ReadFrom(quotedprintable.NewReader(p)); err != nil {
			t.Fatal(err)
		}
		want := strings.NewReplacer("\r\n", "\r\n", "\r", "\r\n", "\n", "\r\n").Replace(message)
		if plain.String() != want {
			t.Errorf("text/plain part %q, want %q", plain.String(), want)
		}
	})
}

func TestMsgID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"abc@example.com", "<abc@example.com>"},
		{"<abc@example.com>", "<abc@example.com>"},
		{"  <abc@example.com> \r\n", "<abc@example.com>"},
		{"<a>\r\nBcc: x", "<aBcc:x>"},
		{"", ""},
		{"<>", ""},
		{strings.Repeat("a", threadLimit+1), ""},
	}
	for _, tt := range tests {
		if got := msgID(tt.in); got != tt.want {
			t.Errorf("msgID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzFileHeader: whatever a file is called, its part's header is 7-bit
// lines of at most 78 characters (998 for a media type past 50), and a MIME parser reads the name back
// as sent (made one line).
func FuzzFileHeader(f *testing.F) {
	f.Add("отчёт.pdf", "application/pdf")
	f.Add(strings.Repeat("годовой ", 40)+"😀.pdf", "text/plain; charset=utf-8")
	f.Add("a \"quoted\" name; with=tspecials\\.txt", "bogus")
	f.Fuzz(func(t *testing.T, name, typ string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		if _, err := mw.CreatePart(fileHeader(deliver.File{Name: name, MediaType: typ})); err != nil {
			t.Fatal(err)
		}
		_ = mw.Close()
		// The name never makes a line long; a media type of its own can
		// (the notify's schema bounds it at 255).
		limit := 78
		if len(typ) > 50 {
			limit = 998
		}
		head, _, _ := strings.Cut(b.String(), "\r\n\r\n")
		for line := range strings.SplitSeq(head, "\r\n") {
			if len(line) > limit || strings.ContainsFunc(line, func(r rune) bool { return r >= 0x80 || r == '\r' || r == '\n' }) {
				t.Fatalf("header line %q", line)
			}
		}
		p, err := multipart.NewReader(&b, mw.Boundary()).NextRawPart()
		if err != nil {
			t.Fatal(err)
		}
		want := clean(name)
		if want == "" {
			want = "file"
		}
		// Not p.FileName, which keeps only what follows the last slash.
		_, disp, err1 := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		_, params, err2 := mime.ParseMediaType(p.Header.Get("Content-Type"))
		if disp["filename"] != want || params["name"] != want || err1 != nil || err2 != nil {
			t.Fatalf("name %q reads back as %q, Content-Type name %q (%v, %v)", name, disp["filename"], params["name"], err1, err2)
		}
	})
}
