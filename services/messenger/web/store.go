package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

// The stream that keeps the conversations.
const (
	StreamName    = bus.StreamWeb
	subjectPrefix = "herald.web."
	// Retention is how long a conversation is kept for replay.
	Retention = bus.WebRetention
	// maxPerSubject bounds one visitor's history, and so a page load's replay.
	maxPerSubject = bus.WebMaxPerVisitor
	// historyBatch is how many entries a history read asks for at once:
	// with butler messages up to 64 KiB, at most 4 MiB held per read.
	historyBatch = 64
	// historyIdle is when the server drops a history reader its messenger
	// crashed before deleting.
	historyIdle = 30 * time.Second
	// tailResets is how often the fan-out's ordered consumer is made again
	// after a failure before the tail gives up and starts over.
	tailResets = 5
)

// entry is one thing in a conversation, as stored: what the visitor wrote, a
// butler's message (markdown, rendered only when sent to the page, so a
// renderer fix applies to history too), a butler's reaction, or an edit of a
// butler's message (its new text, markdown too, and buttons).
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
	// Target is the message a reaction is on, or an edit replaces.
	Target string `json:"target,omitempty"`
	Emoji  string `json:"emoji,omitempty"`
	// Files go with a message, held in herald_files (files.go).
	Files []heldFile `json:"files,omitempty"`
	TS    string     `json:"ts"`
}

// stored is an entry with its position in the store, the page's event id,
// and the subject it is kept under.
type stored struct {
	seq     uint64
	subject string
	entry   entry
}

// store keeps conversations: JetStream in production, memory without a bus.
type store interface {
	// put appends e to subject, once per dedupID.
	put(ctx context.Context, subject, dedupID string, e entry) error
	// has reports whether subject holds anything.
	has(ctx context.Context, subject string) (bool, error)
	// get is the entry at sequence seq, if the store still holds it.
	get(ctx context.Context, seq uint64) (stored, bool, error)
	// history calls each with every entry of subjects after sequence after,
	// in order, as far as the store holds them when it is called; an error
	// from each stops it and is returned.
	history(ctx context.Context, subjects []string, after uint64, each func(stored) error) error
	// tail sends every entry of the integration's conversations stored from
	// the call on, in order, until ctx is done; the channel closes then, or
	// when the store fails.
	tail(ctx context.Context, integration string) (<-chan stored, error)
}

// jsStore keeps conversations in HERALD_WEB, which it creates on first use.
type jsStore struct {
	js  jetstream.JetStream
	log *slog.Logger

	mu     sync.Mutex
	stream jetstream.Stream
	// lost is closed when the stream turns out to be gone, so that a tail on
	// the old one starts over on the stream made again.
	lost chan struct{}
}

// streamConfig is the stream as the fleet's topology has it (herald setup
// makes it; the channel makes it too where it may, e.g. herald dev).
func streamConfig(replicas int) jetstream.StreamConfig {
	return bus.Topology{Replicas: replicas}.Stream(bus.StreamWeb)
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
	if s.lost != nil {
		close(s.lost)
		s.lost = nil
	}
	s.mu.Unlock()
}

// lostSignal is closed when the stream known now is found gone.
func (s *jsStore) lostSignal() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = make(chan struct{})
	}
	return s.lost
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

func (s *jsStore) get(ctx context.Context, seq uint64) (stored, bool, error) {
	st, err := s.ensure(ctx)
	if err != nil {
		return stored{}, false, err
	}
	m, err := st.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return stored{}, false, nil
	case err != nil:
		return stored{}, false, unavailable(ctx, "reading a web chat message", err)
	}
	var e entry
	if err := json.Unmarshal(m.Data, &e); err != nil {
		return stored{}, false, nil // skipped by the history too
	}
	return stored{seq: seq, subject: m.Subject, entry: e}, true, nil
}

