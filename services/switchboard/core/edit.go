package core

import (
	"context"
	"fmt"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
)

// editTarget checks butler's edit n, going out through it, and returns
// the provider id of the message it replaces: the first message of the
// butler's own delivery n.Delivery.EditOf (read from the ledger under the
// butler's name, so no butler can name another's), sent through it. The
// edit goes to that delivery's chat, whatever n says.
func (s *Core) editTarget(ctx context.Context, butler string, it *config.Integration, n *envelope.Notify) (string, error) {
	d := &n.Delivery
	dlv := envelope.DeliveryID(d.EditOf)
	if ch, _ := config.ChannelOf(it.Type); !ch.Edits {
		return "", fmt.Errorf("%w: %s cannot edit a message it sent; send a new one", envelope.ErrValidation, it.Channel())
	}
	if d.ClaimThread || d.AckWithin != "" || len(d.Actions) > 0 || n.PermissionRequest != nil {
		return "", fmt.Errorf("%w: an edit changes a message's text only: no claim_thread, ack_within, actions or permission_request", envelope.ErrValidation)
	}
	rec, err := s.Ledger.Get(ctx, butler, d.EditOf)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: reading delivery %s: %w", envelope.ErrTargetUnavailable, dlv, err)
	case rec == nil:
		return "", fmt.Errorf("%w: %s is not a message you sent (or it is no longer kept); edit only your own", envelope.ErrNotFound, dlv)
	case rec.Channel != it.Channel():
		return "", fmt.Errorf("%w: %s went out through %s, not %s", envelope.ErrValidation, dlv, rec.Channel, it.Channel())
	case rec.Status != ledger.Sent || len(rec.MessageIDs) == 0 || rec.MessageIDs[0] == "":
		return "", fmt.Errorf("%w: %s was not delivered, so there is nothing to edit", envelope.ErrValidation, dlv)
	case rec.Chat == "":
		return "", fmt.Errorf("%w: %s was sent before Herald kept where its messages went; it cannot be edited, send a new one", envelope.ErrValidation, dlv)
	}
	d.Recipient = rec.Chat
	return rec.MessageIDs[0], nil
}
