package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// Copies are the copies of notes, questions and claim offers handed to the
// messenger whose outcome has not come back. A reply can come before its
// copy's outcome (a quick human, a mail server that confirms a mail after
// its reader has it): it names a message nobody knows yet. While copies to
// its chat are on their way, the core holds a reply or a tap there (Wait)
// before any feature looks at it, so the feature finds the copy it answers.
//
//	copy.<request_id>               a copy on its way (Copy)
//	ackwait.<integration>.<chat>    the copies on their way to a chat (pendingCopies)
type Copies struct {
	kv jetstream.KeyValue
}

// Copy is one copy on its way: where it goes, and the notify that sends it.
type Copy struct {
	Channel   string `json:"channel"` // type:integration
	Chat      string `json:"chat"`
	RequestID string `json:"request_id"`
}

const (
	// copyWait is how long a reply waits for the copies still on their way
	// to its chat; a copy handed on longer than pendingKeep ago is waited
	// for no more.
	copyWait    = 5 * time.Second
	copyPoll    = 100 * time.Millisecond
	pendingKeep = 10 * time.Minute
)

func copyKey(requestID string) string { return "copy." + requestID }
func waitKey(integration, chat string) string {
	return "ackwait." + integration + "." + bus.KeyToken(chat)
}

// pendingCopies are the copies on their way to one chat: by request id,
// when handed on.
type pendingCopies map[string]time.Time

// OnItsWay records c as on its way, before its delivery is published.
func (cs *Copies) OnItsWay(ctx context.Context, c Copy) error {
	if err := putJSON(ctx, cs.kv, copyKey(c.RequestID), c); err != nil {
		return err
	}
	return cs.mark(ctx, c, true)
}

// Arrived takes the copy of notify requestID off its way, if it was on
// one: its outcome came back, and every feature following it has recorded
// it, so a reply waiting for it finds it.
func (cs *Copies) Arrived(ctx context.Context, requestID string) error {
	var c Copy
	if found, err := getJSON(ctx, cs.kv, copyKey(requestID), &c); err != nil || !found {
		return err
	}
	if err := cs.mark(ctx, c, false); err != nil {
		return err
	}
	if err := cs.kv.Delete(ctx, copyKey(requestID)); err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)
	}
	return nil
}

// Wait waits, up to copyWait, while copies are on their way to one of
// chats of integration: the message may answer one of them.
func (cs *Copies) Wait(ctx context.Context, integration string, chats []string) error {
	until := time.Now().Add(copyWait)
	for {
		waiting := false
		for _, chat := range chats {
			p, _, err := cs.pending(ctx, waitKey(integration, chat))
			if err != nil {
				return err
			}
			waiting = waiting || len(p) > 0
		}
		if !waiting || time.Now().After(until) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, ctx.Err())
		case <-time.After(copyPoll):
		}
	}
}

// mark adds copy c to its chat's pendingCopies (on) or takes it out, by
// compare-and-set; entries older than pendingKeep are dropped.
func (cs *Copies) mark(ctx context.Context, c Copy, on bool) error {
	_, integration, _ := strings.Cut(c.Channel, ":")
	key := waitKey(integration, c.Chat)
	var err error
	for range 10 {
		p, rev, gerr := cs.pending(ctx, key)
		if gerr != nil {
			return gerr
		}
		if _, ok := p[c.RequestID]; ok == on {
			return nil
		}
		if on {
			p[c.RequestID] = time.Now()
		} else {
			delete(p, c.RequestID)
		}
		switch b, _ := json.Marshal(p); {
		case len(p) == 0:
			err = cs.kv.Delete(ctx, key, jetstream.LastRevision(rev))
		case rev == 0:
			_, err = cs.kv.Create(ctx, key, b)
		default:
			_, err = cs.kv.Update(ctx, key, b, rev)
		}
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: recording the copies on their way to a chat: %w", envelope.ErrTargetUnavailable, err)
}

// pending reads the pendingCopies under key, without the stale ones, and
// the revision to change them at (0: none).
func (cs *Copies) pending(ctx context.Context, key string) (pendingCopies, uint64, error) {
	p := pendingCopies{}
	e, err := cs.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return p, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("%w: reading %s: %w", envelope.ErrTargetUnavailable, key, err)
	}
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", envelope.ErrInternal, key, err)
	}
	for id, at := range p {
		if time.Since(at) > pendingKeep {
			delete(p, id)
		}
	}
	return p, e.Revision(), nil
}
