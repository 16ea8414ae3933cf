package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/heraldhq/herald/pkg/markdown"
)

// Channel is what configuration knows of a channel type: the keys it adds
// to its integrations and what it can do. Herald's are in builtin, each
// channel's keys in a file of its own (channel_telegram.go, ...), so every
// binary reads herald.yaml without linking a channel's package.
type Channel struct {
	// Settings returns a new value of the channel's own keys, holding the
	// defaults that do not depend on other keys; an integration's block is
	// decoded into it. Nil: the channel has no keys of its own.
	Settings func() ChannelSettings
	// Buttons: the channel shows tap buttons under a message (claim_thread).
	Buttons bool
	// Answers: a person can answer a question there (the ask tool), by a
	// tap or a reply that comes back naming the message it answers.
	Answers bool
	// Typing: the channel can show that the agent is writing (typing).
	Typing bool
	// Reactions: a message can be reacted to (react, ack_reaction).
	Reactions bool
	// Edits: a message sent there can be edited afterwards (edit).
	Edits bool
	// AlwaysReceives: the channel's integrations take inbound messages even
	// without an inbound block (the web chat).
	AlwaysReceives bool
	// SignedSenders: the channel's own secret authenticates every sender, so
	// allow_from defaults to anyone and pairing cannot apply (webhooks).
	SignedSenders bool
	// MaxFile is the largest file a message there carries (files); 0:
	// the channel carries none (yet).
	MaxFile int64
	// Limit is how much one message holds, as the channel's sender counts
	// it; nil: a message is shown whole (markdown.WholeLimit).
	Limit *markdown.Limit
}

// ChannelSettings are an integration's keys that belong to its channel type.
// The value is a pointer to the channel's struct; its yaml tags name the keys.
type ChannelSettings interface {
	// Check reports every problem of the settings, each naming its key
	// ("needs token_env or token_file"); in is the integration they belong to.
	Check(in *Integration) []string
}

// Optional interfaces of ChannelSettings.
type (
	// Defaulter fills defaults that depend on what else was written (a
	// token variable when neither token_env nor token_file is).
	Defaulter interface{ Defaults() }
	// EnvOverrider applies the channel's environment overrides
	// (TELEGRAM_API_URL, SMTP_URL).
	EnvOverrider interface{ ApplyEnv(getenv Getenv) }
	// Recipients is implemented by channels that send to addresses; a
	// channel without it has no recipients to restrict (log, web).
	Recipients interface {
		// DefaultRecipient is where a send naming none goes ("" for none).
		DefaultRecipient() string
		// NamedRecipients are recipients the operator named besides the
		// default (a webhook's recipients); with no allow_to, a butler may
		// send to these.
		NamedRecipients() []string
	}
	// RecipientMatcher decides whether an allow_to entry admits a recipient,
	// where that is more than equality (email: any case, @domain).
	RecipientMatcher interface {
		Admits(entry, recipient string) bool
	}
)

// builtin are the channel types built into Herald. The messenger
// registers a sender for each (deliver.Register); a test of
// services/messenger/channels holds the two together, and `make schemas`
// writes the schemas' lists from them. A type the schemas do not list yet
// is here all the same, so that `make schemas` can write it into them; an
// integration of that type is refused meanwhile, as notifies naming it are.
var builtin = map[string]Channel{
	"telegram": {Settings: func() ChannelSettings { return &TelegramSettings{} }, Buttons: true, Answers: true, Typing: true, Reactions: true, Edits: true, Limit: &markdown.TelegramLimit,
		MaxFile: 50 << 20}, // the Bot API's sendDocument
	"email": {Settings: func() ChannelSettings { return &EmailSettings{Inbound: EmailInbound{MaxBytes: DefaultEmailMaxBytes}} }, Answers: true,
		MaxFile: 18 << 20}, // base64 makes it 24 MB: within the 25 MB most mail servers take
	"slack": {Settings: func() ChannelSettings { return &SlackSettings{} }, Buttons: true, Answers: true, Reactions: true, Edits: true, Limit: &markdown.SlackLimit,
		MaxFile: 1 << 30}, // files.getUploadURLExternal's 1 GB
	"webhook": {Settings: func() ChannelSettings { return &WebhookSettings{} }, SignedSenders: true,
		MaxFile: 50 << 20},
	"web": {Settings: func() ChannelSettings { return &WebSettings{Listen: DefaultWebListen} }, AlwaysReceives: true, Answers: true, Typing: true, Reactions: true, Edits: true,
		MaxFile: 50 << 20},
	"log": {MaxFile: MaxFileBytes}, // a line per file: name, size, sha256
	"discord": {Settings: func() ChannelSettings { return &DiscordSettings{} }, Buttons: true, Answers: true, Typing: true, Reactions: true, Edits: true, Limit: &markdown.DiscordLimit,
		MaxFile: 25 << 20}, // a boosted server's; an unboosted one's 413 names its 10 MB
}

