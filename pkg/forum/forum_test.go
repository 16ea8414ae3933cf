package forum_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/forum"
)

const (
	integration = "tg_main"
	chat        = "-1001234567890"
)

// bucket is herald_channel_state on its own connection, as one messenger
// replica has it.
func bucket(t *testing.T, srv *bustest.Server) jetstream.KeyValue {
	t.Helper()
	_, js := srv.Connect()
	kv, err := js.KeyValue(t.Context(), bus.BucketChannelState)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// maker is Telegram's createForumTopic as the tests see it: it counts its
// calls and hands out thread ids.
type maker struct {
	calls atomic.Int32
	next  atomic.Int32
	err   error
	// block, if set, holds every call until it is closed.
	block chan struct{}
}

func (m *maker) create(ctx context.Context) (int, error) {
	m.calls.Add(1)
	if m.block != nil {
		select {
		case <-m.block:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if m.err != nil {
		return 0, m.err
	}
	return int(100 + m.next.Add(1)), nil
}

// TestTopicIsMadeOnce: three replicas, each with five deliveries of health
// and of finance at once, make one topic per butler, and every delivery
// gets its butler's.
func TestTopicIsMadeOnce(t *testing.T) {
	srv := bustest.RunServer(t)
	m := &maker{block: make(chan struct{})}
	var regs []*forum.Registry
	for i := range 3 {
		regs = append(regs, forum.NewRegistry(bucket(t, srv), fmt.Sprintf("messenger-%d", i)))
	}
	var wg sync.WaitGroup
	got := map[string][]int{}
	var mu sync.Mutex
	for _, r := range regs {
		for range 5 {
			for _, butler := range []string{"health", "finance"} {
				wg.Go(func() {
					thread, err := r.Topic(t.Context(), integration, chat, butler, butler, m.create)
					if err != nil {
						t.Errorf("%s: %v", butler, err)
						return
					}
					mu.Lock()
					got[butler] = append(got[butler], thread)
					mu.Unlock()
				})
			}
		}
	}
	// Let every delivery find the claims before the calls answer.
	time.Sleep(200 * time.Millisecond)
	close(m.block)
	wg.Wait()
	if n := m.calls.Load(); n != 2 {
		t.Fatalf("createForumTopic was called %d times for two butlers, want 2", n)
	}
	for butler, threads := range got {
		if len(threads) != 15 {
			t.Fatalf("%s: %d answers, want 15", butler, len(threads))
		}
		for _, th := range threads {
			if th != threads[0] {
				t.Fatalf("%s got topics %v, want one", butler, threads)
			}
		}
		owner, err := forum.Owner(t.Context(), bus.NewDirectKV(mustJS(t, srv), bus.BucketChannelState), integration, chat, threads[0])
		if err != nil || owner != butler {
			t.Fatalf("Owner of %s's topic %d = %q, %v", butler, threads[0], owner, err)
		}
	}
	if got["health"][0] == got["finance"][0] {
		t.Fatalf("health and finance share topic %d", got["health"][0])
	}
}

func mustJS(t *testing.T, srv *bustest.Server) jetstream.JetStream {
	t.Helper()
	_, js := srv.Connect()
	return js
}

// TestTopicIsRemembered: a registry started later (a restarted messenger)
// finds the topic made before, and makes none.
func TestTopicIsRemembered(t *testing.T) {
	srv := bustest.RunServer(t)
	m := &maker{}
	first, err := forum.NewRegistry(bucket(t, srv), "before").Topic(t.Context(), integration, chat, "health", "health", m.create)
	if err != nil {
		t.Fatal(err)
	}
	again, err := forum.NewRegistry(bucket(t, srv), "after").Topic(t.Context(), integration, chat, "health", "health", m.create)
	if err != nil || again != first {
		t.Fatalf("after a restart: topic %d, %v; want %d", again, err, first)
	}
	if n := m.calls.Load(); n != 1 {
		t.Fatalf("createForumTopic called %d times, want 1", n)
	}
	// Another chat, another integration: topics of their own.
	other, err := forum.NewRegistry(bucket(t, srv), "after").Topic(t.Context(), "tg_other", chat, "health", "health", m.create)
	if err != nil || other == first {
		t.Fatalf("tg_other's topic %d, %v; want a new one", other, err)
	}
}

// TestFailedMakingIsTriedAgain: a refused createForumTopic (the chat is not
// a forum) is answered as it is and leaves no claim: the next delivery asks
// Telegram again.
func TestFailedMakingIsTriedAgain(t *testing.T) {
	srv := bustest.RunServer(t)
	notForum := errors.New("Bad Request: the chat is not a forum")
	m := &maker{err: notForum}
	r := forum.NewRegistry(bucket(t, srv), "m")
	for i := range 2 {
		if _, err := r.Topic(t.Context(), integration, chat, "health", "health", m.create); !errors.Is(err, notForum) {
			t.Fatalf("try %d: %v, want Telegram's refusal", i+1, err)
		}
	}
	if n := m.calls.Load(); n != 2 {
		t.Fatalf("createForumTopic called %d times, want 2 (once per try)", n)
	}
	m.err = nil
	if th, err := r.Topic(t.Context(), integration, chat, "health", "health", m.create); err != nil || th <= 0 {
		t.Fatalf("once it is a forum: %d, %v", th, err)
	}
}

// TestClaimOfADeadMessenger: a claim another messenger left when it died is
// waited for, answered ErrBusy while it is fresh, and taken over once stale.
func TestClaimOfADeadMessenger(t *testing.T) {
	srv := bustest.RunServer(t)
	kv := bucket(t, srv)
	dead, _ := json.Marshal(map[string]any{"creating": "killed", "since": time.Now().UTC()})
	if _, err := kv.Create(t.Context(), "topic."+integration+"."+chat+".butler.health", dead); err != nil {
		t.Fatal(err)
	}
	m := &maker{}
	r := forum.NewRegistry(kv, "m")
	r.Wait, r.Stale, r.Poll = 300*time.Millisecond, time.Hour, 20*time.Millisecond
	if _, err := r.Topic(t.Context(), integration, chat, "health", "health", m.create); !errors.Is(err, forum.ErrBusy) {
		t.Fatalf("while another makes it: %v, want ErrBusy", err)
	}
	if n := m.calls.Load(); n != 0 {
		t.Fatalf("createForumTopic called %d times while another was making the topic", n)
	}
	r.Wait, r.Stale = 10*time.Second, 200*time.Millisecond
	th, err := r.Topic(t.Context(), integration, chat, "health", "health", m.create)
	if err != nil || th <= 0 || m.calls.Load() != 1 {
		t.Fatalf("taking over a stale claim: topic %d, %v, %d calls", th, err, m.calls.Load())
	}
}

// TestForget: a topic deleted in Telegram is forgotten, and the next
// delivery makes a new one; its old thread is nobody's.
func TestForget(t *testing.T) {
	srv := bustest.RunServer(t)
	m := &maker{}
	r := forum.NewRegistry(bucket(t, srv), "m")
	old, err := r.Topic(t.Context(), integration, chat, "health", "health", m.create)
	if err != nil {
		t.Fatal(err)
	}
	// Forgetting another thread than the recorded one changes nothing.
	if err := r.Forget(t.Context(), integration, chat, "health", old+1); err != nil {
		t.Fatal(err)
	}
	if th, _ := forum.NewRegistry(bucket(t, srv), "m2").Topic(t.Context(), integration, chat, "health", "health", m.create); th != old {
		t.Fatalf("after forgetting another thread: topic %d, want %d", th, old)
	}
	if err := r.Forget(t.Context(), integration, chat, "health", old); err != nil {
		t.Fatal(err)
	}
	th, err := r.Topic(t.Context(), integration, chat, "health", "health", m.create)
	if err != nil || th == old {
		t.Fatalf("after forgetting: topic %d, %v; want a new one", th, err)
	}
	if owner, err := forum.Owner(t.Context(), bucket(t, srv), integration, chat, old); err != nil || owner != "" {
		t.Fatalf("the forgotten topic is still %q's (%v)", owner, err)
	}
}

// TestKeys: what cannot be a key is refused before the bucket is asked.
func TestKeys(t *testing.T) {
	srv := bustest.RunServer(t)
	r := forum.NewRegistry(bucket(t, srv), "m")
	m := &maker{}
	for _, tc := range []struct{ name, integration, chat, butler string }{
		{"a @name chat", integration, "@mygroup", "health"},
		{"a dotted chat", integration, "-100.1", "health"},
		{"a wildcard integration", "tg_*", chat, "health"},
		{"an empty butler", integration, chat, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := r.Topic(t.Context(), tc.integration, tc.chat, tc.butler, "x", m.create); !errors.Is(err, forum.ErrKey) {
				t.Fatalf("Topic: %v, want ErrKey", err)
			}
		})
	}
	if _, err := forum.Owner(t.Context(), bucket(t, srv), integration, chat, 0); !errors.Is(err, forum.ErrKey) {
		t.Fatalf("Owner of thread 0: %v, want ErrKey", err)
	}
	if m.calls.Load() != 0 {
		t.Fatal("createForumTopic was called for a bad key")
	}
}

// TestSlowMakerIsWaitedFor: a creator whose call takes longer than Stale
// (Telegram makes it wait) renews its claim, so another replica waits for
// its topic rather than making a second.
func TestSlowMakerIsWaitedFor(t *testing.T) {
	srv := bustest.RunServer(t)
	m := &maker{block: make(chan struct{})}
	a, b := forum.NewRegistry(bucket(t, srv), "a"), forum.NewRegistry(bucket(t, srv), "b")
	for _, r := range []*forum.Registry{a, b} {
		r.Stale, r.Poll = 200*time.Millisecond, 20*time.Millisecond
	}
	first := make(chan int, 1)
	go func() {
		th, err := a.Topic(t.Context(), integration, chat, "health", "health", m.create)
		if err != nil {
			t.Error(err)
		}
		first <- th
	}()
	for m.calls.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	second := make(chan int, 1)
	go func() {
		th, err := b.Topic(t.Context(), integration, chat, "health", "health", m.create)
		if err != nil {
			t.Error(err)
		}
		second <- th
	}()
	// Several times Stale, while a's call hangs.
	time.Sleep(time.Second)
	close(m.block)
	if x, y := <-first, <-second; x != y || m.calls.Load() != 1 {
		t.Fatalf("a got topic %d, b %d, after %d calls; want one topic", x, y, m.calls.Load())
	}
}
