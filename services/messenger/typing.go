package messenger

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Signs of life. A butler says when a message reached one of its sessions
// (bus.TypingStart) and when the model answered it (bus.TypingStop), on
// core NATS: they are worth nothing late. On the start, one messenger of
// the queue group puts the integration's ack_reaction on the message and
// shows "typing…" in its chat, again every typingEvery, until the stop
// (every messenger hears it), typingFor, or a stop of the process. The
// message must be one the switchboard routed to that butler, on an
// integration granted to it: a butler cannot make typing show anywhere
// else.

const (
	// typingEvery renews the indicator before it fades (Telegram shows it
	// 5 s, Discord 10 s).
	typingEvery = 4 * time.Second
	// typingFor ends a loop nobody stopped (a butler killed meanwhile).
	typingFor = 2 * time.Minute
	// typingMax bounds one butler's loops at once.
	typingMax = 20
)

// typing holds the running loops, by butler and request_id.
type typing struct {
	mu    sync.Mutex
	loops map[string]map[string]typingLoop
	wg    sync.WaitGroup
}

type typingLoop struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// signsOfLife listens for the butlers' signs of life until ctx ends, and
// then waits for its loops.
func (m *Messenger) signsOfLife(ctx context.Context) (stop func(), err error) {
	t := &typing{loops: map[string]map[string]typingLoop{}}
	requests := bus.NewDirectKV(m.js, bus.BucketRequests)
	start, err := m.nc.QueueSubscribe(bus.TypingSubject("*", bus.TypingStart), "herald-messenger", func(msg *nats.Msg) {
		butler, sig, ok := typingOf(msg)
		if ok && sig.RequestID != "" {
			m.startTyping(ctx, t, requests, butler, sig.RequestID)
		}
	})
	if err != nil {
		return nil, err
	}
	end, err := m.nc.Subscribe(bus.TypingSubject("*", bus.TypingStop), func(msg *nats.Msg) {
		if butler, sig, ok := typingOf(msg); ok {
			t.stop(butler, sig.RequestID)
		}
	})
	if err != nil {
		_ = start.Unsubscribe()
		return nil, err
	}
	return func() {
		_ = start.Unsubscribe()
		_ = end.Unsubscribe()
		t.stop("", "")
		t.wg.Wait()
	}, nil
}

// typingOf reads a sign of life: the butler its subject names, and its body.
func typingOf(msg *nats.Msg) (string, bus.TypingSignal, bool) {
	var sig bus.TypingSignal
	parts := strings.Split(msg.Subject, ".")
	if len(parts) != 4 || json.Unmarshal(msg.Data, &sig) != nil || strings.ContainsAny(sig.RequestID, ".*> ") {
		return "", sig, false
	}
	return parts[2], sig, true
}

// startTyping acts on butler's start for request id: the ack reaction, and
// a typing loop where the integration shows it.
func (m *Messenger) startTyping(ctx context.Context, t *typing, requests bus.KV, butler, id string) {
	lookup, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e, err := requests.Get(lookup, bus.RoutedKey(butler, id))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			m.log.WarnContext(ctx, "a sign of life could not be checked; none shown", "butler", butler, "request_id", id, "err", err)
		}
		return
	}
	var rr bus.RoutedRequest
	if err := json.Unmarshal(e.Value(), &rr); err != nil {
		return
	}
	in := m.cfg.Integration(rr.Integration)
	sender := m.senders[rr.Integration]
	if in == nil || in.Disabled || !in.Grants.Allows(butler) || sender == nil {
		return
	}
	d := deliver.Delivery{Intent: envelope.IntentReply, Butler: butler, Recipient: rr.Chat,
		Thread: rr.RequestContext.SourceThreadIdentity, Sender: rr.RequestContext.SourceSenderIdentity}
	if in.AckReaction != "" {
		r := d
		r.Intent, r.Emoji, r.Key = envelope.IntentReact, in.AckReaction, "ack-reaction:"+butler+":"+id
		if _, err := sender.Deliver(lookup, r); err != nil {
			m.log.WarnContext(ctx, "the ack reaction was not put on a message", "integration", in.ID, "request_id", id, "err", err)
		}
	}
	typer, ok := sender.(deliver.Typer)
	if !ok || !in.ShowsTyping() {
		return
	}
	loop, ok := t.add(ctx, butler, id)
	if !ok {
		return
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer t.done(butler, id, loop)
		tick := time.NewTicker(typingEvery)
		defer tick.Stop()
		for {
			if err := typer.Typing(loop, d); err != nil {
				if loop.Err() == nil {
					m.log.WarnContext(ctx, "typing… not shown; stopped for this message", "integration", in.ID, "request_id", id, "err", err)
				}
				return
			}
			select {
			case <-loop.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// add starts the loop of butler's message id (ending one already running
// for it), unless the butler has typingMax running.
func (t *typing) add(ctx context.Context, butler, id string) (context.Context, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	loops := t.loops[butler]
	if loops == nil {
		loops = map[string]typingLoop{}
		t.loops[butler] = loops
	}
	if l, ok := loops[id]; ok {
		l.cancel()
	} else if len(loops) >= typingMax {
		return nil, false
	}
	loop, cancel := context.WithTimeout(ctx, typingFor)
	loops[id] = typingLoop{loop, cancel}
	return loop, true
}

// done forgets the loop of butler's message id, unless another replaced it.
func (t *typing) done(butler, id string, loop context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.loops[butler][id]; ok && l.ctx == loop {
		l.cancel()
		delete(t.loops[butler], id)
	}
}

// stop ends the loop of butler's message id; every loop of butler for an
// empty id, of every butler for an empty butler.
func (t *typing) stop(butler, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for b, loops := range t.loops {
		if butler != "" && b != butler {
			continue
		}
		for k, l := range loops {
			if id == "" || k == id {
				l.cancel()
			}
		}
	}
}
