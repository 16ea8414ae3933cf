package discord_test

import (
	"os"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/discord"
)

// TestLive sends one real message through Discord's REST API. It runs only
// with DISCORD_BOT_TOKEN and DISCORD_CHANNEL_ID set (DISCORD_API_URL
// optional).
func TestLive(t *testing.T) {
	testkit.SkipWithoutEnv(t, "live Discord test, sending one real message", "DISCORD_BOT_TOKEN", "DISCORD_CHANNEL_ID")
	cfg := &discord.Config{TokenEnv: "DISCORD_BOT_TOKEN", APIURL: os.Getenv("DISCORD_API_URL"), DefaultChannelID: os.Getenv("DISCORD_CHANNEL_ID")}
	delivertest.Live(t, discord.New, config.Integration{ID: "live", Type: "discord", Settings: cfg}, deliver.Delivery{
		Intent: "send", Butler: "herald",
		Message: "Herald live test at " + time.Now().Format(time.RFC3339) + ": **bold**, *italic*, `code` & <escaped> @everyone.",
		Urgency: "low",
	})
}
