package butler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/schemas"
)

// The edit tool replaces the text of a message the butler sent. The model
// names it by the delivery_id notify or reply answered; the butler notes
// which delivery (its ledger key) each editable delivery was, one key each
// among its own keys of herald_requests (kept as long as that bucket keeps
// anything, 30 days): one write per send, never a shared list rewritten by
// every notify. That key is only an index: the switchboard reads the
// delivery from the ledger under the butler's own name, so a butler can
// edit only its own messages.

func sentKey(butler, deliveryID string) string { return butler + "._sent." + deliveryID }

type sentEntry struct {
	DeliveryID string    `json:"delivery_id"`
	Key        string    `json:"key"`
	Channel    string    `json:"channel"`
	At         time.Time `json:"at"`
}

// sent notes delivery d of route key, if its channel can edit, so edit
// can name it. A failure costs the edit only: logged.
func (b *Butler) sent(ctx context.Context, key string, d *envelope.DeliveryResult) {
	typ, _, _ := strings.Cut(d.Channel, ":")
	if ch, _ := config.ChannelOf(typ); !ch.Edits || envelope.DeliveryID(key) != d.DeliveryID {
		return
	}
	e, _ := json.Marshal(sentEntry{DeliveryID: d.DeliveryID, Key: key, Channel: d.Channel, At: time.Now().UTC()})
	if _, err := b.channel.requests.Put(ctx, sentKey(b.name, d.DeliveryID), e); err != nil {
		b.log.WarnContext(ctx, "a sent message was not noted for edit", "delivery_id", d.DeliveryID, "err", err)
	}
}

func (b *Butler) addEditTool() {
	b.mcp.AddTool(mcp.NewTool("edit",
		mcp.WithDescription("Replace the text of a message you sent (by notify or reply), e.g. to turn \"working on it…\" into the answer. Name it by the delivery_id you were given; Telegram, Slack, Discord and the web chat can edit."),
		mcp.WithString("delivery_id", mcp.Required(), mcp.Description("The delivery_id notify or reply gave you (dlv_…)")),
		mcp.WithString("message", mcp.Required(), mcp.Description("The new text; markdown allowed")),
		alwaysLoad,
	), b.counted(b.edit))
}

func (b *Butler) edit(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, msg := strings.TrimSpace(req.GetString("delivery_id", "")), req.GetString("message", "")
	if strings.TrimSpace(msg) == "" {
		return toolError(fmt.Errorf("%w: edit needs the new message", envelope.ErrValidation)), nil
	}
	e, err := b.sentEntry(ctx, id)
	if err != nil {
		return toolError(err), nil
	}
	n := envelope.NewNotify(b.name, envelope.Delivery{Intent: envelope.IntentEdit, Channel: e.Channel, Message: msg, EditOf: e.Key}, nil)
	if err := envelope.Check(schemas.Notify, n); err != nil {
		return toolError(err), nil
	}
	b.channel.signal(bus.TypingStop, "") // the model has its answer
	res := b.send(ctx, n)
	if a, ok := res.StructuredContent.(sentAnswer); ok && a.Delivery != nil && a.Delivery.Outcome != ledger.OutcomeUncertain {
		text := fmt.Sprintf("Edited your message %s on %s.", id, e.Channel)
		a.Summary = text
		return mcp.NewToolResultStructured(a, text), nil
	}
	return res, nil
}

// sentEntry finds delivery id among the butler's noted deliveries.
func (b *Butler) sentEntry(ctx context.Context, id string) (sentEntry, error) {
	notOurs := fmt.Errorf("%w: delivery_id %q is not one of your messages of the last 30 days on a channel that can edit (Telegram, Slack, Discord, web); send a new message instead", envelope.ErrNotFound, id)
	if !deliveryIDRE.MatchString(id) {
		return sentEntry{}, notOurs
	}
	var e sentEntry
	kv, err := b.channel.requests.Get(ctx, sentKey(b.name, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return sentEntry{}, notOurs
	}
	if err == nil {
		err = json.Unmarshal(kv.Value(), &e)
	}
	if err != nil {
		return sentEntry{}, fmt.Errorf("%w: reading your sent messages: %w", envelope.ErrTargetUnavailable, err)
	}
	return e, nil
}

// deliveryIDRE is what a delivery_id looks like (envelope.DeliveryID).
var deliveryIDRE = regexp.MustCompile(`^dlv_[0-9a-zA-Z_-]{1,26}$`)