// history reads through a consumer made for this one read and deleted after
// it: a page that opens or reconnects leaves nothing behind on the server, and
// the reads in flight at once are bounded by the caller.
func (s *jsStore) history(ctx context.Context, subjects []string, after uint64, each func(stored) error) error {
	if _, err := s.ensure(ctx); err != nil {
		return err
	}
	cfg := jetstream.ConsumerConfig{
		FilterSubjects: subjects,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckNonePolicy,
		MemoryStorage:  true,
		Replicas:       1,
		// Deleted below; one left behind by a crash goes once idle this long.
		InactiveThreshold: historyIdle,
	}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := s.js.CreateConsumer(ctx, StreamName, cfg)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s.forget()
		}
		return unavailable(ctx, "reading a web conversation", err)
	}
	info := cons.CachedInfo()
	defer func() {
		// Even when the page has gone: the consumer must not outlive the read.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.js.DeleteConsumer(dctx, StreamName, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			s.log.Debug("web history reader not deleted; the server drops it when idle", "err", err)
		}
	}()
	// What was pending when the consumer was made is the history; what is
	// stored later reaches the page through the fan-out.
	for left := info.NumPending; left > 0; {
		batch, err := cons.FetchNoWait(int(min(left, historyBatch)))
		if err != nil {
			return unavailable(ctx, "reading a web conversation", err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			left--
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			if meta.NumPending == 0 {
				left = 0 // some of what was pending has expired meanwhile
			}
			var e entry
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				s.log.Warn("undecodable web chat entry skipped", "subject", m.Subject(), "seq", meta.Sequence.Stream, "err", err)
				continue
			}
			if err := each(stored{seq: meta.Sequence.Stream, subject: m.Subject(), entry: e}); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil {
			return unavailable(ctx, "reading a web conversation", err)
		}
		if got == 0 {
			break // the rest expired before it was read
		}
	}
	return nil
}

// tail follows the integration's subjects with one ordered consumer, starting
// after the last message stored now. It starts at a sequence rather than at
// "new": if the consumer is made again before its first message, it resumes
// from there instead of skipping what came meanwhile.
func (s *jsStore) tail(ctx context.Context, integration string) (<-chan stored, error) {
	st, err := s.ensure(ctx)
	if err != nil {
		return nil, err
	}
	lost := s.lostSignal()
	info, err := st.Info(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s.forget()
		}
		return nil, unavailable(ctx, "following the web chat stream "+StreamName, err)
	}
	cons, err := s.js.OrderedConsumer(ctx, StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{subjectPrefix + integration + ".>"},
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       info.State.LastSeq + 1,
		InactiveThreshold: time.Minute, // a crashed messenger's consumer goes after this
		// Give up after a few failed attempts to make the consumer again,
		// so an outage ends the tail (the pages reconnect and catch up)
		// instead of blocking where ctx cannot reach.
		MaxResetAttempts: tailResets,
	})
	if err != nil {
		return nil, unavailable(ctx, "following the web chat stream "+StreamName, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, unavailable(ctx, "following the web chat stream "+StreamName, err)
	}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-lost:
		case <-stopped:
		}
		it.Stop()
	}()
	out := make(chan stored)
	go func() {
		defer close(out)
		defer close(stopped)
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("web chat feed stopped; open pages reconnect", "err", err)
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
			case out <- stored{seq: meta.Sequence.Stream, subject: m.Subject(), entry: e}:
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
	dedupID string
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
	s.log = append(s.log, memEntry{dedupID: dedupID, stored: stored{seq: s.seq, subject: subject, entry: e}})
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

func (s *memStore) get(_ context.Context, seq uint64) (stored, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.log {
		if m.seq == seq {
			return m.stored, true, nil
		}
	}
	return stored{}, false, nil
}

func (s *memStore) history(ctx context.Context, subjects []string, after uint64, each func(stored) error) error {
	s.mu.Lock()
	var batch []stored
	for _, m := range s.log {
		if m.seq > after && slices.Contains(subjects, m.subject) {
			batch = append(batch, m.stored)
		}
	}
	s.mu.Unlock()
	for _, m := range batch {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", envelope.ErrTimeout, err)
		}
		if err := each(m); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) tail(ctx context.Context, integration string) (<-chan stored, error) {
	prefix := subjectPrefix + integration + "."
	s.mu.Lock()
	after := s.seq
	s.mu.Unlock()
	out := make(chan stored)
	go func() {
		defer close(out)
		for {
			s.mu.Lock()
			var batch []stored
			for _, m := range s.log {
				if m.seq > after && strings.HasPrefix(m.subject, prefix) {
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
