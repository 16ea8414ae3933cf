package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeaderReplay marks a message an operator replayed from the dead-letter
// stream: a delivery recorded as failed is tried again, one recorded as sent
// is still answered from its record and never sent twice.
const HeaderReplay = "Herald-Replay"

// DeadLetter is one message in the dead-letter stream.
type DeadLetter struct {
	// ID is its sequence in HERALD_DEADLETTER, what `herald dead replay` takes.
	ID      uint64
	Time    time.Time
	Stream  string // the work queue it came from
	Subject string // the subject it was first published on
	Class   string
	Error   string
	Tries   int
	Key     string // its idempotency key
	// RequestID is the request_id of the envelope, where it can be read.
	RequestID string
	Data      []byte
}

// DeadLetters lists the dead-letter stream, oldest first.
func DeadLetters(ctx context.Context, js jetstream.JetStream) ([]DeadLetter, error) {
	s, err := js.Stream(ctx, StreamDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	if info.State.Msgs == 0 {
		return nil, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	var out []DeadLetter
	for range info.State.Msgs {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if (errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout)) && len(out) > 0 {
			break // the rest were replayed or removed meanwhile
		}
		if err != nil && len(out) == 0 {
			// The stream holds some, and none came: never "none" for that.
			return nil, fmt.Errorf("the dead-letter stream holds %d message(s) but reading them failed (may this NATS user pull from it?): %w", info.State.Msgs, err)
		}
		if err != nil {
			return out, err
		}
		meta, err := m.Metadata()
		if err != nil {
			return out, err
		}
		out = append(out, deadLetter(meta.Sequence.Stream, meta.Timestamp, m.Subject(), m.Headers(), m.Data()))
		if meta.NumPending == 0 {
			break
		}
	}
	return out, nil
}

func deadLetter(seq uint64, at time.Time, subject string, h nats.Header, data []byte) DeadLetter {
	d := DeadLetter{ID: seq, Time: at, Subject: h.Get(HeaderSubject), Class: h.Get(HeaderErrorClass), Error: h.Get(HeaderError), Key: h.Get(HeaderKey), Data: data}
	d.Tries, _ = strconv.Atoi(h.Get(HeaderDeliveries))
	if rest, ok := strings.CutPrefix(subject, "herald.dead."); ok {
		d.Stream, _, _ = strings.Cut(rest, ".")
	}
	var head struct {
		RequestContext struct {
			RequestID string `json:"request_id"`
		} `json:"request_context"`
	}
	if json.Unmarshal(data, &head) == nil {
		d.RequestID = head.RequestContext.RequestID
	}
	return d
}

// Replay puts dead letter id back on the subject it was first published on,
// with its idempotency key and HeaderReplay, and removes it from the
// dead-letter stream. The Nats-Msg-Id is the dead letter's own, so replaying
// it twice in a row queues it once.
func Replay(ctx context.Context, js jetstream.JetStream, id uint64) error {
	s, err := js.Stream(ctx, StreamDeadLetter)
	if err != nil {
		return fmt.Errorf("dead-letter stream: %w", err)
	}
	raw, err := s.GetMsg(ctx, id)
	if err != nil {
		return fmt.Errorf("dead letter %d: %w", id, err)
	}
	d := deadLetter(raw.Sequence, raw.Time, raw.Subject, raw.Header, raw.Data)
	if d.Subject == "" {
		return fmt.Errorf("dead letter %d does not say where it came from (no %s header)", id, HeaderSubject)
	}
	h := nats.Header{}
	if d.Key != "" {
		h.Set(HeaderKey, d.Key)
	}
	h.Set(HeaderReplay, strconv.FormatUint(id, 10))
	h.Set(nats.MsgIdHdr, "replay:"+strconv.FormatUint(id, 10))
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: d.Subject, Data: d.Data, Header: h}); err != nil {
		return fmt.Errorf("replaying dead letter %d on %s: %w", id, d.Subject, err)
	}
	if err := s.DeleteMsg(ctx, id); err != nil {
		return fmt.Errorf("dead letter %d was replayed but not removed: %w", id, err)
	}
	return nil
}
