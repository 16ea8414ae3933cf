package web

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

// FuzzDecodePost feeds the page's endpoint arbitrary bodies: whatever it
// accepts must make a valid ingress.v1, within the limits.
func FuzzDecodePost(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hi","client_id":"0190a0e4-1c2b-4abc-8def-0123456789ab"}`,
		`{"text":"Allow","client_id":"0190A0E4-1C2B-4ABC-8DEF-0123456789AB","name":"Alice","callback_data":"perm:allow:abcde","reply_to":"b0123"}`,
		`{"text":"","client_id":"x"}`,
		`{"text":"a"}{"text":"b"}`,
		`{"text":"\u0000\ud800","client_id":"0190a0e4-1c2b-4abc-8def-0123456789ab","name":"\u2028"}`,
		`[]`,
	} {
		f.Add(seed)
	}
	c := &Channel{id: "home"}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := decodePost(strings.NewReader(body), false)
		if err != nil {
			return
		}
		if strings.TrimSpace(p.Text) == "" || len(p.Text) > MaxText {
			t.Fatalf("accepted text of %d bytes: %q", len(p.Text), p.Text)
		}
		in := c.ingress("0123456789abcdef01234567", p, time.Now())
		if err := envelope.Check(schemas.Ingress, in); err != nil {
			t.Fatalf("accepted %q but built an invalid ingress: %v", body, err)
		}
	})
}
