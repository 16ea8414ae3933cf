package email

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

var metaKey = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// FuzzParseMail feeds the inbound parser whatever a stranger could send:
// it never panics, and every mail it reads makes a valid ingress.v1 (meta
// keys of letters, digits and underscore; every bound of the schema kept;
// valid UTF-8 text without control characters).
func FuzzParseMail(f *testing.F) {
	f.Add([]byte("From: Ann <ann@example.org>\r\nSubject: hi\r\nMessage-ID: <a@b>\r\n\r\nHello.\r\n"))
	f.Add([]byte("From: =?UTF-8?B?w4Rubg==?= <ann@example.org>\r\nSubject: =?ISO-8859-1?Q?caf=E9?=\r\n" +
		"Content-Type: text/plain; charset=windows-1252\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=93hi=94 =\r\nthere=ZZ\r\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/html\r\n\r\n<p>a<script>b</script>\r\n" +
		"--x\r\nContent-Disposition: attachment; filename*=UTF-8''%E2%82%AC.txt\r\nContent-Transfer-Encoding: base64\r\n\r\nQUJD=\r\n--x--\r\n"))
	f.Add([]byte("Content-Type: multipart/alternative; boundary=\"a\"\r\n\r\n--a\r\nContent-Type: multipart/mixed; boundary=\"a\"\r\n\r\n--a--\r\n"))
	f.Add([]byte("In-Reply-To: <x@y>\r\nReferences: <r@y> <x@y>\r\nAuto-Submitted: auto-replied\r\nPrecedence: bulk\r\nList-Id: <l>\r\n\r\n> quote\r\n"))
	f.Add([]byte("From: \xff\xfe@\x00\r\nTo: <>,,;\r\nDate: yesterday\r\nMessage-ID: \x01<\x02>\r\n\r\n\x1b[31mred\r\n"))
	f.Add([]byte("Subject: x\r\n\r\nSure.\r\n\r\nOn Mon, Ann <a@b> wrote:\r\n> old\r\n"))
	f.Add([]byte("Authentication-Results: mx.example.net; dmarc=pass header.from=example.org\r\n" +
		"DKIM-Signature: v=1; a=rsa-sha256; d=example.org; s=s1; h=from; bh=AAAA; b=AAAA\r\nFrom: ann@example.org\r\n\r\nhi\r\n"))
	f.Add([]byte("Authentication-Results: mx.example.net 2; dmarc=pass\r\nDKIM-Signature: v=1; d=; l=1; x=1\r\n" +
		"From: ann@example.org\r\nFrom: bob@example.org\r\n\r\n"))
	// No key is ever found: the fuzzer exercises the parsing, not DNS.
	r := &Receiver{trusted: map[string]bool{"mx.example.net": true}, lookupTXT: func(_ context.Context, name string) ([]string, error) {
		return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := parseMail(raw)
		if err != nil {
			return // a header that does not parse is refused with 554
		}
		_ = dropReason(m, "sender@example.org")
		auth := r.authenticate(t.Context(), m, raw)
		in := newIngress("mail", m, raw, "Sender@Example.org", []string{"herald@example.com"}, time.Unix(1136214245, 0), auth)
		if want := strconv.FormatBool(auth.ok); in.Meta[MetaSenderAuthenticated] != want {
			t.Fatalf("meta %s = %q, want %q", MetaSenderAuthenticated, in.Meta[MetaSenderAuthenticated], want)
		}
		if !auth.ok && !strings.HasPrefix(in.RequestContext.SourceSenderIdentity, UnverifiedPrefix) {
			t.Fatalf("unauthenticated sender identity %q lacks %q", in.RequestContext.SourceSenderIdentity, UnverifiedPrefix)
		}
		for k := range in.Meta {
			if !metaKey.MatchString(k) {
				t.Fatalf("meta key %q is not letters, digits and underscore", k)
			}
		}
		if !utf8.ValidString(in.Content.Text) {
			t.Fatalf("text is not valid UTF-8: %q", in.Content.Text)
		}
		if strings.ContainsFunc(in.Content.Text, func(r rune) bool { return r < ' ' && r != '\n' && r != '\t' }) {
			t.Fatalf("text has control characters: %q", in.Content.Text)
		}
		for _, in := range []*envelope.Ingress{in, withoutContent(in)} {
			b, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			if err := envelope.Validate(schemas.Ingress, b); err != nil {
				t.Fatalf("not a valid ingress.v1: %v\n%s", err, b)
			}
		}
	})
}

