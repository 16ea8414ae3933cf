package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
)

// runWorker runs w until the test ends (or stop is called).
func runWorker(t *testing.T, js jetstream.JetStream, w *bus.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, js) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestRetryableErrorsAreRetriedThenDeadLettered(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	var tries atomic.Int32
	var gaveUp atomic.Value
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", MaxDeliver: 3, MinBackOff: 10 * time.Millisecond,
		Handle: func(context.Context, jetstream.Msg) error {
			tries.Add(1)
			return fmt.Errorf("%w: provider down", envelope.ErrTargetUnavailable)
		},
		GiveUp: func(_ context.Context, _ jetstream.Msg, err error) { gaveUp.Store(err) },
	})
	if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte("x"), "k1", nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeadLetter) == 1 }, "the dead letter")
	if n := tries.Load(); n != 3 {
		t.Fatalf("tried %d times, want MaxDeliver = 3", n)
	}
	if err, _ := gaveUp.Load().(error); !errors.Is(err, envelope.ErrTargetUnavailable) {
		t.Fatalf("GiveUp got %v", err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeliver) == 0 }, "the work queue to be empty")

	s, _ := js.Stream(t.Context(), bus.StreamDeadLetter)
	m, err := s.GetLastMsgForSubject(t.Context(), bus.DeadSubject(bus.StreamDeliver, bus.DeliverSubject("messenger")))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(bus.HeaderErrorClass) != "target_unavailable" || m.Header.Get(bus.HeaderDeliveries) != "3" || m.Header.Get(bus.HeaderKey) != "k1" {
		t.Fatalf("dead letter headers %v", m.Header)
	}
}

func TestPermanentErrorsAreNotRetried(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	var tries atomic.Int32
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test",
		Handle: func(context.Context, jetstream.Msg) error {
			tries.Add(1)
			return fmt.Errorf("%w: chat not found", envelope.ErrNotFound)
		},
	})
	if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte("x"), "k2", nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeadLetter) == 1 }, "the dead letter")
	if n := tries.Load(); n != 1 {
		t.Fatalf("tried %d times, want 1", n)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	var (
		tries         atomic.Int32
		mu            sync.Mutex
		first, second time.Time
	)
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", MinBackOff: time.Millisecond,
		Handle: func(context.Context, jetstream.Msg) error {
			mu.Lock()
			defer mu.Unlock()
			if tries.Add(1) == 1 {
				first = time.Now()
				return &envelope.RetryAfterError{Wait: 700 * time.Millisecond}
			}
			second = time.Now()
			return nil
		},
	})
	if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte("x"), "k3", nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return tries.Load() == 2 }, "the retry")
	mu.Lock()
	defer mu.Unlock()
	// Behaviour, not timing: the retry did not come on the 1 ms backoff.
	if second.Sub(first) < 500*time.Millisecond {
		t.Fatalf("retried after %s, before the provider's retry-after", second.Sub(first))
	}
}

// TestStopHandsWorkBack: stopping a worker mid-message lets the message finish
// or go back to the stream, never lost.
func TestStopHandsWorkBack(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	started := make(chan struct{}, 1)
	stop := runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", DrainTimeout: 200 * time.Millisecond,
		Handle: func(ctx context.Context, _ jetstream.Msg) error {
			started <- struct{}{}
			<-ctx.Done() // a handler that cannot finish in time
			return ctx.Err()
		},
	})
	if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte("x"), "k4", nil); err != nil {
		t.Fatal(err)
	}
	<-started
	stop()

	var handled atomic.Int32
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test",
		Handle: func(context.Context, jetstream.Msg) error { handled.Add(1); return nil },
	})
	testkit.Eventually(t, 15*time.Second, func() bool { return handled.Load() == 1 }, "the message to come back")
	if n := bustest.Msgs(t, js, bus.StreamDeadLetter); n != 0 {
		t.Fatalf("%d dead letters; a stop is not a failure", n)
	}
}

func TestDuplicatePublishIsDropped(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	for i, want := range []bool{false, true, true} {
		ack, err := bus.Publish(t.Context(), js, bus.RouteSubject("health"), []byte("same"), "key", nil)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Duplicate != want {
			t.Fatalf("publish %d: duplicate = %v", i, ack.Duplicate)
		}
	}
	if n := bustest.Msgs(t, js, bus.StreamRoute); n != 1 {
		t.Fatalf("%d messages stored", n)
	}
}

