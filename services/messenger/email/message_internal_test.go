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
		for i, line := range strings.Split(string(c.data), "\r\n") {
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

		m, err := mail.ReadMessage(bytes.NewReader(c.data))
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