func TestHTMLToText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"entities", "a &lt;b&gt; &amp; &quot;c&quot; &#8364; &eacute;", `a <b> & "c" € é`},
		{"tags never survive", `<img src=x onerror=alert(1)>hi<iframe src="y"></iframe>`, "hi"},
		{"escaped markup stays text", "&lt;script&gt;alert(1)&lt;/script&gt;", "<script>alert(1)</script>"},
		{"source line breaks are spaces", "one\ntwo\r\n  three", "one two three"},
		{"style and comments go", "<style>\nbody{}\n</style><!-- x\n-->visible", "visible"},
		{"table cells", "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>", "a b\nc"},
		{"blank lines collapse", "<p>a</p><p></p><p></p><div></div><p>b</p>", "a\n\nb"},
		{"a lone less-than sign", "1 < 2 and 3 > 2", "1 < 2 and 3 > 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := htmlToText(tt.in); got != tt.want {
				t.Errorf("htmlToText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTrimQuotedTail(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bottom quote after attribution", "Yes.\n\nOn Mon, 2 Jan 2006, Ann <a@b> wrote:\n> Noon?\n>\n> Ann\n", "Yes."},
		{"attribution wrapped on two lines", "Yes.\n\nOn Mon, 2 Jan 2006 at 15:04, Ann Example <ann@example.org>\nwrote:\n> Noon?\n", "Yes."},
		{"German client", "Ja.\n\nAm 02.01.2006 um 15:04 schrieb Ann <a@b>:\n> Mittag?\n", "Ja."},
		{"no attribution: kept", "Yes.\n> Noon?\n", "Yes.\n> Noon?\n"},
		{"interleaved answers: kept", "On Mon, Ann wrote:\n> a\nanswer\n> b\n", "On Mon, Ann wrote:\n> a\nanswer\n> b\n"},
		{"only a quote: kept", "On Mon, Ann wrote:\n> a\n", "On Mon, Ann wrote:\n> a\n"},
		{"no quote", "Just text.", "Just text."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := trimQuotedTail(tt.in); got != tt.want {
				t.Errorf("trimQuotedTail(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestMsgIDs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"<a@b>", []string{"<a@b>"}},
		{" <a@b> (comment) <c@d>\t<e@f> ", []string{"<a@b>", "<c@d>", "<e@f>"}},
		{"a@b", []string{"<a@b>"}},
		{"<>", nil},
		{"not an id", nil},
		{"<" + strings.Repeat("x", 1000) + "@b>", nil},
	}
	for _, tt := range tests {
		if got := msgIDs(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("msgIDs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestCharsets: mail in the charsets of Russian and Japanese mail clients
// arrives readable, in the body and in RFC 2047 encoded headers.
func TestCharsets(t *testing.T) {
	tests := []struct {
		charset string
		enc     encoding.Encoding
		text    string
	}{
		{"KOI8-R", charmap.KOI8R, "Привет, как дела?"},
		{"Shift_JIS", japanese.ShiftJIS, "こんにちは、請求書です。"},
		{"ISO-2022-JP", japanese.ISO2022JP, "会議は明日の十時です。"},
		{"windows-1252", charmap.Windows1252, "“café” – 5 €"},
	}
	for _, tt := range tests {
		t.Run(tt.charset, func(t *testing.T) {
			body, err := tt.enc.NewEncoder().String(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			subject := "=?" + tt.charset + "?B?" + base64.StdEncoding.EncodeToString([]byte(body)) + "?="
			raw := "From: ann@example.org\r\nSubject: " + subject + "\r\nContent-Type: text/plain; charset=" + tt.charset + "\r\n\r\n" + body + "\r\n"
			m, err := parseMail([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(m.text) != tt.text || m.subject != tt.text {
				t.Fatalf("body %q, subject %q; want %q", m.text, m.subject, tt.text)
			}
		})
	}
}
