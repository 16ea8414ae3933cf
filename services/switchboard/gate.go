package switchboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

// dm_policy values.
const (
	PolicyPairing   = "pairing"
	PolicyAllowlist = "allowlist"
	PolicyDisabled  = "disabled"
)

// pairingOrigin is the origin_butler of the messages Herald itself sends to
// people, such as pairing codes; no butler may have that name.
const pairingOrigin = config.HeraldOrigin

// admit decides whether the sender of in may reach a butler through it. It
// returns the reason of a refusal, or "" to let the message in. A sender is
// let in who is in allow_from ("*" lets anyone in), in approvers, or paired.
// Under dm_policy pairing a stranger's direct message is answered with a
// pairing code; a group message from a stranger gets nothing, so a bot added
// to a group cannot be made to spam it with codes.
func (g *inbound) admit(ctx context.Context, it *config.Integration, in *envelope.Ingress) (string, error) {
	direct := isDirect(in)
	if direct && it.Inbound.DMPolicy == PolicyDisabled {
		return ReasonDMDisabled, nil
	}
	if slices.Contains(it.Inbound.AllowFrom, config.AllowAnyone) || listed(it, it.Inbound.AllowFrom, in) || listed(it, it.Inbound.Approvers, in) {
		return "", nil
	}
	sender := in.RequestContext.SourceSenderIdentity
	paired, err := g.pairing.IsPaired(ctx, it.ID, sender)
	if err != nil {
		return "", fmt.Errorf("%w: checking pairing: %w", envelope.ErrTargetUnavailable, err)
	}
	switch {
	case paired:
		return "", nil
	case !direct:
		return ReasonGroupSenderNotAllowed, nil
	case it.Inbound.DMPolicy != PolicyPairing:
		return ReasonSenderNotAllowed, nil
	}
	code, err := g.pairing.Request(ctx, it.ID, sender, in.Meta["chat_id"], in.NativeID)
	switch {
	case errors.Is(err, ErrPairingPending):
		return ReasonPairingPending, nil
	case errors.Is(err, ErrPairingFull):
		return ReasonPairingLimit, nil
	case err != nil:
		return "", fmt.Errorf("%w: pairing: %w", envelope.ErrTargetUnavailable, err)
	}
	if err := g.sendCode(ctx, it, in, code); err != nil {
		return "", err
	}
	return ReasonPairingCodeSent, nil
}

// isDirect reports whether in came from a one-to-one chat. Channels without
// chat types (email, web) are direct.
func isDirect(in *envelope.Ingress) bool {
	t := in.Meta["chat_type"]
	return t == "" || t == "private"
}

// listed reports whether the sender of in is one of ids: its sender
// identity or its standard user_id meta, in any case (email addresses are
// case-insensitive; chat and user ids have no letters whose case matters).
// An identity a receiver marked unverified never equals an entry.
func listed(_ *config.Integration, ids []string, in *envelope.Ingress) bool {
	sender := in.RequestContext.SourceSenderIdentity
	userID := in.Meta["user_id"]
	for _, id := range ids {
		if id != "" && (strings.EqualFold(id, sender) || strings.EqualFold(id, userID)) {
			return true
		}
	}
	return false
}

// sendCode tells a stranger their pairing code, through the messenger like
// any notification.
func (g *inbound) sendCode(ctx context.Context, it *config.Integration, in *envelope.Ingress, code *PairingCode) error {
	return g.tell(ctx, it, in, "Pairing code",
		fmt.Sprintf("Herald: to talk to this assistant, ask its operator to run: herald pair approve %s\n(The code is valid for an hour.)", code.Code))
}

// tell answers the sender of in, in its chat, with Herald's own message.
// The key is derived from the message answered, so answering again after a
// crash is one message.
func (g *inbound) tell(ctx context.Context, it *config.Integration, in *envelope.Ingress, subject, text string) error {
	rc := in.RequestContext
	n := envelope.NewNotify(pairingOrigin, envelope.Delivery{
		Channel:   it.Channel(),
		Recipient: recipientOf(it, in),
		Subject:   subject,
		Message:   text,
	}, &rc)
	r := envelope.NewRoute(n)
	if err := envelope.Check(schemas.Route, r); err != nil {
		return fmt.Errorf("%w: a notice from Herald: %w", envelope.ErrInternal, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	key := r.IdempotencyKey()
	if _, err := bus.Publish(ctx, g.js, bus.DeliverSubject("messenger"), b, key, nil); err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)
	}
	return nil
}

// recipientOf is where an answer to in goes on its channel: its standard
// chat_id meta (a Telegram chat, a web visitor, an email correspondent), else
// its sender.
func recipientOf(_ *config.Integration, in *envelope.Ingress) string {
	if c := in.Meta["chat_id"]; c != "" {
		return c
	}
	return in.RequestContext.SourceSenderIdentity
}
