package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/switchboard/pairing"
)

// dm_policy values.
const (
	PolicyPairing   = "pairing"
	PolicyAllowlist = "allowlist"
	PolicyDisabled  = "disabled"
)

// admit decides whether the sender of in may reach a butler through it. It
// returns the reason of a refusal, or "" to let the message in. A sender is
// let in who is in allow_from ("*" lets anyone in), in approvers, or paired.
// Under dm_policy pairing a stranger's direct message is answered with a
// pairing code; a group message from a stranger gets nothing, so a bot added
// to a group cannot be made to spam it with codes.
func (g *intake) admit(ctx context.Context, it *config.Integration, in *envelope.Ingress) (string, error) {
	direct := IsDirect(in)
	if direct && it.Inbound.DMPolicy == PolicyDisabled {
		return ReasonDMDisabled, nil
	}
	if slices.Contains(it.Inbound.AllowFrom, config.AllowAnyone) || Listed(it.Inbound.AllowFrom, in) || Listed(it.Inbound.Approvers, in) {
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
	code, err := g.pairing.Request(ctx, it.ID, sender, in.Meta["user"], in.Meta["chat_id"], in.NativeID)
	switch {
	case errors.Is(err, pairing.ErrPending):
		return ReasonPairingPending, nil
	case errors.Is(err, pairing.ErrFull):
		return ReasonPairingLimit, nil
	case err != nil:
		return "", fmt.Errorf("%w: pairing: %w", envelope.ErrTargetUnavailable, err)
	}
	if err := g.sendCode(ctx, it, in, code); err != nil {
		return "", err
	}
	return ReasonPairingCodeSent, nil
}

// IsDirect reports whether in came from a one-to-one chat. Channels without
// chat types (email, web) are direct.
func IsDirect(in *envelope.Ingress) bool {
	t := in.Meta["chat_type"]
	return t == "" || t == "private"
}

// Listed reports whether the sender of in is one of ids: its sender
// identity or its standard user_id meta, in any case (email addresses are
// case-insensitive; chat and user ids have no letters whose case matters).
// An identity a receiver marked unverified never equals an entry.
func Listed(ids []string, in *envelope.Ingress) bool {
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
func (g *intake) sendCode(ctx context.Context, it *config.Integration, in *envelope.Ingress, code *pairing.Code) error {
	return g.Tell(ctx, it, in, "Pairing code",
		fmt.Sprintf("Herald: to talk to this assistant, ask its operator to run: herald pair approve %s\n(The code is valid for an hour.)", code.Code))
}

// RecipientOf is where an answer to in goes on its channel: its standard
// chat_id meta (a Telegram chat, a web visitor, an email correspondent), else
// its sender.
func RecipientOf(in *envelope.Ingress) string {
	if c := in.Meta["chat_id"]; c != "" {
		return c
	}
	return in.RequestContext.SourceSenderIdentity
}
