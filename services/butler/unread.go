package butler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// A message pushed to a session is not yet a message the model has: a
// client may ignore the push (one without channel support, Claude Code
// started without its channel flag), and none says so. So a pushed message
// is kept on the butler's unread list until the model acts on it (reply or
// react naming it) or takes it with inbox, which gives the unread first,
// marked pushed, then what was never pushed. The list is one record in
// herald_requests beside the messages themselves, so every process of the
// butler and a restarted one see the same.

// unreadKey is the butler's unread list in herald_requests: not a request
// id (those have no dot), so reply cannot name it.
func unreadKey(butler string) string { return butler + "._unread" }

const (
	// unreadKeep is how long a pushed message stays unread: as long as an
	// unpushed one waits in the inbox stream.
	unreadKeep = 7 * 24 * time.Hour
	// unreadMax bounds the list (and its record, well under NATS's 1 MB
	// message); the oldest beyond it leave the list, logged.
	unreadMax = 500
	// inlineMax bounds the text of a message kept inline.
	inlineMax = 2000
)

// unreadEntry is one pushed message the model has not acted on.
type unreadEntry struct {
	// Seq is its inbox stream sequence: the same in every redelivery.
	Seq       uint64    `json:"seq"`
	RequestID string    `json:"request_id"`
	PushedAt  time.Time `json:"pushed_at"`
	// Inline is the message itself when it has no record of its own to
	// read it from (Herald's notices).
	Inline *channelMessage `json:"inline,omitempty"`
}

type unreadList struct {
	Entries []unreadEntry `json:"entries"`
}

