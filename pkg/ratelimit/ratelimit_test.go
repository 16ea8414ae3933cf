package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/ratelimit"
	"github.com/heraldhq/herald/pkg/testkit"
)

const scope = "telegram.123456"

// t0 is when every test's clock starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// botInterval is the spacing of 30 messages a second, rounded up.
const botInterval = (time.Second + 29) / 30

// newClock is a fake clock for the limiters of a test, from t0.
func newClock() *testkit.Clock { return testkit.NewClock(t0) }

var bucketSeq atomic.Int64

// newBucket creates a bucket of the test's own, and returns its name and
// its handle on js.
func newBucket(t *testing.T, js jetstream.JetStream) (string, jetstream.KeyValue) {
	t.Helper()
	name := fmt.Sprintf("ratelimit_test_%d", bucketSeq.Add(1))
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: name, History: 1})
	if err != nil {
		t.Fatalf("creating bucket: %v", err)
	}
	return name, kv
}

// openBucket is another replica's handle on the bucket name.
func openBucket(t *testing.T, s *bustest.Server, name string) jetstream.KeyValue {
	t.Helper()
	_, js := s.Connect()
	kv, err := js.KeyValue(t.Context(), name)
	if err != nil {
		t.Fatalf("opening bucket: %v", err)
	}
	return kv
}

// rig is a test's own bucket on a server of its own, and the fake clock of
// the limiters on it.
type rig struct {
	t     *testing.T
	s     *bustest.Server
	js    jetstream.JetStream
	name  string
	kv    jetstream.KeyValue
	clock *testkit.Clock
}

func newRig(t *testing.T) *rig {
	t.Helper()
	s := bustest.RunServer(t)
	_, js := s.Connect()
	name, kv := newBucket(t, js)
	return &rig{t: t, s: s, js: js, name: name, kv: kv, clock: newClock()}
}

// limiter is a limiter with limits l on the rig's bucket and clock.
func (r *rig) limiter(l ratelimit.Limits) *ratelimit.Limiter { return newLimiter(r.kv, l, r.clock) }

// replica is another replica's limiter: the same, on a connection of its own.
func (r *rig) replica(l ratelimit.Limits) *ratelimit.Limiter {
	return newLimiter(openBucket(r.t, r.s, r.name), l, r.clock)
}

func newLimiter(kv jetstream.KeyValue, l ratelimit.Limits, c *testkit.Clock) *ratelimit.Limiter {
	lim := ratelimit.New(kv, scope, l)
	ratelimit.SetClock(lim, c.Now, c.Sleep)
	return lim
}

// offsets are times as durations from t0.
func offsets(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(t0)
	}
	return out
}

