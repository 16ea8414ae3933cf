package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Slack's error codes by what they mean for a delivery. Codes not listed
// are refusals of the request as sent (validation).
var (
	authErrors = codes("not_authed", "invalid_auth", "account_inactive", "token_revoked", "token_expired",
		"no_permission", "org_login_required", "ekm_access_denied", "team_access_not_granted",
		"not_allowed_token_type", "invalid_token")
	refusedErrors = codes("restricted_action",
		"restricted_action_read_only_channel", "restricted_action_thread_only_channel",
		"restricted_action_non_threadable_channel", "cannot_reply_to_message", "thread_locked",
		"posting_to_general_channel_denied", "access_denied", "messages_tab_disabled", "cannot_dm_bot",
		"user_disabled", "not_reactable")
	unavailableErrors = codes("fatal_error", "internal_error", "service_unavailable", "request_timeout",
		"team_added_to_org")
	// tooBigErrors refuse a file for its size; uploadErrors refuse the
	// app's uploads in the workspace.
	tooBigErrors = codes("file_too_large", "file_upload_size_restricted", "snippet_too_large", "request_too_large")
	uploadErrors = codes("file_uploads_disabled", "file_uploads_except_images_disabled", "file_type_not_allowed")
)

func codes(c ...string) map[string]bool {
	m := make(map[string]bool, len(c))
	for _, s := range c {
		m[s] = true
	}
	return m
}

// classify turns a failed Web API call into one of the envelope error
// classes, with a message saying what was wrong and what to do. Texts are
// Slack's codes and scrubbed transport errors: they never hold the token.
//
// A failure is looked at in three steps, the first that names it winning:
// a call with no answer of Slack's own, then Slack's error code, then how
// the request failed to reach Slack.
func (s *sender) classify(ctx context.Context, method, chat string, params any, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return fmt.Errorf("%w: slack %s: %s", envelope.ErrInternal, method, s.secrets.Scrub(err.Error()))
	}
	c := describe(method, chat, params)
	if unanswered := s.unanswered(ctx, c, ae, err); unanswered != nil {
		return unanswered
	}
	if ae.code != "" {
		return s.refusal(c, ae)
	}
	return s.unreached(ctx, c, ae)
}

// failedCall is what a failed Web API call was doing, for its error's text.
type failedCall struct {
	method string
	// where says what the call acted on (" to channel C…"), "" when its
	// parameters do not say.
	where string
	// chat is the channel the call acted in.
	chat string
	// edited is the message chat.update was to change ("<ts> in channel
	// C…"), "" for any other call.
	edited string
	// file is the file a files method acted on (a name, or an id); "the
	// files" for the share of a delivery's files.
	file string
}

// describe reads from a call's parameters what it acted on; chat is the
// caller's word for the channel, which a reaction's or an edit's own
// channel replaces.
func describe(method, chat string, params any) failedCall {
	c := failedCall{method: method, chat: chat}
	switch p := params.(type) {
	case postMessage:
		c.where = " to channel " + p.Channel
	case reactionsAdd:
		c.where = " on message " + p.Timestamp + " of channel " + p.Channel
		c.chat = p.Channel
	case chatUpdate:
		c.edited = p.TS + " in channel " + p.Channel
		c.where = " of message " + c.edited
		c.chat = p.Channel
	case completeUpload:
		c.where = " to channel " + p.ChannelID
		c.chat, c.file = p.ChannelID, "the files"
	case url.Values:
		if c.file = p.Get("filename") + p.Get("file"); c.file != "" {
			c.where = " of " + c.file
		}
	}
	return c
}

// unanswered is the error of a call that Slack itself did not answer: the
// Web API's address sent it elsewhere, or it went out and no answer came,
// so Slack may have taken the message. Nil for any other failure.
func (s *sender) unanswered(ctx context.Context, c failedCall, ae *apiError, err error) error {
	var moved *deliver.RedirectError
	switch {
	case errors.As(err, &moved):
		return fmt.Errorf("%w: the Web API at api_url %s %s: the message would go there; set api_url of integration %q to the address that answers itself, like %s",
			envelope.ErrNotFound, s.apiURL, moved.Error(), s.id, DefaultAPIURL)

	case ae.unknown && ctx.Err() != nil:
		// Sent, and stopped waiting: Slack may have taken the message.
		return fmt.Errorf("%w: slack %s%s did not finish, and Slack may have taken it: %w", envelope.ErrTimeout, c.method, c.where, ctx.Err())

	case ae.unknown:
		// Sent, and no answer: Slack may have taken the message.
		return fmt.Errorf("%w: slack %s%s got no answer (%v), and Slack may have taken it", envelope.ErrTimeout, c.method, c.where, ae.cause)
	}
	return nil
}