// ChannelOf returns what configuration knows of channel type typ.
func ChannelOf(typ string) (Channel, bool) {
	c, ok := builtin[typ]
	return c, ok
}

// BuiltChannels are the channel types built into Herald: in ChannelTypes'
// order, then any the schemas do not list yet, sorted.
func BuiltChannels() []string {
	var out []string
	for _, t := range ChannelTypes {
		if _, ok := builtin[t]; ok {
			out = append(out, t)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(builtin)) {
		if !slices.Contains(ChannelTypes, t) {
			out = append(out, t)
		}
	}
	return out
}

// MessageLimit is how much one message of channel type typ holds: its
// Limit, or markdown.WholeLimit. A writer that needs one message (a
// permission prompt and its buttons) fits its text to it.
func MessageLimit(typ string) markdown.Limit {
	if c, ok := ChannelOf(typ); ok && c.Limit != nil {
		return *c.Limit
	}
	return markdown.WholeLimit
}

// newSettings returns typ's default settings, or nil.
func newSettings(typ string) ChannelSettings {
	c, ok := ChannelOf(typ)
	if !ok || c.Settings == nil {
		return nil
	}
	return c.Settings()
}

// SettingsOf returns the integration's channel settings as T (the channel's
// own pointer type). An integration built in code without settings gets the
// channel's defaults, so only what differs need be written.
func SettingsOf[T ChannelSettings](in *Integration) (T, error) {
	s := in.Settings
	if s == nil {
		s = newSettings(in.Type)
		if d, ok := s.(Defaulter); ok {
			d.Defaults()
		}
	}
	t, ok := s.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%w: integration %q: its settings are %T, not the %s channel's %T", ErrInvalid, in.ID, in.Settings, in.Type, zero)
	}
	return t, nil
}

// CheckedSettings is SettingsOf with the settings' Check run: what a
// channel's sender or receiver takes at start, so an integration built in
// code gets the same checks as one loaded from a file.
func CheckedSettings[T ChannelSettings](in *Integration) (T, error) {
	t, err := SettingsOf[T](in)
	if err != nil {
		return t, err
	}
	if errs := t.Check(in); len(errs) > 0 {
		return t, fmt.Errorf("%w: %s integration %q: %s", ErrInvalid, in.Type, in.ID, strings.Join(errs, "; "))
	}
	return t, nil
}

// Unanswerable says why a question asked of recipient through in could
// never be answered ("" if it can be), and whether another channel is what
// it needs: a channel nobody answers on (log, webhook: Channel.Answers), an
// integration that takes no inbound; or else a recipient, where the
// integration has no default. The butler's ask tool refuses such a call
// with it, and the switchboard such a route.
func (in *Integration) Unanswerable(recipient string) (why string, otherChannel bool) {
	c, _ := ChannelOf(in.Type)
	switch {
	case !c.Answers:
		return in.Channel() + " cannot take an answer", true
	case !in.Inbound.Enabled:
		return in.Channel() + " takes no inbound messages, so no answer could reach Herald", true
	case strings.TrimSpace(recipient) == "" && in.DefaultRecipient() == "":
		return "on " + in.Channel() + " needs a recipient (a chat id, an address, a visitor id): the integration has no default one", false
	}
	return "", false
}

// DefaultRecipient is where a send through in naming no recipient goes ("" if
// the channel has none).
func (in *Integration) DefaultRecipient() string {
	if r, ok := in.Settings.(Recipients); ok {
		return strings.TrimSpace(r.DefaultRecipient())
	}
	return ""
}

// SecretSource names where a secret comes from for messages that must say
// so without the secret: "token_env NAME" or "token_file PATH", for the keys
// envKey and fileKey.
func SecretSource(envKey, env, fileKey, file string) string {
	if env != "" {
		return envKey + " " + env
	}
	return fileKey + " " + file
}
