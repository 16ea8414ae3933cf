// Package forum records which Telegram forum topic of a group is which
// butler's (topics: per_butler), in bus.BucketChannelState:
//
//   - Registry, NewRegistry, KV: the messenger's side; Topic makes a butler's
//     topic once across every replica, Forget drops one deleted in Telegram.
//   - Owner, Getter, ThreadKeys: the switchboard's side, which may read only
//     the keys that say whose topic a thread is.
//   - MetaTopic: the ingress meta key of a message written in a topic.
//   - ErrBusy: another messenger is still making the topic; ErrKey: a chat
//     that cannot be part of a key.
//
// The keys, and how a topic is made once, are in docs/attention.md, "Forum
// topics per butler".
package forum

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/ratelimit"
)

// MetaTopic is the ingress meta key of a message written in a forum topic:
// the topic's thread id (Telegram's message_thread_id of a message with
// is_topic_message). Replies in a group that is not a forum have a
// message_thread_id too (meta thread_id) but no topic.
const MetaTopic = "topic_id"

// Errors of the registry.
var (
	// ErrBusy: another messenger is making the topic and has not finished
	// within Registry.Wait; the delivery should try again shortly.
	ErrBusy = errors.New("the butler's forum topic is being made by another messenger")
	// ErrKey: an integration, chat or butler that cannot be part of a key
	// (a chat that is not a numeric id).
	ErrKey = errors.New("no forum topic key")
)

// Timings of a Registry's defaults.
const (
	// DefaultStale is how long a claim may stand unrenewed before another
	// takes it over (a live creator renews it every quarter of that).
	DefaultStale = 2 * time.Minute
	// DefaultWait is how long Topic waits for another's creation before it
	// answers ErrBusy.
	DefaultWait = 30 * time.Second
	defaultPoll = 100 * time.Millisecond
)

// KV is what the registry needs of bus.BucketChannelState; a
// jetstream.KeyValue is one.
type KV interface {
	Getter
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
}

// Getter reads keys: all Owner needs (a bus.DirectKV allowed only the
// thread keys is one).
type Getter interface {
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
}

// Registry makes and remembers butlers' topics. It is safe for concurrent
// use; in one process, deliveries that need the same topic wait for one
// another rather than for the bucket.
type Registry struct {
	kv     KV
	holder string
	// Stale, Wait and Poll are DefaultStale, DefaultWait and how often a
	// waiter looks again; tests shorten them.
	Stale, Wait, Poll time.Duration

	mu    sync.Mutex
	locks map[string]*sync.Mutex // by butler key
	known map[string]int         // thread id by butler key
}

// NewRegistry is the registry in kv; holder names this process in claims,
// for people reading the bucket.
func NewRegistry(kv KV, holder string) *Registry {
	return &Registry{kv: kv, holder: holder, Stale: DefaultStale, Wait: DefaultWait, Poll: defaultPoll,
		locks: map[string]*sync.Mutex{}, known: map[string]int{}}
}

// record is a butler key's value: a topic, or a claim on making one.
type record struct {
	Thread int    `json:"thread,omitempty"`
	Name   string `json:"name,omitempty"`
	// Creating names the holder making the topic, since Since.
	Creating string    `json:"creating,omitempty"`
	Since    time.Time `json:"since,omitzero"`
}

// owner is a thread key's value.
type owner struct {
	Butler string `json:"butler"`
}

// token is what one part of a key may be; chats are numeric ids.
var (
	token = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	chats = regexp.MustCompile(`^-?[0-9]+$`)
)

func butlerKey(integration, chat, butler string) (string, error) {
	if err := check(integration, chat); err != nil {
		return "", err
	}
	if !token.MatchString(butler) {
		return "", fmt.Errorf("%w: butler %q", ErrKey, butler)
	}
	return "topic." + integration + "." + chat + ".butler." + butler, nil
}

func threadKey(integration, chat string, thread int) (string, error) {
	if err := check(integration, chat); err != nil {
		return "", err
	}
	if thread <= 0 {
		return "", fmt.Errorf("%w: thread %d", ErrKey, thread)
	}
	return "topic." + integration + "." + chat + ".thread." + strconv.Itoa(thread), nil
}

func check(integration, chat string) error {
	if !token.MatchString(integration) {
		return fmt.Errorf("%w: integration %q", ErrKey, integration)
	}
	if !chats.MatchString(chat) {
		return fmt.Errorf("%w: chat %q is not a numeric chat id", ErrKey, chat)
	}
	return nil
}

// ThreadKeys is the subject pattern of every thread key under bucket's
// subjects ("$KV.<bucket>." prefix left to the caller): what the
// switchboard may read.
const ThreadKeys = "topic.*.*.thread.*"

// Topic returns the thread id of butler's topic in chat of integration.
// When there is none yet, create makes it (returning its thread id), once
// across every replica: while another makes it, Topic waits for that one,
// up to Wait, then answers ErrBusy. An error of create is returned as it
// is, and the next call tries again.
func (r *Registry) Topic(ctx context.Context, integration, chat, butler, name string, create func(ctx context.Context) (int, error)) (int, error) {
	key, err := butlerKey(integration, chat, butler)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	l := r.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		r.locks[key] = l
	}
	r.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	r.mu.Lock()
	thread, ok := r.known[key]
	r.mu.Unlock()
	if ok {
		return thread, nil
	}
	if thread, err = r.topic(ctx, key, integration, chat, butler, name, create); err != nil {
		return 0, err
	}
	r.mu.Lock()
	r.known[key] = thread
	r.mu.Unlock()
	return thread, nil
}

