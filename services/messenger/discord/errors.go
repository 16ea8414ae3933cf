package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Discord's JSON error codes that Herald tells apart
// (https://discord.com/developers/docs/topics/opcodes-and-status-codes#json).
const (
	codeUnknownChannel          = 10003
	codeUnknownMessage          = 10008
	codeUnknownUser             = 10013
	codeUnknownEmoji            = 10014
	codeUnknownInteraction      = 10062
	codeMaxReactions            = 30010
	codeEntityTooLarge          = 40005
	codeAlreadyAcknowledged     = 40060
	codeMissingAccess           = 50001
	codeCannotEditOthers        = 50005
	codeCannotSendEmpty         = 50006
	codeCannotMessageUser       = 50007
	codeMissingPermissions      = 50013
	codeInvalidFormBody         = 50035
	codeThreadArchived          = 50083
	codeReactionBlocked         = 90001
	codeCannotReplyWithoutPerms = 160002
)

// classify turns a failed REST call into one of the envelope error
// classes, with a message saying what was wrong and what to do. Texts are
// Discord's messages and scrubbed transport errors: they never hold the
// token.
//
// A failure is looked at in steps, the first that names it winning: a call
// with no answer of Discord's own, a rejected token, one of the JSON codes
// Herald tells apart, then the HTTP status.
func (s *sender) classify(ctx context.Context, ae *apiError, what, channel string) error {
	where := ""
	if channel != "" {
		where = " in channel " + channel
	}
	if unanswered := s.unanswered(ctx, ae, what, where); unanswered != nil {
		return unanswered
	}
	if big := tooLarge(ae); big != nil {
		return big
	}
	if ae.status == http.StatusUnauthorized {
		return fmt.Errorf("%w: Discord rejected the bot token (401 Unauthorized); check that %s of integration %q holds the bot's current token (Developer Portal → your application → Bot → Reset Token)",
			envelope.ErrForbidden, s.tokenSource(), s.id)
	}
	if known := s.byCode(ae, what, channel, where); known != nil {
		return known
	}
	return s.byStatus(ctx, ae, what, where)
}

// unanswered is the error of a call that Discord itself did not answer:
// the REST API's address sent it elsewhere, or it went out and no answer
// came, so Discord may have taken it. Nil for any other failure.
func (s *sender) unanswered(ctx context.Context, ae *apiError, what, where string) error {
	var moved *deliver.RedirectError
	switch {
	case errors.As(ae, &moved):
		return fmt.Errorf("%w: the REST API at api_url %s %s: the message would go there; set api_url of integration %q to the address that answers itself, like %s",
			envelope.ErrNotFound, s.api.base, moved.Error(), s.id, DefaultAPIURL)

	case ae.unknown && ctx.Err() != nil:
		// Sent, and stopped waiting: Discord may have taken it.
		return fmt.Errorf("%w: discord %s%s did not finish, and Discord may have taken it: %w", envelope.ErrTimeout, what, where, ctx.Err())

	case ae.unknown:
		// Sent, and no answer: Discord may have taken it.
		return fmt.Errorf("%w: discord %s%s got no answer (%v), and Discord may have taken it", envelope.ErrTimeout, what, where, ae.cause)
	}
	return nil
}