func TestEnsureTopologyUpdatesOnlyWhatChanged(t *testing.T) {
	srv := bustest.RunServer(t) // creates the topology with 1 replica
	_, js := srv.Connect()
	s, _ := js.Stream(t.Context(), bus.StreamRoute)
	before := s.CachedInfo().Created
	if err := bus.EnsureTopology(t.Context(), js, bus.Topology{Replicas: 1, Repair: true}); err != nil {
		t.Fatal(err)
	}
	// A stream changed by hand is put back to Herald's settings.
	cfg := s.CachedInfo().Config
	cfg.MaxAge = time.Hour
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(t.Context(), js, bus.Topology{Replicas: 1, Repair: true}); err != nil {
		t.Fatal(err)
	}
	s, _ = js.Stream(t.Context(), bus.StreamRoute)
	if got := s.CachedInfo(); got.Config.MaxAge != 7*24*time.Hour || !got.Created.Equal(before) {
		t.Fatalf("stream max age %s created %s, want 7 days on the same stream", got.Config.MaxAge, got.Created)
	}
}

// TestRetriesLastAsLongAsTheHorizon: a retryable failure is tried again and
// again, backing off, until RetryFor has passed since the message was stored;
// then it is given up with its cause and dead-lettered, not before.
func TestRetriesLastAsLongAsTheHorizon(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	var tries atomic.Int32
	var gaveUp atomic.Value
	const horizon = 1500 * time.Millisecond
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", RetryFor: horizon, MinBackOff: 20 * time.Millisecond, MaxBackOff: 200 * time.Millisecond,
		Handle: func(context.Context, jetstream.Msg) error {
			tries.Add(1)
			return fmt.Errorf("%w: provider down", envelope.ErrTargetUnavailable)
		},
		GiveUp: func(_ context.Context, _ jetstream.Msg, err error) { gaveUp.Store(err) },
	})
	published := time.Now()
	if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte("x"), "k-horizon", nil); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeadLetter) == 1 }, "the dead letter")
	if since := time.Since(published); since < horizon {
		t.Fatalf("dead-lettered %s after publishing, before the %s horizon", since, horizon)
	}
	// Six tries was the old fixed limit; the horizon allows many more.
	if n := tries.Load(); n <= 6 {
		t.Fatalf("tried %d times within the horizon, want more than 6", n)
	}
	err, _ := gaveUp.Load().(error)
	if !errors.Is(err, bus.ErrHorizon) || envelope.ClassOf(err) != "target_unavailable" {
		t.Fatalf("GiveUp got %v (class %s), want the horizon with the provider's class", err, envelope.ClassOf(err))
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeliver) == 0 }, "the work queue to be empty")
}

// TestCrashedPastTheHorizonIsDeadLettered: a message whose handler never
// finishes (its process dies on every try) is not left in the work queue once
// its horizon has passed: the next delivery gives it up without trying.
func TestCrashedPastTheHorizonIsDeadLettered(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte("x"), "k-crash", nil); err != nil {
		t.Fatal(err)
	}
	// A "crashed" consumer: takes the message and never acks it.
	cons, err := js.CreateOrUpdateConsumer(t.Context(), bus.StreamDeliver, jetstream.ConsumerConfig{Durable: "test", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 300 * time.Millisecond, MaxDeliver: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // past RetryFor+AckWait below
	var handled atomic.Int32
	var gaveUp atomic.Value
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", RetryFor: 50 * time.Millisecond, AckWait: 300 * time.Millisecond,
		Handle: func(context.Context, jetstream.Msg) error { handled.Add(1); return nil },
		GiveUp: func(_ context.Context, _ jetstream.Msg, err error) { gaveUp.Store(err) },
	})
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeadLetter) == 1 }, "the dead letter")
	if n := handled.Load(); n != 0 {
		t.Fatalf("handled %d times past the horizon", n)
	}
	if err, _ := gaveUp.Load().(error); !errors.Is(err, bus.ErrHorizon) {
		t.Fatalf("GiveUp got %v", err)
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeliver) == 0 }, "the work queue to be empty")
}

