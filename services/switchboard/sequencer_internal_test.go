package switchboard

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestSequencerKeepsDeliveryOrder(t *testing.T) {
	q := newSequencer(1, time.Hour) // no gaps here: grace never ends
	if err := q.enter(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []uint64
		wg    sync.WaitGroup
	)
	// Later messages reach the sequencer first.
	for _, seq := range []uint64{5, 3, 4, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.enter(t.Context(), seq); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, seq)
			mu.Unlock()
			q.leave()
		}()
	}
	for {
		q.mu.Lock()
		n := len(q.wait)
		q.mu.Unlock()
		if n == 4 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	q.leave()
	wg.Wait()
	if !slices.Equal(order, []uint64{2, 3, 4, 5}) {
		t.Errorf("handled in order %v, want 2 3 4 5", order)
	}
}

func TestSequencerSkipsAGap(t *testing.T) {
	// Sequence 1 went to another replica; 2 must not wait for ever.
	q := newSequencer(1, 5*time.Millisecond)
	if err := q.enter(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	q.leave()
	ctx, cancel := context.WithCancel(t.Context())
	if err := q.enter(ctx, 3); err != nil {
		t.Fatal(err)
	}
	// While 3 runs, 4 waits; stopping gives it back.
	done := make(chan error, 1)
	go func() { done <- q.enter(ctx, 4) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-done; err == nil {
		t.Error("enter returned nil after its context was cancelled while another held the turn")
	}
	q.leave()
	if err := q.enter(t.Context(), 5); err != nil {
		t.Fatal(err)
	}
}
