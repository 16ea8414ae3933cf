package discord_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/discord"
	"github.com/heraldhq/herald/services/messenger/discord/discordtest"
)

const tokenEnv = "HERALD_TEST_DISCORD_TOKEN"

// integration is a discord integration against srv, as herald.yaml would
// have it; edit adjusts it.
func integration(srv *discordtest.Server, edit ...func(*config.Integration)) config.Integration {
	in := config.Integration{ID: "discord_main", Type: "discord", Settings: &discord.Config{
		TokenEnv: tokenEnv, APIURL: srv.URL(), DefaultChannelID: discordtest.ChannelDefault,
	}}
	for _, e := range edit {
		e(&in)
	}
	return in
}

// env is a deliver.Env whose token_env holds token.
func env(t *testing.T, token string) deliver.Env {
	return delivertest.Env(t, map[string]string{tokenEnv: token})
}

// newSender builds the channel's sender against srv with token.
func newSender(t *testing.T, srv *discordtest.Server, token string, edit ...func(*config.Integration)) deliver.Sender {
	t.Helper()
	return newSenderTimeout(t, srv, token, 0, edit...)
}

// newSenderTimeout is newSender whose REST calls time out after timeout
// (0: the channel's own limit).
func newSenderTimeout(t *testing.T, srv *discordtest.Server, token string, timeout time.Duration, edit ...func(*config.Integration)) deliver.Sender {
	t.Helper()
	e := env(t, token)
	e.CallTimeout = timeout
	return delivertest.NewSender(t, discord.New, integration(srv), e, edit...)
}

// recv is how a test's receiver is built.
type recv struct {
	js       jetstream.JetStream // the bus: lease and session kept there
	token    string              // default srv.Token()
	instance string              // default "a"
	logs     io.Writer           // also gets the log
	edit     func(*config.Integration)
}

// newReceiver builds the channel's receiver against srv, with 50ms
// backoffs and a 2s lease.
func newReceiver(t *testing.T, srv *discordtest.Server, o recv) deliver.Receiver {
	t.Helper()
	in := integration(srv, func(in *config.Integration) { in.Inbound = config.Inbound{Enabled: true} })
	if o.edit != nil {
		o.edit(&in)
	}
	if o.token == "" {
		o.token = srv.Token()
	}
	if o.instance == "" {
		o.instance = "a"
	}
	e := env(t, o.token)
	if o.logs != nil {
		e.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), o.logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	e.JS, e.Instance = o.js, o.instance
	r, err := discord.NewReceiver(in, e)
	if err != nil || r == nil {
		t.Fatalf("NewReceiver: %v, %v", r, err)
	}
	discord.SetTiming(r, 50*time.Millisecond, 2*time.Second)
	return r
}
