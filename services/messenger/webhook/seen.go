package webhook

import (
	"container/list"
	"sync"
)

// seen remembers the webhook-ids stored lately, so that a retry is answered
// at once with the first answer and a reused id with another body is
// noticed. It is bounded: beyond it, the bus's duplicate window (by native
// id) and the signature's five-minute window still stop a second copy.
type seen struct {
	mu  sync.Mutex
	max int
	ll  *list.List // of *seenEntry, most recent first
	m   map[string]*list.Element
	// busy holds the ids being stored now; the channel closes when done.
	busy map[string]chan struct{}
}

type seenEntry struct {
	id        string
	hash      [32]byte // SHA-256 of the body
	requestID string   // what the first copy was answered with
}

func newSeen(n int) *seen {
	return &seen{max: n, ll: list.New(), m: map[string]*list.Element{}, busy: map[string]chan struct{}{}}
}

func (s *seen) get(id string) (seenEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		return seenEntry{}, false
	}
	s.ll.MoveToFront(e)
	return *e.Value.(*seenEntry), true
}

func (s *seen) add(v seenEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[v.id]; ok {
		s.ll.MoveToFront(e)
		return // the first answer stands
	}
	s.m[v.id] = s.ll.PushFront(&v)
	for s.ll.Len() > s.max {
		old := s.ll.Back()
		s.ll.Remove(old)
		delete(s.m, old.Value.(*seenEntry).id)
	}
}

// begin claims id for storing: mine is true if no one else is storing it,
// else wait closes when they are done (and the id may then be seen).
func (s *seen) begin(id string) (wait <-chan struct{}, mine bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.busy[id]; ok {
		return ch, false
	}
	s.busy[id] = make(chan struct{})
	return nil, true
}

// end releases a claim of begin.
func (s *seen) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.busy[id]; ok {
		close(ch)
		delete(s.busy, id)
	}
}
