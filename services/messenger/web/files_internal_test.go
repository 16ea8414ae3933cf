package web

import (
	"mime"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzFileName feeds the names browsers give files: whatever it makes of
// one is shown and sent on, so it must be printable UTF-8 within ingress.v1's
// limit, and name the file when it is downloaded.
func FuzzFileName(f *testing.F) {
	for _, seed := range []string{"chart.png", "résumé.pdf", "a\x00b\r\n.txt", "\xff\xfe.bin", `"quoted"; name=x`, strings.Repeat("é", 300), " ", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got := fileName(name)
		if !utf8.ValidString(got) || strings.ContainsFunc(got, unicode.IsControl) || utf8.RuneCountInString(got) > 255 {
			t.Fatalf("fileName(%q) = %q", name, got)
		}
		if got == "" {
			return // refused
		}
		_, params, err := mime.ParseMediaType(mime.FormatMediaType("attachment", map[string]string{"filename": got}))
		if err != nil || params["filename"] != got {
			t.Fatalf("%q downloads as %q (%v)", got, params["filename"], err)
		}
	})
}
