package email

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald/pkg/markdown"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// subjectMax is how many characters of a message's first line make a subject:
// RFC 5322's recommended line length, so most subjects fit one line.
const subjectMax = 78

// subjectLimit bounds a subject the notify gave itself; longer than this it
// is no subject but a message, and its header line would grow past what
// every server accepts (998 characters, RFC 5322 §2.1.1).
const subjectLimit = 200

// threadLimit bounds the Message-ID a reply refers to; anything longer is
// not a Message-ID a mail server produced, and is left out.
const threadLimit = 900

// messageIDMax bounds the part of the idempotency key that goes into a
// Message-ID; a SHA-256 in hex (64) fits whole.
const messageIDMax = 64

// composed is one mail ready for DATA.
type composed struct {
	messageID string // "<id@domain>"
	// head is the header with the blank line after it, and body the
	// multipart/alternative of the text (of type bodyType); CRLF line
	// endings, 7-bit.
	head, body []byte
	bodyType   string
	// files follow the text in a multipart/mixed of boundary mixed.
	files []deliver.File
	mixed string
}

// compose builds the mail of d from from to to: the headers of architecture.md §7 and
// a multipart/alternative body with the markdown as text/plain and its HTML
// rendering; with files, that body and then the files in a multipart/mixed.
// Every header value passes through clean, so nothing in d can start a
// header of its own.
func compose(d deliver.Delivery, from, to *mail.Address, now time.Time) (composed, error) {
	id := messageID(d.Key, from.Address)
	subject := Subject(d.Butler, d.Subject, d.Message, d.Urgency)

	var h header
	h.add("From", from.String())
	h.add("To", to.String())
	h.add("Date", now.Format(time.RFC1123Z))
	h.add("Subject", mime.QEncoding.Encode("utf-8", subject))
	h.add("Message-ID", id)
	if d.Intent == "reply" {
		if ref := msgID(d.Thread); ref != "" {
			h.add("In-Reply-To", ref)
			h.add("References", ref)
		}
	}
	if d.Urgency == "high" {
		h.add("Importance", "high")
		h.add("X-Priority", "1")
	}
	// RFC 3834: tells vacation responders and mailing lists not to answer.
	h.add("Auto-Submitted", "auto-generated")
	h.add("MIME-Version", "1.0")

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	text := strings.ReplaceAll(d.Message, "\r\n", "\n")
	if err := writePart(mw, "text/plain; charset=utf-8", text); err != nil {
		return composed{}, err
	}
	if err := writePart(mw, "text/html; charset=utf-8", htmlDocument(subject, markdown.HTML(text))); err != nil {
		return composed{}, err
	}
	if err := mw.Close(); err != nil {
		return composed{}, err
	}
	c := composed{messageID: id, body: body.Bytes(), files: d.Files,
		bodyType: mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": mw.Boundary()})}
	if len(d.Files) == 0 {
		h.add("Content-Type", c.bodyType)
	} else {
		c.mixed = multipart.NewWriter(io.Discard).Boundary()
		h.add("Content-Type", mime.FormatMediaType("multipart/mixed", map[string]string{"boundary": c.mixed}))
	}

	var out bytes.Buffer
	h.writeTo(&out)
	out.WriteString("\r\n")
	c.head = out.Bytes()
	return c, nil
}

// writeTo writes the mail to w, its files read as they go (never whole in
// memory). An error reading a file wraps envelope.ErrInternal.
func (c composed) writeTo(w io.Writer) error {
	if _, err := w.Write(c.head); err != nil {
		return err
	}
	if c.mixed == "" {
		_, err := w.Write(c.body)
		return err
	}
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(c.mixed); err != nil {
		return err
	}
	// Folded after its type, as the header's own, to keep the line short.
	p, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {strings.Replace(c.bodyType, "; ", ";\r\n ", 1)}})
	if err != nil {
		return err
	}
	if _, err := p.Write(c.body); err != nil {
		return err
	}
	for _, f := range c.files {
		if err := writeFile(mw, f); err != nil {
			return err
		}
	}
	return mw.Close()
}

func writePart(mw *multipart.Writer, contentType, content string) error {
	w, err := mw.CreatePart(textproto.MIMEHeader{
		"Content-Type":              {contentType},
		"Content-Transfer-Encoding": {"quoted-printable"},
	})
	if err != nil {
		return err
	}
	// quotedprintable writes "\n" as CRLF and keeps every line under 76
	// characters, so the body is 7-bit and survives any relay.
	qp := quotedprintable.NewWriter(w)
	if _, err := qp.Write([]byte(content)); err != nil {
		return err
	}
	return qp.Close()
}

// htmlDocument wraps an HTML fragment in the minimal document mail clients
// render predictably.
func htmlDocument(title, fragment string) string {
	return "<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n" +
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n" +
		"<title>" + html.EscapeString(title) + "</title>\n</head>\n<body>\n" +
		fragment + "\n</body>\n</html>\n"
}

