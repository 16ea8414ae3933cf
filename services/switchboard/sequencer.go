package switchboard

import (
	"context"
	"sync"
	"time"
)

// sequencer lets handlers run one at a time, in the order the consumer
// delivered their messages (the consumer sequence), so a switchboard hands
// each chat's messages to its butler in the order they arrived, also when a
// backlog is worked off after a restart. The worker still pulls many messages
// ahead; they wait here for their turn. (A worker with concurrency 1 would
// keep the order too, but its one-message pulls can stall for the 30 s of a
// pull request's heartbeat when a message overtakes the next pull request.)
//
// With one replica the consumer sequences it sees have no gaps. With several,
// a sequence another replica took never shows up here: the next message waits
// for it at most grace. Order across replicas is not kept; order within one is.
type sequencer struct {
	grace time.Duration

	mu   sync.Mutex
	next uint64 // the sequence whose turn it is
	busy bool
	wait map[uint64]chan struct{}
}

func newSequencer(next uint64, grace time.Duration) *sequencer {
	return &sequencer{grace: grace, next: next, wait: map[uint64]chan struct{}{}}
}

// enter waits until it is seq's turn, or ctx is done. Every successful enter
// is followed by one leave.
func (q *sequencer) enter(ctx context.Context, seq uint64) error {
	q.mu.Lock()
	if !q.busy && seq <= q.next {
		q.take(seq)
		q.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	q.wait[seq] = turn
	q.mu.Unlock()

	t := time.NewTimer(q.grace)
	defer t.Stop()
	for {
		select {
		case <-turn:
			return nil
		case <-t.C:
			// Still nobody before us: the gap is a message this replica
			// will not see.
			q.mu.Lock()
			if !q.busy && seq == q.lowest() {
				delete(q.wait, seq)
				q.take(seq)
				q.mu.Unlock()
				return nil
			}
			q.mu.Unlock()
			t.Reset(q.grace)
		case <-ctx.Done():
			q.mu.Lock()
			select {
			case <-turn: // handed the turn just now: pass it on
				q.mu.Unlock()
				q.leave()
				return ctx.Err()
			default:
			}
			delete(q.wait, seq)
			q.mu.Unlock()
			return ctx.Err()
		}
	}
}

// leave ends the current turn and hands the next to the lowest waiting
// sequence, if it is due.
func (q *sequencer) leave() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.busy = false
	if len(q.wait) == 0 {
		return
	}
	if low := q.lowest(); low <= q.next {
		turn := q.wait[low]
		delete(q.wait, low)
		q.take(low)
		close(turn)
	}
}

// take gives seq the turn; the caller holds mu. A late, lower sequence does
// not move the line back.
func (q *sequencer) take(seq uint64) {
	q.busy = true
	q.next = max(q.next, seq+1)
}

// lowest is the lowest waiting sequence; the caller holds mu and wait is not empty.
func (q *sequencer) lowest() uint64 {
	low := ^uint64(0)
	for s := range q.wait {
		low = min(low, s)
	}
	return low
}
