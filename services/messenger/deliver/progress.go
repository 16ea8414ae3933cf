package deliver

import (
	"fmt"
	"strings"

	"github.com/heraldhq/herald/pkg/envelope"
)

// What every sender does around its provider calls: refusing a message
// without text, skipping what an earlier attempt sent and reporting each
// message as it is accepted, so that a retried delivery never sends one
// twice. The words of the errors are the same on every channel.

// NeedsText is the error of a send or reply whose message is blank, or nil.
func (d *Delivery) NeedsText() error {
	if strings.TrimSpace(d.Message) != "" {
		return nil
	}
	intent := d.Intent
	if intent == "" {
		intent = envelope.IntentSend
	}
	return fmt.Errorf("%w: the message is empty; %s needs text to send", envelope.ErrValidation, intent)
}

// NeedsEditText refuses an edit with no text: an edit replaces a message's
// text, so it needs the text to show instead.
func (d *Delivery) NeedsEditText() error {
	if strings.TrimSpace(d.Message) != "" {
		return nil
	}
	return fmt.Errorf("%w: the edit's message is empty; an edit needs the text to show instead", envelope.ErrValidation)
}

// SendChunks sends the n chunks of a message that an earlier attempt did
// not (Done holds the ids of the first ones), in order, and reports each
// one's id through Sent as it is accepted. turn, if set, takes the
// channel's turn before each chunk, and Calling follows it; their errors
// are returned as they are. Errors of send name their chunk when there are
// several. The receipt holds the ids of the chunks sent, whatever the
// error.
func (d *Delivery) SendChunks(n int, turn func() error, send func(i int) (id string, err error)) (Receipt, error) {
	ids := append([]string(nil), d.Done...)
	for i := len(d.Done); i < n; i++ {
		if turn != nil {
			if err := turn(); err != nil {
				return Receipt{MessageIDs: ids}, err
			}
			if err := d.Calling(); err != nil {
				return Receipt{MessageIDs: ids}, err
			}
		}
		id, err := send(i)
		if err != nil {
			if n > 1 {
				err = fmt.Errorf("chunk %d of %d: %w", i+1, n, err)
			}
			return Receipt{MessageIDs: ids}, err
		}
		ids = append(ids, id)
		if d.Sent != nil {
			if err := d.Sent(id); err != nil {
				return Receipt{MessageIDs: ids}, fmt.Errorf("recording chunk %d of %d as sent (message %s): %w", i+1, n, id, err)
			}
		}
	}
	return Receipt{MessageIDs: ids}, nil
}

// SentOne reports id, the one message a reaction or an edit acted on,
// through Sent, and is the receipt naming it; what names the act in the
// error ("reaction on message", "the edit of message").
func (d *Delivery) SentOne(id, what string) (Receipt, error) {
	if d.Sent != nil {
		if err := d.Sent(id); err != nil {
			return Receipt{MessageIDs: []string{id}}, fmt.Errorf("recording %s %s: %w", what, id, err)
		}
	}
	return Receipt{MessageIDs: []string{id}}, nil
}

// ReactTarget is the message a reaction goes on: d.Thread (the request's
// source_thread_identity) as parse reads the channel's form of it. A
// reaction without one is refused in the same words on every channel.
func ReactTarget[T any](d *Delivery, parse func(thread string) (T, error)) (T, error) {
	if strings.TrimSpace(d.Thread) == "" {
		var none T
		return none, fmt.Errorf("%w: react needs request_context.source_thread_identity, the message to react to, as received with it", envelope.ErrValidation)
	}
	return parse(d.Thread)
}