// Subject is the subject line of architecture.md §7: "[<butler>] <subject>", where
// subject is the notify's own (up to 200 characters) or else the first
// non-empty line of the message with its markdown markers stripped, cut to
// about 78 characters; urgency high puts "[URGENT] " in front. Line breaks
// and control characters become spaces, so the result is always one header
// line.
func Subject(butler, subject, message, urgency string) string {
	text := cut(clean(subject), subjectLimit)
	if text == "" {
		text = cut(plainLine(prefix(firstLine(message), 16*subjectMax)), subjectMax)
	}
	var b strings.Builder
	if urgency == "high" {
		b.WriteString("[URGENT] ")
	}
	if butler = clean(butler); butler != "" {
		b.WriteString("[" + butler + "]")
		if text != "" {
			b.WriteString(" ")
		}
	}
	b.WriteString(text)
	return b.String()
}

func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if strings.TrimSpace(line) != "" {
			return line
		}
	}
	return ""
}

var (
	// blockMarker matches what opens a markdown block: headings, quotes,
	// list items, possibly nested ("> - item").
	blockMarker = regexp.MustCompile(`^(\s*(#{1,6}\s+|>\s?|[-*+]\s+|\d{1,9}[.)]\s+|\[[ xX]\]\s+))+`)
	// link matches [text](url) and ![alt](url); the text stays.
	link = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// emphasis matches the inline markers; '_' only where it is not inside a
	// word, so snake_case survives.
	emphasis = regexp.MustCompile("\\*+|~~|`+|(^|[^\\p{L}\\p{N}])_+|_+([^\\p{L}\\p{N}]|$)")
)

// prefix is the first n bytes of s, or fewer to end on a whole character:
// a subject needs only the start of a line, however long the line is.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// plainLine strips the markdown markers off one line.
func plainLine(s string) string {
	s = blockMarker.ReplaceAllString(strings.TrimSpace(s), "")
	s = strings.TrimRight(s, "# ") // closing ATX heading marks
	s = link.ReplaceAllString(s, "$1")
	s = emphasis.ReplaceAllString(s, "$1$2")
	return clean(s)
}

// cut shortens s to at most n characters, ending in "…", at a word boundary
// when one is near the end.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n-1]
	if i := lastSpace(r); i > n*3/4 {
		r = r[:i]
	}
	return strings.TrimRightFunc(string(r), unicode.IsSpace) + "…"
}

func lastSpace(r []rune) int {
	for i := len(r) - 1; i >= 0; i-- {
		if unicode.IsSpace(r[i]) {
			return i
		}
	}
	return -1
}

// clean makes s safe as (part of) a header value: every control character,
// CR and LF above all, becomes a space, runs of spaces collapse, and the
// ends are trimmed. This is the guard against header injection.
func clean(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
	}), " ")
}

// msgID normalises a Message-ID given with or without angle brackets to
// "<id>", dropping anything that cannot be part of one; "" if nothing is
// left or it is too long to be real.
func msgID(s string) string {
	id := strings.Map(func(r rune) rune {
		if r <= ' ' || r >= 0x7f || r == '<' || r == '>' {
			return -1
		}
		return r
	}, s)
	if id == "" || len(id) > threadLimit {
		return ""
	}
	return "<" + id + ">"
}

// messageID derives the Message-ID from the idempotency key, so a retried
// delivery carries the same Message-ID and mail clients (and people) see it
// as the same mail. Without a key it is random.
func messageID(key, from string) string {
	left := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == '-', r == '_', r == '=', r == '+':
			return r
		}
		return -1
	}, key)
	if len(left) > messageIDMax {
		left = left[:messageIDMax]
	}
	if left == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		left = hex.EncodeToString(b[:])
	}
	domain := "herald.invalid"
	if i := strings.LastIndexByte(from, '@'); i >= 0 && i < len(from)-1 {
		domain = from[i+1:]
	}
	return msgID(left + "@" + domain)
}

// header is an ordered list of header fields.
type header struct{ fields [][2]string }

func (h *header) add(name, value string) {
	h.fields = append(h.fields, [2]string{name, clean(value)})
}

// writeTo writes the fields, folded at spaces so lines stay near 78
// characters (RFC 5322 §2.2.3); a word longer than that stays whole.
func (h *header) writeTo(b *bytes.Buffer) {
	for _, f := range h.fields {
		line := f[0] + ":"
		for i, word := range strings.Split(f[1], " ") {
			if i > 0 && len(line)+1+len(word) > 78 {
				b.WriteString(line + "\r\n")
				line = ""
			}
			line += " " + word
		}
		b.WriteString(line + "\r\n")
	}
}