// topic reads the butler's key, and claims it and makes the topic when it
// is free (or its claim stale).
func (r *Registry) topic(ctx context.Context, key, integration, chat, butler, name string, create func(ctx context.Context) (int, error)) (int, error) {
	deadline := time.Now().Add(r.Wait)
	var (
		seen   uint64
		seenAt time.Time
	)
	for {
		e, err := r.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			rev, err := r.kv.Create(ctx, key, r.claim())
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another took it first: wait for theirs
			}
			if err != nil {
				return 0, fmt.Errorf("claiming %s: %w", key, err)
			}
			thread, lost, err := r.create(ctx, key, rev, integration, chat, butler, name, create)
			if lost {
				continue
			}
			return thread, err
		}
		if err != nil {
			return 0, fmt.Errorf("reading %s: %w", key, err)
		}
		var rec record
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return 0, fmt.Errorf("reading %s: %w", key, err)
		}
		if rec.Thread > 0 {
			// Made before; its thread key may not have been written (the
			// maker stopped in between).
			if err := r.own(ctx, integration, chat, rec.Thread, butler); err != nil {
				return 0, err
			}
			return rec.Thread, nil
		}
		// Being made by another. Its age counts on this clock (as seen
		// unchanged) and on the claim's, whichever says stale first.
		if e.Revision() != seen {
			seen, seenAt = e.Revision(), time.Now()
		}
		if time.Since(seenAt) >= r.Stale || (!rec.Since.IsZero() && time.Since(rec.Since) >= r.Stale) {
			rev, err := r.kv.Update(ctx, key, r.claim(), e.Revision())
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("taking over %s from %s: %w", key, rec.Creating, err)
			}
			thread, lost, err := r.create(ctx, key, rev, integration, chat, butler, name, create)
			if lost {
				continue
			}
			return thread, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%w (%s, since %s)", ErrBusy, rec.Creating, rec.Since.Format(time.RFC3339))
		}
		if err := ratelimit.Sleep(ctx, r.Poll); err != nil {
			return 0, err
		}
	}
}

func (r *Registry) claim() []byte {
	b, _ := json.Marshal(record{Creating: r.holder, Since: time.Now().UTC()})
	return b
}

// create makes the topic under the claim at revision rev and records it;
// lost: another took the claim over meanwhile (this topic stays unused).
func (r *Registry) create(ctx context.Context, key string, rev uint64, integration, chat, butler, name string, create func(ctx context.Context) (int, error)) (thread int, lost bool, err error) {
	renewed := r.renew(ctx, key, rev)
	thread, err = create(ctx)
	rev = renewed()
	// What follows is recorded even if the delivery is given up meanwhile:
	// a topic made and not recorded would be made again.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err == nil && thread <= 0 {
		err = fmt.Errorf("the topic was made without a thread id (%d)", thread)
	}
	if err != nil {
		// The claim goes, so the next delivery tries again.
		_ = r.kv.Delete(wctx, key, jetstream.LastRevision(rev))
		return 0, false, err
	}
	b, _ := json.Marshal(record{Thread: thread, Name: name})
	if _, err := r.kv.Update(wctx, key, b, rev); errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, true, nil
	} else if err != nil {
		return 0, false, fmt.Errorf("recording topic %d of %s: %w", thread, butler, err)
	}
	return thread, false, r.own(wctx, integration, chat, thread, butler)
}

// renew writes the claim at rev again every Stale/4 while the creator
// works (its call may wait out Telegram's limits), so that only a claim
// whose creator died goes stale. The returned stop ends it and gives the
// claim's latest revision; a failed renewal leaves it be (taken over: the
// creator's final write finds out).
func (r *Registry) renew(ctx context.Context, key string, rev uint64) (stop func() uint64) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(r.Stale/4, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if n, err := r.kv.Update(ctx, key, r.claim(), rev); err == nil {
					rev = n
				}
			}
		}
	}()
	return func() uint64 {
		close(quit)
		<-done
		return rev
	}
}

// own writes thread's key, naming butler, if it does not say so already.
func (r *Registry) own(ctx context.Context, integration, chat string, thread int, butler string) error {
	key, err := threadKey(integration, chat, thread)
	if err != nil {
		return err
	}
	if got, err := owned(ctx, r.kv, key); err != nil || got == butler {
		return err
	}
	b, _ := json.Marshal(owner{Butler: butler})
	if _, err := r.kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("recording topic %d as %s's: %w", thread, butler, err)
	}
	return nil
}

// Forget drops butler's topic thread (deleted in Telegram: its messages
// fail), if it is still the one recorded, so that the next Topic makes a
// new one.
func (r *Registry) Forget(ctx context.Context, integration, chat, butler string, thread int) error {
	key, err := butlerKey(integration, chat, butler)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.known[key] == thread {
		delete(r.known, key)
	}
	r.mu.Unlock()
	e, err := r.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	var rec record
	if json.Unmarshal(e.Value(), &rec) != nil || rec.Thread != thread {
		return nil // another took its place already
	}
	if err := r.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())); err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("forgetting %s: %w", key, err)
	}
	if tk, err := threadKey(integration, chat, thread); err == nil {
		if err := r.kv.Delete(ctx, tk); err != nil {
			return fmt.Errorf("forgetting %s: %w", tk, err)
		}
	}
	return nil
}

// Owner returns the butler whose topic thread of chat is, in integration's
// records, or "" when it is nobody's (the General topic, a topic people
// made).
func Owner(ctx context.Context, kv Getter, integration, chat string, thread int) (string, error) {
	key, err := threadKey(integration, chat, thread)
	if err != nil {
		return "", err
	}
	return owned(ctx, kv, key)
}

func owned(ctx context.Context, kv Getter, key string) (string, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", key, err)
	}
	var o owner
	if err := json.Unmarshal(e.Value(), &o); err != nil {
		return "", fmt.Errorf("reading %s: %w", key, err)
	}
	return o.Butler, nil
}
