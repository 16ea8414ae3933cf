package telegram

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-telegram/bot"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// reactionList is Telegram's fixed set of reaction emoji (Bot API,
// ReactionTypeEmoji), for error messages; Telegram decides what it accepts.
const reactionList = "👍 👎 ❤ 🔥 🥰 👏 😁 🤔 🤯 😱 🤬 😢 🎉 🤩 🤮 💩 🙏 👌 🕊 🤡 🥱 🥴 😍 🐳 ❤\u200d🔥 🌚 🌭 💯 🤣 ⚡ 🍌 🏆 💔 🤨 😐 🍓 🍾 💋 🖕 😈 😴 😭 🤓 👻 👨\u200d💻 👀 🎃 🙈 😇 😨 🤝 ✍ 🤗 🫡 🎅 🎄 ☃ 💅 🤪 🗿 🆒 💘 🙉 🦄 😘 💊 🙊 😎 👾 🤷\u200d♂ 🤷 🤷\u200d♀ 😡"

// classify turns an error of go-telegram/bot into one of the envelope error
// classes, with a message saying what was wrong and what to do. The
// library's error is not wrapped, only its scrubbed text kept: its strings
// can hold the request URL, and with it the token.
func (s *sender) classify(ctx context.Context, method, chat string, err error) error {
	desc := s.secrets.Scrub(err.Error())
	lower := strings.ToLower(desc)
	var migrate *bot.MigrateError
	var moved *deliver.RedirectError
	failed, _ := errors.AsType[*deliver.CallError](err) // nil: the Bot API answered
	unknown := failed != nil && failed.Unknown
	switch {
	case errors.As(err, &moved):
		return fmt.Errorf("%w: the Bot API at api_url %s %s: the chat id and text would go there; set api_url of integration %q to the address that answers itself",
			envelope.ErrNotFound, s.apiURL, moved.Error(), s.id)

	case unknown && ctx.Err() != nil:
		// Sent, and stopped waiting: Telegram may have taken the message.
		return fmt.Errorf("%w: telegram %s to chat %s did not finish, and Telegram may have taken it: %w", envelope.ErrTimeout, method, chat, ctx.Err())

	case unknown:
		// Sent, and no answer: Telegram may have taken the message.
		return fmt.Errorf("%w: telegram %s to chat %s got no answer (%s), and Telegram may have taken it",
			envelope.ErrTimeout, method, chat, desc)

	case errors.As(err, &migrate):
		return fmt.Errorf("%w: Telegram group %s was upgraded to a supergroup with chat id %d; set recipient or default_chat to %d",
			envelope.ErrNotFound, chat, migrate.MigrateToChatID, migrate.MigrateToChatID)

	case errors.Is(err, bot.ErrorUnauthorized):
		return fmt.Errorf("%w: the bot token was rejected by Telegram (401 Unauthorized); check that token_env or token_file of integration %q holds the current token from @BotFather",
			envelope.ErrForbidden, s.id)

	case errors.Is(err, bot.ErrorForbidden):
		return fmt.Errorf("%w: Telegram refused %s to chat %s (%s): the bot was blocked, removed from the chat, or may not write there; unblock it or add it back, or change recipient",
			envelope.ErrForbidden, method, chat, telegramSays(desc))

	case errors.Is(err, bot.ErrorBadRequest):
		switch {
		case strings.Contains(lower, "chat is not a forum"):
			// topics: per_butler, to a group without topics.
			return fmt.Errorf("%w: Telegram chat %s is not a forum (%s), and integration %q has topics: per_butler, which puts each butler's messages in a forum topic of its own: turn Topics on in the group's settings and make the bot an admin that may manage topics, or send to another chat, or set topics: off",
				envelope.ErrValidation, chat, telegramSays(desc), s.id)
		case strings.Contains(lower, "not enough rights") && strings.Contains(lower, "topic"):
			return fmt.Errorf("%w: Telegram refused %s in chat %s (%s): integration %q has topics: per_butler; make the bot an admin of the group that may manage topics, or set topics: off",
				envelope.ErrForbidden, method, chat, telegramSays(desc), s.id)
		case strings.Contains(lower, "message thread not found"):
			return fmt.Errorf("%w: %w: Telegram has no such topic in chat %s (%s)", envelope.ErrNotFound, errThreadGone, chat, telegramSays(desc))
		case strings.Contains(lower, "chat not found"):
			return fmt.Errorf("%w: Telegram chat %s not found: the bot can write only to chats where someone has started it or that it is a member of; check recipient or default_chat of integration %q",
				envelope.ErrNotFound, chat, s.id)
		case strings.Contains(lower, "reaction_invalid"):
			return fmt.Errorf("%w: Telegram refused the reaction emoji: only Telegram's fixed reaction set is accepted: %s", envelope.ErrValidation, reactionList)
		case strings.Contains(lower, "message to react not found"), strings.Contains(lower, "message_id_invalid"),
			strings.Contains(lower, "message to be replied not found"):
			return fmt.Errorf("%w: Telegram has no such message in chat %s (%s); check request_context.source_thread_identity",
				envelope.ErrNotFound, chat, telegramSays(desc))
		case strings.Contains(lower, "message to edit not found"), strings.Contains(lower, "message can't be edited"):
			return fmt.Errorf("%w: Telegram cannot edit that message in chat %s (%s): it was deleted, or is not the bot's",
				envelope.ErrNotFound, chat, telegramSays(desc))
		case strings.Contains(lower, "message is not modified"):
			// Already says what the edit would: done, as far as the reader sees.
			return nil
		case strings.Contains(lower, "can't parse entities"), strings.Contains(lower, "message is too long"):
			return fmt.Errorf("%w: Telegram refused the formatted message (%s); simplify its markdown and report this as a Herald bug",
				envelope.ErrValidation, telegramSays(desc))
		}
		return fmt.Errorf("%w: Telegram refused %s to chat %s (%s); check the notify's fields", envelope.ErrValidation, method, chat, telegramSays(desc))

	case errors.Is(err, bot.ErrorNotFound):
		return fmt.Errorf("%w: Telegram answered 404 Not Found to %s: check that api_url %s is a Bot API server and that the token of integration %q is complete",
			envelope.ErrNotFound, method, s.apiURL, s.id)

	case ctx.Err() != nil:
		// Stopped before the request went out: Telegram has nothing.
		return fmt.Errorf("%w: telegram %s to chat %s was not sent: %w", envelope.ErrTargetUnavailable, method, chat, ctx.Err())
	}
	// Network errors before the request went out (refused, DNS, TLS), 5xx,
	// 409 and answers that are not Bot API JSON (a proxy's error page):
	// Telegram is not available now, and has nothing.
	return fmt.Errorf("%w: Telegram %s at %s failed (%s): Telegram or the network is unavailable; try again later, and check api_url if it persists",
		envelope.ErrTargetUnavailable, method, s.apiURL, desc)
}

// telegramSays is the description Telegram gave, without the prefix the
// library adds ("bad request, Bad Request: chat not found" -> "Bad Request:
// chat not found").
func telegramSays(desc string) string {
	for _, p := range []string{"bad request, ", "forbidden, ", "unauthorized, ", "not found, "} {
		if rest, ok := strings.CutPrefix(desc, p); ok {
			return rest
		}
	}
	return desc
}