// addUnread puts message v, inbox stream sequence seq, pushed to a
// session, on the unread list.
func (c *channelSide) addUnread(ctx context.Context, seq uint64, v *channelMessage) error {
	e := unreadEntry{Seq: seq, RequestID: v.Meta["request_id"], PushedAt: time.Now().UTC()}
	if v.notice {
		in := *v
		if len(in.Content) > inlineMax {
			in.Content = in.Content[:inlineMax] + "…"
		}
		e.Inline = &in
	}
	var dropped []unreadEntry
	err := bus.ChangeJSON(ctx, c.requests, unreadKey(c.b.name), func(l *unreadList, _ bool) (bool, error) {
		dropped = nil
		if slices.ContainsFunc(l.Entries, func(x unreadEntry) bool { return x.Seq == seq }) {
			return false, nil // pushed again (a redelivery)
		}
		l.Entries = append(l.Entries, e)
		dropped = l.trim(time.Now())
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: recording an unread message: %w", envelope.ErrTargetUnavailable, err)
	}
	if len(dropped) > 0 {
		c.droppedUnread(ctx, dropped)
	}
	return nil
}

// droppedUnread logs entries that left the unread list unread: at most once
// a minute, with how many since, so a client that never answers (nor calls
// inbox) does not fill the log.
func (c *channelSide) droppedUnread(ctx context.Context, dropped []unreadEntry) {
	c.mu.Lock()
	c.unreadDropped += len(dropped)
	n, due := c.unreadDropped, time.Since(c.unreadWarned) >= time.Minute
	if due {
		c.unreadDropped, c.unreadWarned = 0, time.Now()
	}
	c.mu.Unlock()
	if due {
		last := dropped[len(dropped)-1]
		c.b.log.WarnContext(ctx, "pushed messages the model never answered nor took with inbox left the unread list (older than 7 days, or beyond 500); they are still in history", "count", n, "last_request_id", last.RequestID)
	}
}

// trim drops the entries older than unreadKeep and the oldest beyond
// unreadMax, and returns them.
func (l *unreadList) trim(now time.Time) []unreadEntry {
	var out []unreadEntry
	l.Entries = slices.DeleteFunc(l.Entries, func(e unreadEntry) bool {
		old := now.Sub(e.PushedAt) > unreadKeep
		if old {
			out = append(out, e)
		}
		return old
	})
	if n := len(l.Entries) - unreadMax; n > 0 {
		out = append(out, l.Entries[:n]...)
		l.Entries = slices.Delete(l.Entries, 0, n)
	}
	return out
}

// actedOn takes message id off the unread list: the model answered it
// (how: the tool).
func (c *channelSide) actedOn(ctx context.Context, id, how string) {
	var was bool
	err := c.dropUnread(ctx, func(e unreadEntry) bool {
		if e.RequestID == id && e.Inline == nil {
			was = true
			return true
		}
		return false
	})
	c.signal(bus.TypingStop, id)
	switch {
	case err != nil:
		// It stays unread: inbox gives it once more, marked pushed.
		c.b.log.WarnContext(ctx, "a message the model answered stays on the unread list", "request_id", id, "err", err)
	case was:
		c.b.log.InfoContext(ctx, "inbound message acted on by the model", "request_id", id, "by", how)
	}
}

// dropUnread takes the entries gone says off the unread list.
func (c *channelSide) dropUnread(ctx context.Context, gone func(unreadEntry) bool) error {
	return bus.ChangeJSON(ctx, c.requests, unreadKey(c.b.name), func(l *unreadList, _ bool) (bool, error) {
		n := len(l.Entries)
		l.Entries = slices.DeleteFunc(l.Entries, gone)
		return len(l.Entries) < n, nil
	})
}

// takeUnread takes up to max messages off the unread list, oldest first,
// each as the model saw it, marked pushed. A message whose record is gone
// (herald_requests' age) leaves the list, logged. Only what it returns
// leaves it: a failure midway leaves the rest for the next call.
func (c *channelSide) takeUnread(ctx context.Context, max int) ([]*channelMessage, error) {
	l, err := c.unread(ctx)
	if err != nil {
		return nil, err
	}
	var out []*channelMessage
	var readErr error
	taken := map[uint64]bool{}
	for _, e := range l.Entries[:min(max, len(l.Entries))] {
		v := e.Inline
		if v == nil {
			in, err := c.request(ctx, e.RequestID)
			if errors.Is(err, envelope.ErrNotFound) {
				c.b.log.WarnContext(ctx, "an unread message is no longer kept; it leaves the unread list", "request_id", e.RequestID)
				taken[e.Seq] = true
				continue
			}
			if err != nil {
				readErr = err
				break
			}
			v = view(in)
		}
		v.Meta[MetaPushed] = "true"
		out = append(out, v)
		taken[e.Seq] = true
	}
	if len(taken) == 0 {
		return nil, readErr
	}
	if err := c.dropUnread(ctx, func(e unreadEntry) bool { return taken[e.Seq] }); err != nil {
		return nil, fmt.Errorf("%w: taking the unread messages: %w", envelope.ErrTargetUnavailable, err)
	}
	return out, nil
}

// MetaPushed marks a message inbox gives that was pushed to a session
// before ("true"): the model may have seen it already.
const MetaPushed = "pushed"

// unread reads the unread list.
func (c *channelSide) unread(ctx context.Context) (*unreadList, error) {
	var l unreadList
	e, err := c.requests.Get(ctx, unreadKey(c.b.name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading the unread messages: %w", envelope.ErrTargetUnavailable, err)
	}
	if err := json.Unmarshal(e.Value(), &l); err != nil {
		return nil, fmt.Errorf("%w: the unread list: %w", envelope.ErrInternal, err)
	}
	return &l, nil
}

// signal sends a sign of life (bus.TypingSubject) about message id: it
// reached a session (start; the messenger shows typing… and the ack
// reaction), or the model answered it (stop; "" for all of this butler's:
// it asked a question). Best effort: a lost one only shows typing a while
// longer, or not at all.
func (c *channelSide) signal(verb, id string) {
	b, _ := json.Marshal(bus.TypingSignal{RequestID: id})
	if err := c.b.nc.Publish(bus.TypingSubject(c.b.name, verb), b); err != nil {
		c.b.log.Debug("a sign of life was not sent", "verb", verb, "request_id", id, "err", err)
	}
}