// mostInWindow is the largest number of times within any window of length w
// (sorted ts).
func mostInWindow(ts []time.Time, w time.Duration) int {
	most, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

func TestSchedule(t *testing.T) {
	s := bustest.RunServer(t)
	_, js := s.Connect()

	type call struct {
		chat  string
		group bool
		want  time.Duration // from t0
	}
	manyChats := func(n int) []call {
		var calls []call
		for i := range n {
			calls = append(calls, call{chat: fmt.Sprint(i), want: time.Duration(i) * botInterval})
		}
		return calls
	}
	perChat := ratelimit.Rate{N: 1, Per: time.Second, Burst: 3}
	perGroup := ratelimit.Rate{N: 20, Per: time.Minute}
	perBot := ratelimit.Rate{N: 30, Per: time.Second}

	tests := []struct {
		name   string
		limits ratelimit.Limits
		calls  []call
	}{
		{
			name:   "per chat: a burst, then one a second",
			limits: ratelimit.Limits{PerChat: perChat},
			calls: []call{
				{chat: "a", want: 0}, {chat: "a", want: 0}, {chat: "a", want: 0},
				{chat: "a", want: time.Second}, {chat: "a", want: 2 * time.Second},
			},
		},
		{
			name:   "per chat: each chat has its own",
			limits: ratelimit.Limits{PerChat: ratelimit.Rate{N: 1, Per: time.Second}},
			calls: []call{
				{chat: "a", want: 0}, {chat: "b", want: 0},
				{chat: "a", want: time.Second}, {chat: "b", want: time.Second},
			},
		},
		{
			name:   "per bot: 30 a second across many chats",
			limits: ratelimit.Limits{PerChat: perChat, PerBot: perBot},
			calls:  manyChats(61),
		},
		{
			name:   "per bot: a burst, then evenly",
			limits: ratelimit.Limits{PerBot: ratelimit.Rate{N: 10, Per: time.Second, Burst: 5}},
			calls: []call{
				{want: 0}, {want: 0}, {want: 0}, {want: 0}, {want: 0},
				{want: 100 * time.Millisecond}, {want: 200 * time.Millisecond},
			},
		},
		{
			name:   "per group: 20 a minute, on top of per chat",
			limits: ratelimit.Limits{PerChat: perChat, PerGroup: perGroup},
			calls: []call{
				{chat: "g", group: true, want: 0},
				{chat: "g", group: true, want: 3 * time.Second},
				{chat: "p", want: 0},
				{chat: "g", group: true, want: 6 * time.Second},
				{chat: "p", want: 0},
			},
		},
		{
			name:   "a chat's later turn does not hold up other chats",
			limits: ratelimit.Limits{PerChat: perChat, PerGroup: perGroup, PerBot: perBot},
			calls: []call{
				{chat: "g", group: true, want: 0},
				{chat: "g", group: true, want: 3 * time.Second},
				{chat: "g", group: true, want: 6 * time.Second},
				{chat: "p", want: botInterval},
				{chat: "q", want: 2 * botInterval},
			},
		},
		{
			name:   "telegram defaults",
			limits: ratelimit.TelegramDefaults(),
			calls: []call{
				{chat: "-100", group: true, want: 0},
				{chat: "-100", group: true, want: 3 * time.Second},
				{chat: "7", want: botInterval},
				{chat: "7", want: 2 * botInterval},
				{chat: "7", want: 3 * botInterval},
				{chat: "7", want: time.Second + botInterval},
			},
		},
		{
			name:   "no limits",
			limits: ratelimit.Limits{},
			calls:  []call{{chat: "a"}, {chat: "a"}, {chat: "a", group: true}, {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, kv := newBucket(t, js)
			l := newLimiter(kv, tt.limits, newClock())
			var got, want []time.Duration
			for _, c := range tt.calls {
				at, err := ratelimit.Reserve(l, t.Context(), c.chat, c.group)
				if err != nil {
					t.Fatalf("Reserve(%q): %v", c.chat, err)
				}
				got = append(got, at.Sub(t0))
				want = append(want, c.want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("reserved (from t0)\n got %v\nwant %v", got, want)
			}
		})
	}
}

// A 429 seen by one replica holds the sends of the others.
func TestPauseAcrossReplicas(t *testing.T) {
	s := bustest.RunServer(t)
	_, js := s.Connect()

	type pause struct {
		chat  string
		until time.Duration // from t0
	}
	tests := []struct {
		name   string
		pauses []pause // by replica A
		chat   string  // replica B waits for it
		want   time.Duration
	}{
		{name: "account pause holds every chat", pauses: []pause{{"", 5 * time.Second}}, chat: "42", want: 5 * time.Second},
		{name: "account pause holds calls to no chat", pauses: []pause{{"", 5 * time.Second}}, chat: "", want: 5 * time.Second},
		{name: "chat pause holds that chat", pauses: []pause{{"42", 5 * time.Second}}, chat: "42", want: 5 * time.Second},
		{name: "chat pause leaves other chats", pauses: []pause{{"42", 5 * time.Second}}, chat: "43", want: 0},
		{name: "a shorter pause does not shorten a longer one", pauses: []pause{{"", 8 * time.Second}, {"", 5 * time.Second}}, chat: "42", want: 8 * time.Second},
		{name: "the later of account and chat pause", pauses: []pause{{"", 5 * time.Second}, {"42", 8 * time.Second}}, chat: "42", want: 8 * time.Second},
		{name: "a pause already over holds nothing", pauses: []pause{{"", -time.Second}}, chat: "42", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, kv := newBucket(t, js)
			c := newClock()
			a := newLimiter(kv, ratelimit.Limits{}, c)
			b := newLimiter(openBucket(t, s, name), ratelimit.Limits{}, c)
			for _, p := range tt.pauses {
				if err := a.Pause(t.Context(), p.chat, t0.Add(p.until)); err != nil {
					t.Fatalf("Pause: %v", err)
				}
			}

			if err := b.Wait(t.Context(), tt.chat, false); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if got := slices.Concat([]time.Duration{0}, c.Slept()); got[len(got)-1] != tt.want {
				t.Errorf("replica B slept %v, want %v", got[1:], tt.want)
			}

			// Once the pause is over, nothing holds the chat.
			c.Advance(tt.want)
			if err := b.Wait(t.Context(), tt.chat, false); err != nil {
				t.Fatalf("Wait after the pause: %v", err)
			}
			if got := c.Slept(); len(got) != 0 {
				t.Errorf("after the pause replica B slept %v, want no sleep", got)
			}
		})
	}
}

// A chat paused by one replica queues its messages behind the pause without
// holding up the bot's other chats on another replica.
func TestPausedChatDoesNotHoldUpOthers(t *testing.T) {
	r := newRig(t)
	a, b := r.limiter(ratelimit.TelegramDefaults()), r.replica(ratelimit.TelegramDefaults())
	if err := a.Pause(t.Context(), "42", t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for _, chat := range []string{"42", "42", "43", "44"} {
		at, err := ratelimit.Reserve(b, t.Context(), chat, false)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, at.Sub(t0))
	}
	want := []time.Duration{30 * time.Second, 30*time.Second + botInterval, 0, botInterval}
	if !slices.Equal(got, want) {
		t.Errorf("reserved (from t0)\n got %v\nwant %v", got, want)
	}
}

// Two replicas reserving at once hand out each slot once: what they reserved
// together keeps the limit.
func TestReplicasNeverExceedLimit(t *testing.T) {
	s := bustest.RunServer(t)
	_, js := s.Connect()

	const replicas, workers, calls = 2, 4, 6
	const n = replicas * workers * calls
	tests := []struct {
		name   string
		limits ratelimit.Limits
		chat   func(i int) string
		group  bool
		window time.Duration
		most   int // in any window
		want   func(k int) time.Duration
	}{
		{
			name:   "one chat",
			limits: ratelimit.Limits{PerChat: ratelimit.Rate{N: 1, Per: time.Second, Burst: 3}},
			chat:   func(int) string { return "a" },
			window: time.Second, most: 3,
			want: func(k int) time.Duration { return time.Duration(max(k-2, 0)) * time.Second },
		},
		{
			name:   "one group",
			limits: ratelimit.TelegramDefaults(),
			chat:   func(int) string { return "-100" },
			group:  true,
			window: time.Minute, most: 20,
			want: func(k int) time.Duration { return time.Duration(k) * 3 * time.Second },
		},
		{
			name:   "many chats",
			limits: ratelimit.TelegramDefaults(),
			chat:   func(i int) string { return fmt.Sprint(i) },
			window: time.Second, most: 30,
			want: func(k int) time.Duration { return time.Duration(k) * botInterval },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, kv := newBucket(t, js)
			c := newClock()
			var (
				mu       sync.Mutex
				reserved []time.Time
				wg       sync.WaitGroup
			)
			for r := range replicas {
				if r > 0 {
					kv = openBucket(t, s, name)
				}
				l := newLimiter(kv, tt.limits, c)
				for w := range workers {
					wg.Go(func() {
						for i := range calls {
							at, err := ratelimit.Reserve(l, t.Context(), tt.chat((r*workers+w)*calls+i), tt.group)
							if err != nil {
								t.Errorf("Reserve: %v", err)
								return
							}
							mu.Lock()
							reserved = append(reserved, at)
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()

			slices.SortFunc(reserved, time.Time.Compare)
			if got := mostInWindow(reserved, tt.window); got > tt.most {
				t.Errorf("%d reserved within %s, want at most %d", got, tt.window, tt.most)
			}
			var want []time.Duration
			for k := range n {
				want = append(want, tt.want(k))
			}
			if got := offsets(reserved); !slices.Equal(got, want) {
				t.Errorf("reserved (from t0)\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestWaitCancelled(t *testing.T) {
	s := bustest.RunServer(t)
	_, js := s.Connect()
	perChat := ratelimit.Limits{PerChat: ratelimit.Rate{N: 1, Per: time.Second}}

	t.Run("before it reserves", func(t *testing.T) {
		_, kv := newBucket(t, js)
		l := newLimiter(kv, perChat, newClock())
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := l.Wait(ctx, "a", false); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want %v", err, context.Canceled)
		}
		// It took no slot.
		at, err := ratelimit.Reserve(l, t.Context(), "a", false)
		if err != nil || !at.Equal(t0) {
			t.Errorf("next Reserve = %v, %v; want t0, nil", at.Sub(t0), err)
		}
	})

	t.Run("while it sleeps", func(t *testing.T) {
		_, kv := newBucket(t, js)
		c := newClock()
		l := ratelimit.New(kv, scope, perChat)
		ratelimit.SetClock(l, c.Now, nil) // the real sleep
		if err := l.Pause(t.Context(), "", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		w, err := kv.Watch(t.Context(), ratelimit.Key(scope), jetstream.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = w.Stop() }()

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- l.Wait(ctx, "a", false) }()
		// Its reservation is written before it sleeps.
		select {
		case <-w.Updates():
		case err := <-done:
			t.Fatalf("Wait returned %v before its pause was over", err)
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Wait = %v, want %v", err, context.Canceled)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Wait did not return after its context was cancelled")
		}
	})
}

// When the bucket cannot be reached, sends are not held up: limits and
// pauses hold in the process, the caller is told once per outage window, and
// what was kept locally reaches the bucket when it is back.
func TestBucketUnreachable(t *testing.T) {
	r := newRig(t)
	a, c := r.limiter(ratelimit.Limits{PerChat: ratelimit.Rate{N: 1, Per: time.Second}}), r.clock
	ctx := t.Context()

	wait := func(chat string, wantErr error, wantSleep time.Duration) {
		t.Helper()
		err := a.Wait(ctx, chat, false)
		if !errors.Is(err, wantErr) || (wantErr == nil && err != nil) {
			t.Fatalf("Wait(%q) = %v, want %v", chat, err, wantErr)
		}
		// The fake clock moves on while Wait sleeps: now is when it woke.
		if got := c.Now(); !got.Equal(t0.Add(wantSleep)) {
			t.Fatalf("Wait(%q) slept until %v, want %v (from t0)", chat, got.Sub(t0), wantSleep)
		}
	}

	if err := a.Pause(ctx, "", t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	wait("a", nil, 2*time.Second)

	if err := r.js.DeleteKeyValue(ctx, r.name); err != nil {
		t.Fatal(err)
	}
	// The pause and the chat's turn known before the outage still hold.
	wait("a", ratelimit.ErrNotShared, 3*time.Second)
	// Within the outage window, no more errors.
	wait("a", nil, 4*time.Second)
	if err := a.Pause(ctx, "", t0.Add(10*time.Second)); !errors.Is(err, ratelimit.ErrNotShared) {
		t.Fatalf("Pause during the outage = %v, want %v", err, ratelimit.ErrNotShared)
	}
	wait("b", nil, 10*time.Second)

	// The bucket is back, and the outage window over.
	if _, err := r.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: r.name, History: 1}); err != nil {
		t.Fatal(err)
	}
	// The outage window (5 s from the failure at 2 s) is over by now.
	wait("a", nil, 10*time.Second)
	// Another replica sees the pause kept during the outage.
	b := r.replica(ratelimit.Limits{})
	if at, err := ratelimit.Reserve(b, ctx, "c", false); err != nil || !at.Equal(t0.Add(10*time.Second)) {
		t.Errorf("other replica's Reserve = %v, %v; want 10s from t0, nil", at.Sub(t0), err)
	}
}

// The key holds only what is still ahead, however many chats were sent to.
func TestStateStaysSmall(t *testing.T) {
	r := newRig(t)
	l := r.limiter(ratelimit.TelegramDefaults())
	for i := range 100 {
		if _, err := ratelimit.Reserve(l, t.Context(), fmt.Sprint(i), i%2 == 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Pause(t.Context(), "paused", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(10 * time.Second)
	if _, err := ratelimit.Reserve(l, t.Context(), "last", false); err != nil {
		t.Fatal(err)
	}

	e, err := r.kv.Get(t.Context(), ratelimit.Key(scope))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Bot   struct{ Slots []time.Time }
		Chats map[string]json.RawMessage
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		t.Fatalf("value %s: %v", e.Value(), err)
	}
	var chats []string
	for id := range v.Chats {
		chats = append(chats, id)
	}
	slices.Sort(chats)
	if want := []string{"last", "paused"}; !slices.Equal(chats, want) {
		t.Errorf("chats in the value = %v, want %v", chats, want)
	}
	if len(v.Bot.Slots) != 1 {
		t.Errorf("bot slots in the value = %v, want the last one only", v.Bot.Slots)
	}
}

// A value that is not the limiter's JSON is replaced, not a reason to stop
// sending.
func TestUnreadableValueIsReplaced(t *testing.T) {
	s := bustest.RunServer(t)
	_, js := s.Connect()
	_, kv := newBucket(t, js)
	if _, err := kv.Put(t.Context(), ratelimit.Key(scope), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	l := newLimiter(kv, ratelimit.TelegramDefaults(), newClock())
	at, err := ratelimit.Reserve(l, t.Context(), "a", false)
	if err != nil || !at.Equal(t0) {
		t.Fatalf("Reserve = %v, %v; want t0, nil", at.Sub(t0), err)
	}
	e, err := kv.Get(t.Context(), ratelimit.Key(scope))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(e.Value()) {
		t.Errorf("value is still %q", e.Value())
	}
}

func TestKey(t *testing.T) {
	s := bustest.RunServer(t)
	_, js := s.Connect()
	_, kv := newBucket(t, js)

	tests := []struct {
		scope, want string
	}{
		{"telegram.123456", "ratelimit.telegram.123456"},
		{"slack:T01/C02", "ratelimit.slack=3AT01/C02"},
		{"a_b", "ratelimit.a_b"},
		{"a=3Ab", "ratelimit.a=3D3Ab"},
		{"a*>", "ratelimit.a=2A=3E"},
		{"a b", "ratelimit.a=20b"},
		{".a..b.", "ratelimit.=2Ea.=2Eb=2E"},
		{"é", "ratelimit.=C3=A9"},
		{"", "ratelimit.="},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.scope, func(t *testing.T) {
			got := ratelimit.Key(tt.scope)
			if got != tt.want {
				t.Errorf("Key(%q) = %q, want %q", tt.scope, got, tt.want)
			}
			if other, ok := seen[got]; ok {
				t.Errorf("Key(%q) = Key(%q) = %q", tt.scope, other, got)
			}
			seen[got] = tt.scope
			if _, err := kv.Put(t.Context(), got, []byte("{}")); err != nil {
				t.Errorf("the bucket refuses key %q: %v", got, err)
			}
		})
	}
}

// A Wait that took its turn before a 429 was announced, and wakes inside the
// pause, waits the pause out too: no message goes inside a retry_after the
// account was given, whichever replica heard it.
func TestPauseDuringAWait(t *testing.T) {
	r := newRig(t)
	a, b, c := r.limiter(ratelimit.Limits{PerChat: ratelimit.Rate{N: 1, Per: time.Second}}), r.replica(ratelimit.Limits{}), r.clock
	if _, err := ratelimit.Reserve(a, t.Context(), "42", false); err != nil { // now's turn is taken
		t.Fatal(err)
	}
	paused := false
	ratelimit.SetClock(a, c.Now, func(ctx context.Context, d time.Duration) error {
		if !paused {
			paused = true
			// While a sleeps to its turn at 1 s, b hears a 429: pause to 5 s.
			if err := b.Pause(ctx, "", t0.Add(5*time.Second)); err != nil {
				return err
			}
		}
		return c.Sleep(ctx, d)
	})
	if err := a.Wait(t.Context(), "42", false); err != nil {
		t.Fatal(err)
	}
	if got := c.Now().Sub(t0); got < 5*time.Second {
		t.Fatalf("the message went at %s, inside the pause that ends at 5s", got)
	}
}