// byCode is the error of a refusal whose JSON code Herald tells apart:
// what it means for the delivery, and what to change. Nil for any other
// code, or none.
func (s *sender) byCode(ae *apiError, what, channel, where string) error {
	switch ae.code {
	case codeUnknownChannel:
		return fmt.Errorf("%w: Discord channel %s not found (10003 Unknown Channel): use the channel's id (Developer Mode on, right-click the channel → Copy Channel ID) of a server the bot is in, or a user id for a direct message; check recipient or default_channel_id of integration %q",
			envelope.ErrNotFound, channel, s.id)

	case codeUnknownMessage:
		return fmt.Errorf("%w: Discord has no such message%s (10008 Unknown Message); check request_context.source_thread_identity", envelope.ErrNotFound, where)

	case codeUnknownUser:
		return fmt.Errorf("%w: Discord knows no such user (10013 Unknown User): %s; check recipient", envelope.ErrNotFound, what)

	case codeMissingAccess:
		return fmt.Errorf("%w: the bot cannot see channel %s (50001 Missing Access): invite it to the channel's server and give it View Channel there, or change recipient",
			envelope.ErrForbidden, channel)

	case codeMissingPermissions, codeCannotReplyWithoutPerms:
		return fmt.Errorf("%w: the bot lacks a permission to %s%s (%d %s): give its role Send Messages, Send Messages in Threads, Read Message History and Add Reactions there",
			envelope.ErrForbidden, what, where, ae.code, ae.message)

	case codeCannotMessageUser:
		return fmt.Errorf("%w: Discord does not let the bot write to this user directly (50007): they share no server with it, or do not accept direct messages from its server's members",
			envelope.ErrForbidden)

	case codeThreadArchived:
		return fmt.Errorf("%w: the thread%s is archived or locked (50083): unarchive it, or write elsewhere", envelope.ErrForbidden, where)

	case codeReactionBlocked:
		return fmt.Errorf("%w: Discord blocked the reaction%s (90001): the message's author has blocked the bot", envelope.ErrForbidden, where)

	case codeUnknownEmoji:
		return fmt.Errorf("%w: Discord knows no such emoji (10014 Unknown Emoji); react with a standard Unicode emoji like 👍, or a custom emoji of that server as name:id", envelope.ErrValidation)

	case codeMaxReactions:
		return fmt.Errorf("%w: the message%s has as many different reactions as Discord allows (30010)", envelope.ErrValidation, where)

	case codeInvalidFormBody, codeCannotSendEmpty:
		return fmt.Errorf("%w: Discord refused the request to %s%s (%d %s%s); simplify the message, and report this as a Herald bug if it persists",
			envelope.ErrValidation, what, where, ae.code, ae.message, detail(ae))
	}
	return nil
}

// byStatus is the error of a failure no JSON code of Herald's list names,
// by the HTTP status it got: a refusal, nothing found (a wrong api_url when
// Discord gave no code), a request stopped before it went out, or Discord
// or the network unavailable.
func (s *sender) byStatus(ctx context.Context, ae *apiError, what, where string) error {
	switch {
	case ae.status == http.StatusForbidden:
		return fmt.Errorf("%w: Discord refused to %s%s (%d %s): the bot may not do this there; check its role's permissions, or change recipient",
			envelope.ErrForbidden, what, where, ae.code, ae.message)

	case ae.status == http.StatusNotFound && ae.code != 0:
		return fmt.Errorf("%w: Discord found nothing to %s%s (%d %s); check recipient and request_context.source_thread_identity", envelope.ErrNotFound, what, where, ae.code, ae.message)

	case ae.status == http.StatusNotFound:
		return fmt.Errorf("%w: %s answered 404 Not Found: check that api_url of integration %q is Discord's REST API with its version, like %s",
			envelope.ErrNotFound, s.api.base, s.id, DefaultAPIURL)

	case ae.status >= 400 && ae.status < 500 && ae.code != 0:
		return fmt.Errorf("%w: Discord refused to %s%s (%d %s%s); check the notify's fields", envelope.ErrValidation, what, where, ae.code, ae.message, detail(ae))

	case ae.status == 0 && ctx.Err() != nil:
		// Stopped before the request went out: Discord has nothing.
		return fmt.Errorf("%w: discord %s%s was not sent: %w", envelope.ErrTargetUnavailable, what, where, ctx.Err())
	}
	// No connection (refused, DNS, TLS), a 5xx, or an answer that is not
	// Discord's JSON (Cloudflare's page): Discord is not available now, and
	// has nothing.
	return fmt.Errorf("%w: discord %s%s at %s failed (%s): Discord or the network is unavailable; try again later, and check api_url if it persists",
		envelope.ErrTargetUnavailable, what, where, s.api.base, ae.Error())
}

// tooLarge is the error of files Discord refused as too big: a 413 (its
// JSON 40005 "Request entity too large", or Cloudflare's page), naming the
// limit of a server without boosts, the likeliest one hit. Nil for any
// other failure.
func tooLarge(ae *apiError) error {
	if ae.status != http.StatusRequestEntityTooLarge && ae.code != codeEntityTooLarge {
		return nil
	}
	return fmt.Errorf("%w: Discord refused the files as too large (413 Request entity too large): a server without boosts, and a direct message, takes files of up to %s each (50 MB with level 2 boosts, 100 MB with level 3); send smaller files, or a link to them",
		envelope.ErrValidation, bus.Bytes(MaxFileUnboosted))
}

func detail(ae *apiError) string {
	if ae.detail == "" {
		return ""
	}
	return ": " + ae.detail
}

// tokenSource names the key the token comes from, for errors.
func (s *sender) tokenSource() string {
	if s.source != "" {
		return s.source
	}
	return "token_env or token_file"
}