// TestPanicIsAFailureNotACrash: a handler that panics fails its message (dead
// letter, internal_error) and the worker goes on with the next one.
func TestPanicIsAFailureNotACrash(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	var ok atomic.Int32
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", Concurrency: 1,
		Handle: func(_ context.Context, m jetstream.Msg) error {
			if string(m.Data()) == "poison" {
				panic("boom")
			}
			ok.Add(1)
			return nil
		},
	})
	for i, data := range []string{"poison", "fine"} {
		if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte(data), fmt.Sprint("k-panic-", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeadLetter) == 1 && ok.Load() == 1 }, "the poison dead-lettered and the next message handled")
	s, _ := js.Stream(t.Context(), bus.StreamDeadLetter)
	m, err := s.GetLastMsgForSubject(t.Context(), bus.DeadSubject(bus.StreamDeliver, bus.DeliverSubject("messenger")))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(bus.HeaderErrorClass) != "internal_error" {
		t.Fatalf("dead letter class %q", m.Header.Get(bus.HeaderErrorClass))
	}
}

// TestEnsureTopologyRepairsTampering: a stream or bucket changed to copy its
// messages elsewhere (republish, sources) is put back, as the security issue's
// attacker left HERALD_INBOX and the buckets.
func TestEnsureTopologyRepairsTampering(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	ctx := t.Context()
	inbox, _ := js.Stream(ctx, bus.StreamInbox)
	cfg := inbox.CachedInfo().Config
	cfg.RePublish = &jetstream.RePublish{Source: "herald.inbox.>", Destination: "herald.reply.health.leak.>"}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.Stream(ctx, "KV_"+bus.BucketApprovals)
	kcfg := kv.CachedInfo().Config
	kcfg.RePublish = &jetstream.RePublish{Source: ">", Destination: "herald.reply.health.keys.>"}
	if _, err := js.UpdateStream(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LEAK", Subjects: []string{"leak.>"}}); err != nil {
		t.Fatal(err)
	}
	audit, _ := js.Stream(ctx, bus.StreamAudit)
	acfg := audit.CachedInfo().Config
	acfg.Sources = []*jetstream.StreamSource{{Name: "LEAK"}}
	if _, err := js.UpdateStream(ctx, acfg); err != nil {
		t.Fatal(err)
	}

	// A service only checks: it says so and changes nothing.
	if err := bus.EnsureTopology(ctx, js, bus.Topology{Replicas: 1, Uses: &bus.SwitchboardUses}); err != nil {
		t.Fatal(err)
	}
	if s, _ := js.Stream(ctx, bus.StreamInbox); s.CachedInfo().Config.RePublish == nil {
		t.Fatal("a service's check changed a stream; only herald setup repairs")
	}
	if err := bus.EnsureTopology(ctx, js, bus.Topology{Replicas: 1, Repair: true}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bus.StreamInbox, "KV_" + bus.BucketApprovals, bus.StreamAudit} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; c.RePublish != nil || len(c.Sources) > 0 {
			t.Errorf("%s still republishes %+v or sources %v", name, c.RePublish, c.Sources)
		}
	}
}

// TestLongHandlerKeepsItsMessage: a handler that works for several AckWaits
// (a slow provider) is not handed the same message again meanwhile.
func TestLongHandlerKeepsItsMessage(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	var calls atomic.Int32
	done := make(chan struct{})
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", AckWait: 300 * time.Millisecond,
		Handle: func(context.Context, jetstream.Msg) error {
			if calls.Add(1) == 1 {
				time.Sleep(1200 * time.Millisecond)
				close(done)
			}
			return nil
		},
	})
	if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte("x"), "k-long", nil); err != nil {
		t.Fatal(err)
	}
	<-done
	time.Sleep(500 * time.Millisecond) // a redelivery would have come by now
	if n := calls.Load(); n != 1 {
		t.Fatalf("handled %d times, want once", n)
	}
}

// TestWaitingMessageKeptInProgress: a worker that takes one message at a
// time (the switchboard's inbound) holds the next while the one before is
// handled for several AckWaits; the next is not handed out again meanwhile,
// so nothing is handled twice.
func TestWaitingMessageKeptInProgress(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", AckWait: 300 * time.Millisecond, Concurrency: 1,
		Handle: func(_ context.Context, m jetstream.Msg) error {
			mu.Lock()
			calls[string(m.Data())]++
			n := len(calls)
			mu.Unlock()
			switch string(m.Data()) {
			case "first":
				time.Sleep(1200 * time.Millisecond)
			case "second":
				if n == 2 {
					close(done)
				}
			}
			return nil
		},
	})
	for _, k := range []string{"first", "second"} {
		if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte(k), "k-"+k, nil); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	time.Sleep(500 * time.Millisecond) // a redelivery would have come by now
	mu.Lock()
	defer mu.Unlock()
	if calls["first"] != 1 || calls["second"] != 1 {
		t.Fatalf("handled %v, want each once", calls)
	}
}