// refusal is the error of a call Slack answered with an error code (never
// ""): what the code means for the delivery, and what to change.
func (s *sender) refusal(c failedCall, ae *apiError) error {
	code, chat, edited := ae.code, c.chat, c.edited
	switch {
	case code == "missing_scope":
		needed, provided := "", ""
		if ae.answer != nil {
			needed, provided = ae.answer.Needed, ae.answer.Provided
		}
		return fmt.Errorf("%w: the bot token of integration %q lacks a scope for %s (needed: %s; it has: %s); add it under OAuth & Permissions, reinstall the app, and put the new token in token_env or token_file",
			envelope.ErrForbidden, s.id, c.method, orUnknown(needed), orUnknown(provided))

	case authErrors[code]:
		return fmt.Errorf("%w: Slack rejected the bot token (%s); check that token_env or token_file of integration %q holds the app's current Bot User OAuth Token (xoxb-…) and that the app is still installed",
			envelope.ErrForbidden, code, s.id)

	case code == "channel_not_found":
		return fmt.Errorf("%w: Slack channel %s not found (channel_not_found): use the channel's id like C0123456789 (the channel's details, at the bottom), and invite the app to a private channel; check recipient or default_channel_id of integration %q",
			envelope.ErrNotFound, chat, s.id)

	case code == "not_in_channel":
		return fmt.Errorf("%w: the app is not a member of Slack channel %s (not_in_channel): invite it there (/invite @your-app), or give it the chat:write.public scope for public channels",
			envelope.ErrForbidden, chat)

	case edited != "" && code == "message_not_found":
		return fmt.Errorf("%w: Slack has no message %s to edit (message_not_found): it was deleted, or the id is not the one the send's receipt named, \"<channel id>:<ts>\"",
			envelope.ErrNotFound, edited)

	case code == "cant_update_message":
		return fmt.Errorf("%w: message %s is not the app's, and Slack lets an app edit only its own (cant_update_message): edit a message integration %q sent, by the id its receipt named",
			envelope.ErrNotFound, edited, s.id)

	case code == "edit_window_closed":
		return fmt.Errorf("%w: the workspace no longer allows editing message %s (edit_window_closed): a workspace owner can allow editing at any time (workspace settings, Message Editing & Deletion)",
			envelope.ErrForbidden, edited)

	case code == "is_archived", code == "channel_is_archived", code == "is_inactive":
		return fmt.Errorf("%w: Slack channel %s is archived (%s): unarchive it or change recipient or default_channel_id", envelope.ErrForbidden, chat, code)

	case refusedErrors[code]:
		return fmt.Errorf("%w: Slack refused %s%s (%s): the app may not do this there; check the channel's settings and the app's permissions, or change recipient",
			envelope.ErrForbidden, c.method, c.where, code)

	case code == "message_not_found", code == "thread_not_found":
		return fmt.Errorf("%w: Slack has no such message in channel %s (%s); check request_context.source_thread_identity", envelope.ErrNotFound, chat, code)

	case code == "invalid_name":
		return fmt.Errorf("%w: Slack has no emoji by that name in this workspace (invalid_name); react with a standard name like thumbsup or white_check_mark, or the exact name of a custom emoji", envelope.ErrValidation)

	case code == "too_many_reactions", code == "too_many_emoji":
		return fmt.Errorf("%w: Slack allows no more reactions on that message (%s)", envelope.ErrValidation, code)

	case code == "msg_too_long", code == "invalid_attachments", code == "invalid_blocks", code == "no_text", code == "too_many_attachments":
		return fmt.Errorf("%w: Slack refused the formatted message (%s); simplify its markdown and report this as a Herald bug", envelope.ErrValidation, code)

	case tooBigErrors[code]:
		return fmt.Errorf("%w: Slack refused %s as too big (%s): Slack takes files of up to %s, and a workspace may restrict large uploads; send a smaller file, or a link to it",
			envelope.ErrValidation, c.file, code, bus.Bytes(MaxFileSize))

	case uploadErrors[code]:
		return fmt.Errorf("%w: the workspace does not let the app upload %s (%s): a workspace admin can allow file uploads; else send a link to it",
			envelope.ErrValidation, c.file, code)

	case code == "file_not_found", code == "file_deleted":
		return fmt.Errorf("%w: Slack no longer has %s (%s): it was deleted, or the app cannot see it; ask for it again", envelope.ErrNotFound, c.file, code)

	case unavailableErrors[code]:
		return fmt.Errorf("%w: Slack failed %s%s (%s): Slack is having trouble; try again later", envelope.ErrTargetUnavailable, c.method, c.where, code)
	}
	detail := code
	if ae.answer != nil && len(ae.answer.ResponseMetadata.Messages) > 0 {
		detail += ": " + strings.Join(ae.answer.ResponseMetadata.Messages, "; ")
	}
	return fmt.Errorf("%w: Slack refused %s%s (%s); check the notify's fields", envelope.ErrValidation, c.method, c.where, s.secrets.Scrub(detail))
}

// unreached is the error of a call that got no Web API answer at all: a
// wrong api_url, a request stopped before it went out, or Slack or the
// network unavailable. Slack has nothing of it.
func (s *sender) unreached(ctx context.Context, c failedCall, ae *apiError) error {
	switch {
	case ae.status == http.StatusNotFound:
		return fmt.Errorf("%w: %s answered 404 Not Found to %s: check that api_url of integration %q is the Web API's base URL, like %s",
			envelope.ErrNotFound, s.apiURL, c.method, s.id, DefaultAPIURL)

	case ae.status == http.StatusRequestEntityTooLarge:
		return fmt.Errorf("%w: Slack answered 413 Request Entity Too Large to %s%s: Slack takes files of up to %s, and a workspace may restrict large uploads; send a smaller file, or a link to it",
			envelope.ErrValidation, c.method, c.where, bus.Bytes(MaxFileSize))

	case ae.status == 0 && ctx.Err() != nil:
		// Stopped before the request went out: Slack has nothing.
		return fmt.Errorf("%w: slack %s%s was not sent: %w", envelope.ErrTargetUnavailable, c.method, c.where, ctx.Err())
	}
	// No connection (refused, DNS, TLS), a 5xx, or an answer that is not Web
	// API JSON (a proxy's error page): Slack is not available now, and has
	// nothing.
	return fmt.Errorf("%w: slack %s at %s failed (%s): Slack or the network is unavailable; try again later, and check api_url if it persists",
		envelope.ErrTargetUnavailable, c.method, s.apiURL, s.secrets.Scrub(ae.Error()))
}

func orUnknown(s string) string {
	if s == "" {
		return "not said"
	}
	return s
}
