package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// The stream that keeps the conversations.
const (
	StreamName    = "HERALD_WEB"
	subjectPrefix = "herald.web."
	// Retention is how long a conversation is kept for replay.
	Retention = 7 * 24 * time.Hour
	// maxPerSubject bounds one visitor's history, and so a page load's replay.
	maxPerSubject = 1000
)

// entry is one thing in a conversation, as stored: what the visitor wrote, a
// butler's message (markdown, rendered only when sent to the page, so a
// renderer fix applies to history too), or a butler's reaction.
type entry struct {
	ID      string            `json:"id"`
	Kind    string            `json:"kind"`
	Butler  string            `json:"butler,omitempty"`
	User    string            `json:"user,omitempty"`
	Text    string            `json:"text,omitempty"`
	Subject string            `json:"subject,omitempty"`
	Urgency string            `json:"urgency,omitempty"`
	Actions []envelope.Action `json:"actions,omitempty"`
	// ReplyTo is the visitor message a butler message answers.
	ReplyTo string `json:"reply_to,omitempty"`
	// Target is the message a reaction is on.
	Target string `json:"target,omitempty"`
	Emoji  string `json:"emoji,omitempty"`
	TS     string `json:"ts"`
}

// stored is an entry with its position in the store, the page's event id.
type stored struct {
	seq   uint64
	entry entry
}

// store keeps conversations: JetStream in production, memory without a bus.
type store interface {
	// put appends e to subject, once per dedupID.
	put(ctx context.Context, subject, dedupID string, e entry) error
	// has reports whether subject holds anything.
	has(ctx context.Context, subject string) (bool, error)
	// follow sends every entry of subjects after sequence after, then each
	// new one, until ctx is done; the channel closes then, or when the store
	// fails (the page reconnects from its last event).
	follow(ctx context.Context, subjects []string, after uint64) (<-chan stored, error)
}

// jsStore keeps conversations in HERALD_WEB, which it creates on first use.
type jsStore struct {
	js  jetstream.JetStream
	log *slog.Logger

	mu     sync.Mutex
	stream jetstream.Stream
}

func streamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              StreamName,
		Description:       "web chat conversations, one subject per visitor",
		Subjects:          []string{subjectPrefix + ">"},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Replicas:          replicas,
		MaxAge:            Retention,
		MaxMsgsPerSubject: maxPerSubject,
		Discard:           jetstream.DiscardOld,
		Duplicates:        bus.DuplicateWindow,
	}
}

// ensure creates the stream if it is missing, and leaves an existing one as
// it is, so an operator's changes (a longer MaxAge) stay.
func (s *jsStore) ensure(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil {
		return s.stream, nil
	}
	st, err := s.js.Stream(ctx, StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Replicate like the rest of the fleet's streams; the channel has no
		// configuration of its own for it.
		replicas := 1
		if in, err := s.js.Stream(ctx, bus.StreamIngress); err == nil {
			replicas = max(in.CachedInfo().Config.Replicas, 1)
		}
		st, err = s.js.CreateStream(ctx, streamConfig(replicas))
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another replica created it meanwhile.
			st, err = s.js.Stream(ctx, StreamName)
		}
	}
	if err != nil {
		return nil, unavailable(ctx, "opening the web chat stream "+StreamName, err)
	}
	s.stream = st
	return st, nil
}

func (s *jsStore) put(ctx context.Context, subject, dedupID string, e entry) error {
	if _, err := s.ensure(ctx); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, dedupID)
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		if bus.IsNoResponders(err) {
			s.forget() // the stream was deleted: make it again next time
		}
		return unavailable(ctx, "storing a web chat message", err)
	}
	return nil
}

func (s *jsStore) forget() {
	s.mu.Lock()
	s.stream = nil
	s.mu.Unlock()
}

func (s *jsStore) has(ctx context.Context, subject string) (bool, error) {
	st, err := s.ensure(ctx)
	if err != nil {
		return false, err
	}
	_, err = st.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, unavailable(ctx, "looking up a web visitor", err)
	}
	return true, nil
}

func (s *jsStore) follow(ctx context.Context, subjects []string, after uint64) (<-chan stored, error) {
	if _, err := s.ensure(ctx); err != nil {
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: subjects,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		// Ordered consumers are not deleted when the page goes away; the
		// server drops them once they are idle this long.
		InactiveThreshold: time.Minute,
	}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := s.js.OrderedConsumer(ctx, StreamName, cfg)
	if err != nil {
		return nil, unavailable(ctx, "following a web conversation", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, unavailable(ctx, "following a web conversation", err)
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	out := make(chan stored)
	go func() {
		defer close(out)
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("web conversation feed stopped; the page will reconnect", "err", err)
				}
				return
			}
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			var e entry
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				s.log.Warn("undecodable web chat entry skipped", "subject", m.Subject(), "seq", meta.Sequence.Stream, "err", err)
				continue
			}
			select {
			case out <- stored{seq: meta.Sequence.Stream, entry: e}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func unavailable(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %s: %w", envelope.ErrTimeout, what, err)
	}
	return fmt.Errorf("%w: %s: %w", envelope.ErrTargetUnavailable, what, err)
}

// memStore keeps conversations in memory: lost on restart, seen by this
// process only.
type memStore struct {
	mu      sync.Mutex
	seq     uint64
	log     []memEntry
	seen    map[string]bool
	changed chan struct{} // closed and replaced on every append
}

type memEntry struct {
	subject, dedupID string
	stored
}

func newMemStore() *memStore {
	return &memStore{seen: map[string]bool{}, changed: make(chan struct{})}
}

func (s *memStore) put(ctx context.Context, subject, dedupID string, e entry) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrTimeout, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[dedupID] {
		return nil
	}
	s.seen[dedupID] = true
	s.seq++
	s.log = append(s.log, memEntry{subject: subject, dedupID: dedupID, stored: stored{seq: s.seq, entry: e}})
	// Bound the whole log rather than each subject: this store is for tests
	// and a messenger without a bus, not for many visitors.
	if n := len(s.log) - 20*maxPerSubject; n > 0 {
		for _, m := range s.log[:n] {
			delete(s.seen, m.dedupID)
		}
		s.log = slices.Delete(s.log, 0, n)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

func (s *memStore) has(_ context.Context, subject string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.log, func(m memEntry) bool { return m.subject == subject }), nil
}

func (s *memStore) follow(ctx context.Context, subjects []string, after uint64) (<-chan stored, error) {
	out := make(chan stored)
	go func() {
		defer close(out)
		for {
			s.mu.Lock()
			var batch []stored
			for _, m := range s.log {
				if m.seq > after && slices.Contains(subjects, m.subject) {
					batch = append(batch, m.stored)
				}
			}
			changed := s.changed
			s.mu.Unlock()
			for _, m := range batch {
				select {
				case out <- m:
					after = m.seq
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