// Acks of messages handled one at a time wait a moment to go out together
// (an emptied work queue costs nats-server a block file each time); a stop
// right after the work must still send them, or every one of those messages
// would be handled again by the next worker.
func TestStopRightAfterWorkSendsItsAcks(t *testing.T) {
	srv := bustest.RunServer(t)
	_, js := srv.Connect()
	// The worker has a connection of its own, closed as soon as it stops, as
	// a process closes its connection when its services have stopped.
	wnc, wjs := srv.Connect()
	var handled atomic.Int32
	stop := runWorker(t, wjs, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", AckWait: time.Minute,
		Handle: func(context.Context, jetstream.Msg) error { handled.Add(1); return nil },
	})
	const n = 20
	for i := range n {
		if _, err := bus.Publish(t.Context(), js, bus.DeliverSubject("messenger"), []byte("x"), fmt.Sprintf("k%d", i), nil); err != nil {
			t.Fatal(err)
		}
		want := int32(i + 1)
		testkit.Eventually(t, 15*time.Second, func() bool { return handled.Load() == want }, "the message to be handled")
	}
	stop()
	if err := wnc.Flush(); err != nil {
		t.Fatal(err)
	}
	wnc.Close()
	// nats-server applies acks in the background: wait for them, not for
	// acks sent after the stop, which the closed connection cannot carry.
	testkit.Eventually(t, 15*time.Second, func() bool { return bustest.Msgs(t, js, bus.StreamDeliver) == 0 }, "the handled messages to leave the work queue")
	var again atomic.Int32
	runWorker(t, js, &bus.Worker{
		Stream: bus.StreamDeliver, Durable: "test", AckWait: time.Minute,
		Handle: func(context.Context, jetstream.Msg) error { again.Add(1); return nil },
	})
	time.Sleep(300 * time.Millisecond)
	if k := again.Load(); k != 0 {
		t.Fatalf("the next worker handled %d messages again", k)
	}
}

// TestBindingAgainChangesNothing: herald dev and herald setup check every
// durable consumer of the fleet at each start, and each butler and worker
// binds its own again; a consumer that already has Herald's settings is used
// as it is, with no create or update request (each one rewrites the
// consumer's files: 1,000 butlers restarted paid for 2,000 of them).
func TestBindingAgainChangesNothing(t *testing.T) {
	srv := bustest.RunServer(t)
	nc, js := srv.Connect()
	creates, err := nc.SubscribeSync("$JS.API.CONSUMER.CREATE.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	topology := bus.Topology{Replicas: 1, Repair: true, Butlers: []string{"alpha", "beta"}}
	for range 2 {
		if err := bus.EnsureTopology(t.Context(), js, topology); err != nil {
			t.Fatal(err)
		}
	}
	// A butler and the switchboard bind theirs as they start.
	for stream, want := range map[string]jetstream.ConsumerConfig{
		bus.StreamInbox: bus.InboxConsumer("alpha"),
		bus.StreamRoute: bus.WorkConsumer(bus.ConsumerSwitchboard, bus.DefaultConcurrency, bus.AckWait, 0),
	} {
		if _, err := bus.BindConsumer(t.Context(), js, stream, want, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var made []string
	for {
		m, err := creates.NextMsg(200 * time.Millisecond)
		if err != nil {
			break
		}
		made = append(made, m.Subject)
	}
	// The first EnsureTopology made the workers' consumers (bustest made the
	// streams, not the consumers) and the two inboxes; nothing after it.
	slices.Sort(made)
	if n := len(slices.Compact(slices.Clone(made))); n != len(made) {
		t.Errorf("%d create or update requests for %d consumers; a consumer with Herald's settings was changed again:\n%s", len(made), n, strings.Join(made, "\n"))
	}
	for _, inbox := range []string{bus.ConsumerInbox("alpha"), bus.ConsumerInbox("beta")} {
		if !slices.ContainsFunc(made, func(s string) bool { return strings.Contains(s, "."+inbox+".") }) {
			t.Errorf("no create request for %s seen; the test watched the wrong subject:\n%s", inbox, strings.Join(made, "\n"))
		}
	}
}
