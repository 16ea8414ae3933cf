package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
)

// legacyRoutedPrefix is where releases before 2026-11-26 kept them, where a
// butler named "routed" could reach them. They are still read, for 30 days
// of replies to messages routed before an upgrade, unless such a butler is
// configured. TODO(2026-12-26): remove.
const legacyRoutedPrefix = "routed."

// RecordRouted notes that in was routed to butler. The switchboard calls it
// before the message reaches the butler's inbox.
func RecordRouted(ctx context.Context, kv jetstream.KeyValue, butler string, in *envelope.Ingress) error {
	b, err := json.Marshal(bus.RoutedRequest{Integration: in.IntegrationID, RequestContext: in.RequestContext, Chat: RecipientOf(in), Attachments: in.Attachments})
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if _, err := kv.Put(ctx, bus.RoutedKey(butler, in.RequestContext.RequestID), b); err != nil {
		return fmt.Errorf("%w: recording the request: %w", envelope.ErrTargetUnavailable, err)
	}
	return nil
}

func openRequests(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, bus.BucketRequests)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", bus.BucketRequests, err)
	}
	return kv, nil
}

// inReplyTo checks a reply or reaction: its request_context must name an
// inbound message routed to butler, on the integration it goes back through,
// and agree with what that message said. Then the stored lineage is used, so
// a butler can thread a message only into a conversation it was given.
func (s *Core) inReplyTo(ctx context.Context, butler string, it *config.Integration, n *envelope.Notify) error {
	rc := n.RequestContext
	if rc == nil || rc.RequestID == "" || strings.ContainsAny(rc.RequestID, ".*> ") {
		return fmt.Errorf("%w: a %s needs the request_context of an inbound message given to you", envelope.ErrValidation, n.Delivery.Intent)
	}
	e, err := s.Requests.Get(ctx, bus.RoutedKey(butler, rc.RequestID))
	if errors.Is(err, jetstream.ErrKeyNotFound) && s.cfg.Butler(strings.TrimSuffix(legacyRoutedPrefix, ".")) == nil {
		e, err = s.Requests.Get(ctx, legacyRoutedPrefix+butler+"."+rc.RequestID)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%w: request_id %s is not an inbound message routed to %s; reply and react only to messages you were given, with their request_context as given", envelope.ErrForbidden, rc.RequestID, butler)
	}
	if err != nil {
		return fmt.Errorf("%w: reading request %s: %w", envelope.ErrTargetUnavailable, rc.RequestID, err)
	}
	var got bus.RoutedRequest
	if err := json.Unmarshal(e.Value(), &got); err != nil {
		return fmt.Errorf("%w: request %s: %w", envelope.ErrInternal, rc.RequestID, err)
	}
	want := got.RequestContext
	typ := channelType(want.SourceChannel)
	switch {
	case got.Integration != it.ID:
		return fmt.Errorf("%w: request %s came in on %s, not %s; answer it there (omit channel)", envelope.ErrForbidden, rc.RequestID, got.Integration, it.Channel())
	case differs(channelType(rc.SourceChannel), typ), differs(rc.SourceEndpointIdentity, want.SourceEndpointIdentity),
		differs(rc.SourceSenderIdentity, want.SourceSenderIdentity), differs(rc.SourceThreadIdentity, want.SourceThreadIdentity):
		return fmt.Errorf("%w: request_context does not match inbound message %s; pass it as given", envelope.ErrForbidden, rc.RequestID)
	case !sameChat(n.Delivery.Recipient, got.Chat):
		// The request_context can be rebuilt from what the model sees; the
		// recipient must not take the answer anywhere else.
		return fmt.Errorf("%w: a %s goes back to the chat of the message it answers, not to recipient %q; omit recipient",
			envelope.ErrForbidden, n.Delivery.Intent, n.Delivery.Recipient)
	}
	rc.SourceChannel, rc.SourceEndpointIdentity, rc.SourceSenderIdentity, rc.SourceThreadIdentity = typ, want.SourceEndpointIdentity, want.SourceSenderIdentity, want.SourceThreadIdentity
	return nil
}

// sameChat reports whether a reply's recipient is the recorded chat: none
// given (the sender answers in the recorded thread), or that chat, in any
// case and with the web chat's "web:" prefix or without.
func sameChat(recipient, chat string) bool {
	recipient = envelope.WebVisitor(strings.TrimSpace(recipient))
	return recipient == "" || chat != "" && strings.EqualFold(recipient, envelope.WebVisitor(chat))
}

// differs reports whether a value the butler gave disagrees with the
// recorded one; a value it left out takes the recorded one.
func differs(given, recorded string) bool { return given != "" && given != recorded }

// channelType is the type of a channel name, "telegram" of "telegram:tg_main".
func channelType(ch string) string {
	typ, _, _ := strings.Cut(ch, ":")
	return typ
}
