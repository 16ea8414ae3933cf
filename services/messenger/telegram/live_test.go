package telegram_test

import (
	"os"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/telegram"
)

// TestLive sends one real message through the Bot API. It runs only with
// TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID set (TELEGRAM_API_URL optional).
func TestLive(t *testing.T) {
	testkit.SkipWithoutEnv(t, "live Telegram test, sending one real message", "TELEGRAM_BOT_TOKEN", "TELEGRAM_CHAT_ID")
	in := config.Integration{ID: "live", Type: "telegram", Settings: &telegram.Config{TokenEnv: "TELEGRAM_BOT_TOKEN", APIURL: "https://api.telegram.org", DefaultChat: os.Getenv("TELEGRAM_CHAT_ID")}}
	if u := os.Getenv("TELEGRAM_API_URL"); u != "" {
		in.Settings.(*telegram.Config).APIURL = u
	}
	delivertest.Live(t, telegram.New, in, deliver.Delivery{
		Intent:  "send",
		Message: "Herald live test at " + time.Now().Format(time.RFC3339) + ": **bold**, _italic_, `code` & <escaped>.",
		Urgency: "low",
	})
}
