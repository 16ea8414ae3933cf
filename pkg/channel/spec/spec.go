// Package spec is the vocabulary of pkg/channel: the shape of what every
// binary must know of a channel type, which each channel's leaf package
// (pkg/channel/<type>) fills in and pkg/config reads through the table in
// pkg/channel.
//
//   - Channel: a type's name, its keys (Settings) and what it can do
//     (Buttons, Answers, Typing, ..., MaxFile, Limit).
//   - Settings: the struct of a type's keys and its Check, with the
//     optional Defaulter, EnvOverrider, Recipients and RecipientMatcher.
//   - Integration: what a Check may know of the integration the keys
//     belong to.
//   - Limit and WholeLimit: how much one message holds, which a writer
//     that needs one message (a permission prompt) fits to.
//   - CheckAddress, SecretSource, AllowAnyRecipient, MaxFileBytes: what
//     the channels' checks share with configuration.
//
// It imports nothing of Herald's.
package spec

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Channel is what every binary knows of a channel type: the keys it adds to
// its integrations and what it can do. Each leaf package under pkg/channel
// holds its type's as Spec; pkg/channel lists them.
type Channel struct {
	// Type is the channel type, the integrations' type key ("discord").
	Type string
	// Settings returns a new value of the channel's own keys, holding the
	// defaults that do not depend on other keys; an integration's block is
	// decoded into it. Nil: the channel has no keys of its own.
	Settings func() Settings
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
	// Topics: the channel has forum topics (topics: per_butler).
	Topics bool
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
	// it; nil: a message is shown whole (WholeLimit).
	Limit *Limit
}

// Limit is how much one message of a channel type holds, counted the way
// that channel counts it. It is the contract between whoever writes a
// message and the messenger that delivers it: a message that does not fit
// is split into several (Telegram, Slack, Discord) or refused, so a writer
// that needs one message (a permission prompt and its buttons) shortens it
// to fit.
type Limit struct {
	// Max is the most one message holds, in the units Measure counts.
	Max int
	// Mark is room the channel's sender takes for a mark of its own in
	// front of the text (Telegram's "‼️ " on an urgent message).
	Mark int
	// Measure is how long markdown md is on the channel, as its sender
	// counts it; nil counts its bytes.
	Measure func(md string) int
}

// WholeLimit is that of a channel that shows a message whole (email, web
// chat, webhook, log): the notify's own bound on delivery.message, 64 KiB
// (envelope.MaxMessageBytes).
var WholeLimit = Limit{Max: 64 << 10}

// Size is how long md is on the channel, in the units of Max.
func (l Limit) Size(md string) int {
	if l.Measure == nil {
		return len(md)
	}
	return l.Measure(md)
}

// Fits reports whether md goes as one message, mark included.
func (l Limit) Fits(md string) bool { return l.Size(md)+l.Mark <= l.Max }

// Settings are an integration's keys that belong to its channel type. The
// value is a pointer to the channel's struct; its yaml tags name the keys.
type Settings interface {
	// Check reports every problem of the settings, each naming its key
	// ("needs token_env or token_file"); in is what it may know of the
	// integration they belong to.
	Check(in Integration) []string
}

// Integration is what a Settings' Check may know of the integration its
// keys belong to, besides the keys themselves.
type Integration struct {
	// ID is the integration's id (a web integration's becomes part of its
	// page's paths).
	ID string
	// Receives: the integration takes inbound messages (its inbound block
	// is there and not enabled: false, or its channel always receives).
	Receives bool
}

// Optional interfaces of Settings.
type (
	// Defaulter fills defaults that depend on what else was written (a
	// token variable when neither token_env nor token_file is).
	Defaulter interface{ Defaults() }
	// EnvOverrider applies the channel's environment overrides
	// (TELEGRAM_API_URL, SMTP_URL); getenv looks a variable up.
	EnvOverrider interface {
		ApplyEnv(getenv func(string) string)
	}
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

// AllowAnyRecipient in allow_to lets a butler send anywhere the
// integration reaches; no channel may name a recipient so.
const AllowAnyRecipient = "any"

// MaxFileBytes is the largest file Herald carries on any channel (1 GiB;
// a file is kept whole in herald_files, which holds 2 GiB): the bound of a
// butler's files.max_bytes, and the log channel's MaxFile.
const MaxFileBytes = 1 << 30

// CheckAddress reports what is wrong with a listen address (mcp_http,
// http_listen, an inbound listen): it must be host:port, the host may be
// empty (every interface), the port a number up to 65535 (0: any free
// port); "" if nothing is.
func CheckAddress(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q is not host:port, like 127.0.0.1:8790 or :8790", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q has no port number (0 to 65535)", addr)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Sprintf("%q has no valid host", addr)
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
