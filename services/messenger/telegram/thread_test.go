package telegram

import (
	"errors"
	"strings"
	"testing"

	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/envelope"
)

func FuzzParseThread(f *testing.F) {
	for _, s := range []string{"42:7", "-1001234567890:1", "@chan:3", "", ":", "42:", ":7", "42:7:8", "x:y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		th, err := parseThread(s)
		if err != nil {
			if !errors.Is(err, envelope.ErrValidation) {
				t.Fatalf("parseThread(%q) error %v is not a validation error", s, err)
			}
			return
		}
		if th.messageID <= 0 || !telegramspec.ValidChat(th.chat) {
			t.Fatalf("parseThread(%q) = %+v", s, th)
		}
		if !strings.HasPrefix(strings.TrimSpace(s), th.chat+":") {
			t.Fatalf("parseThread(%q) = %+v: chat is not the part before the colon", s, th)
		}
	})
}
