// Package discord is Herald's Discord channel, both ways: it delivers
// notify.v1 sends, replies and reactions through Discord's REST API (v10)
// as a bot, edits the messages it sent, and receives what people write to
// the bot, and the buttons they press, through the gateway (NewReceiver).
//
// # Configuration
//
//	integrations:
//	  - id: dc_main
//	    type: discord
//	    token_env: DISCORD_BOT_TOKEN           # or token_file; the default
//	    api_url: https://discord.com/api/v10   # the default
//	    gateway_url: wss://gateway.discord.gg  # default: what GET /gateway/bot names
//	    default_channel_id: "1234567890123456789"
//	    grants: all
//	    inbound: { allow_from: ["<user id>"], approvers: ["<user id>"] }
//
// The bot needs, in the Developer Portal, the Message Content Intent
// (Bot → Privileged Gateway Intents) to read what people write in servers,
// and in each channel View Channel, Send Messages, Send Messages in Threads,
// Read Message History and Add Reactions.
//
// # Sending
//
// A recipient is a channel id (a server's channel, a thread, a direct
// message) or a user id, whose direct message with the bot is opened first
// (POST /users/@me/channels, remembered); a bare id Discord knows as no
// channel is tried as a user, so an approver's user id works as the
// recipient of a permission prompt. "<@id>" names a user outright.
//
// Markdown is rendered as Discord's own (markdown.Discord): bold, italic,
// strike, code, fenced blocks, links, quotes; every other character Discord
// reads as markup is escaped, so no text mentions anyone or masks a link,
// and allowed_mentions lets no message notify anyone by its text (a reply
// notifies the person answered). Messages over 2000 characters are split,
// each chunk well formed. The subject is the first chunk's bold first line,
// high urgency starts it with ‼️, low urgency arrives silently
// (SUPPRESS_NOTIFICATIONS), link previews are off (SUPPRESS_EMBEDS), and
// the last chunk ends with the butler (and topic) in Discord's small
// subtext, so people in a channel several butlers share can tell who wrote.
// A delivery's actions become buttons under its last chunk (an approval's
// Allow green, Deny red), whose custom_id is the action's data.
//
// A message's identity, in source_thread_identity, is "<channel id>:<message
// id>", a thread being a channel of its own in Discord; receipts hold the
// bare message ids. A reply goes to the channel (or thread) of the message
// it answers, as a Discord reply (message_reference); reactions use PUT
// …/reactions/{emoji}/@me, which does nothing the second time.
//
// Edit replaces a message the bot sent (a closed permission prompt): PATCH
// /channels/{channel}/messages/{message}, the message named by the bare id
// its receipt held and found in the channel of the same recipient, with the
// new content (decorated as a message of one chunk, cut to it) and an
// empty components array, which removes the buttons.
//
// # Files
//
// A delivery's files (at most MaxFiles) go with its last chunk, in one
// POST /channels/{channel}/messages as multipart/form-data: payload_json,
// naming each file in attachments, and a part files[n] per file, streamed
// from its spooled copy; a message of one chunk is one post, its reply
// reference, buttons and files together. A server without boosts (and a
// direct message) takes files of up to 10 MB each, and Discord's 413
// (40005 Request entity too large) is a validation error saying so;
// Herald sends none over 25 MB (pkg/config).
//
// Fetch (deliver.Fetcher) downloads what a person attached, from the
// signed CDN link the ingress's attachment ref holds: only from Discord's
// CDN (cdn.discordapp.com, media.discordapp.net) or api_url's host, and
// without the token, which the CDN does not need. The link's fragment
// names the message the file came with, so an expired link (they last
// about a day) is renewed by fetching the message (GET
// /channels/{channel}/messages/{message}, needing Read Message History).
//
// Progress is reported chunk by chunk through deliver.Delivery.Sent, and a
// retry skips the chunks in Delivery.Done. A 429 is waited out (its
// retry_after, to the millisecond, up to MaxRateLimitWait in all; a global
// one pauses every call of the bot) before the delivery is handed back as
// an *envelope.RetryAfterError, and a bucket Discord's X-RateLimit headers
// announce as spent is waited for before its next call. A call that went
// out and got no whole answer may have been taken: envelope.ErrTimeout,
// which the messenger treats as uncertain (deliver.OutcomeUnknown). Every
// error names what to fix; the token is sent only in the Authorization
// header and never appears in an error or a log line.
//
// # Receiving
//
// See NewReceiver: one gateway session per bot across messenger replicas,
// resumed across reconnects and restarts, a message confirmed (its sequence
// number counted as handled) only once the bus stored it, and Discord's
// fatal close codes (4004 a rejected token, 4014 a refused intent) an
// error status naming the integration rather than a reconnect loop.
// Meta: chat_id and channel_id (the channel, or the thread), chat_type
// (private for a direct message, else group), guild_id, thread_id and
// parent_id (in a thread), message_id, user_id, user, ts,
// reply_to_message_id; a button press adds callback_data (the button's
// custom_id) and callback_query_id (the interaction), and is acknowledged
// (a deferred update) once stored.
//
// # Why no Discord library
//
// github.com/bwmarrin/discordgo is the most used Go library (v0.29.0, May
// 2025) and the one the Go module proxy here serves, but it does not fit a
// messenger that must name every outcome:
//
//   - Its endpoints are package variables computed at init
//     (discordgo.EndpointAPI, EndpointChannels, ...; API v9), so api_url and
//     gateway_url cannot differ per integration or point one integration at
//     a fake without changing every session of the process (its issue #1698,
//     "Support custom API endpoints?", is open).
//   - Its gateway reconnects after any read error, the 4004 of a revoked
//     token included, forever with a backoff capped at ten minutes (issues
//     #1544; mautrix/discord #240 saw a token reset after 1000 identifies):
//     the opposite of "an invalid token is an error at start, never a
//     reconnect loop".
//   - Its REST layer sleeps through 429s by itself, ignoring the caller's
//     context, and sends a request again after a 502 (up to three times by
//     default): a message Discord took before the gateway in front of it
//     failed would be posted again, where Herald must report such a call as
//     uncertain.
//   - Its handlers run in goroutines and the sequence number advances as
//     events arrive, so an event the bus refused could not be held, and a
//     resume would not bring it back.
//
// github.com/disgoorg/disgo is better kept (per-client URLs, close codes
// that say whether to reconnect, slog; its REST client honours the context
// and does not retry a 5xx), but it is pre-1.0 (v0.18.15, the newest the
// module proxy here serves, is of January 2025), requires ten modules for
// the seven REST routes and eight gateway opcodes Herald uses, and shares
// discordgo's last point: the sequence number advances before a handler
// has run.
//
// So REST goes through the messenger's one HTTP helper (deliver.Caller,
// deliver.RateLimits, deliver.Scrubber), as every channel's does, with
// Discord's JSON error codes and rate limit headers read here; and the
// gateway is a small client of its own (gateway.go, about 300 lines) on
// github.com/coder/websocket, a maintained websocket library with
// context-aware, concurrency-safe writes and close codes as errors.
// discordtest fakes both at the wire.
package discord
