package slack_test

import (
	"os"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/slack"
)

// TestLive posts one real message and a reaction to it through Slack's Web
// API. It runs only with SLACK_BOT_TOKEN and SLACK_CHANNEL_ID set (the bot
// must be in that channel; SLACK_API_URL optional).
func TestLive(t *testing.T) {
	testkit.SkipWithoutEnv(t, "live Slack test, posting one real message", "SLACK_BOT_TOKEN", "SLACK_CHANNEL_ID")
	in := config.Integration{ID: "live", Type: "slack", Settings: &slack.Config{
		TokenEnv: "SLACK_BOT_TOKEN", APIURL: os.Getenv("SLACK_API_URL"), DefaultChannelID: os.Getenv("SLACK_CHANNEL_ID"),
	}}
	delivertest.Live(t, slack.New, in, deliver.Delivery{
		Key:     "live-" + time.Now().Format("20060102T150405"),
		Intent:  "send",
		Message: "Herald live test at " + time.Now().Format(time.RFC3339) + ": **bold**, _italic_, `code` & <escaped>.",
		Urgency: "high",
	})
}
