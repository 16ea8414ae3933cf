package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/envelope"
)

// Worker runs one durable, explicitly acked consumer of a work-queue stream
// with bounded concurrency. A handler's error decides what happens next:
// retryable classes are tried again, backing off exponentially with jitter
// (or after the provider's retry-after), for as long as RetryFor from when the
// message was stored; anything else (a retryable class around an error NATS
// gives for the request itself included: unfixable), or a message past that
// horizon, goes to GiveUp and then to the dead-letter stream at once, never
// silently away. A message waiting for its retry holds nothing the others
// need (maxAckPending). A message whose handler crashed (its process killed)
// comes back after AckWait and is dead-lettered too once past the horizon,
// so nothing is left in the queue.
type Worker struct {
	Stream  string
	Durable string
	// Handle does the work; the message is acked when it returns nil.
	Handle func(ctx context.Context, m jetstream.Msg) error
	// GiveUp is called before a message is dead-lettered, so the caller can be
	// answered with the error and the failure audited.
	GiveUp func(ctx context.Context, m jetstream.Msg, err error)

	Concurrency int // handlers at once; default 64
	// RetryFor is how long retryable failures are retried, counted from when
	// the message was stored; default 24h (delivery.retry_for).
	RetryFor time.Duration
	// MinBackOff and MaxBackOff bound the delay before the next try, which
	// doubles from MinBackOff on every try; defaults 1s and 5m.
	MinBackOff, MaxBackOff time.Duration
	// MaxDeliver, if set, also bounds the number of tries (tests); by default
	// only RetryFor does.
	MaxDeliver   int
	AckWait      time.Duration // redelivery after a crash; default AckWait
	DrainTimeout time.Duration // how long in-flight work may finish at stop; default 10s
	Log          *slog.Logger

	js     jetstream.JetStream
	acker  acker
	inHand atomic.Int32 // messages taken from the consumer and not yet settled
	// confirming counts handled messages waiting for their records
	// (Confirms) before their ack.
	confirming sync.WaitGroup
}

// DefaultConcurrency is how many messages a worker handles at once.
const DefaultConcurrency = 64

// DefaultRetryFor is how long a retryable failure is retried by default.
const DefaultRetryFor = 24 * time.Hour

// ErrHorizon is wrapped (with the last cause, where known) by the error a
// message is given up with once its retry horizon has passed.
var ErrHorizon = errors.New("retry horizon passed")

func (w *Worker) defaults() {
	if w.Concurrency <= 0 {
		w.Concurrency = DefaultConcurrency
	}
	if w.RetryFor <= 0 {
		w.RetryFor = DefaultRetryFor
	}
	if w.MinBackOff <= 0 {
		w.MinBackOff = time.Second
	}
	if w.MaxBackOff <= 0 {
		w.MaxBackOff = 5 * time.Minute
	}
	if w.AckWait <= 0 {
		w.AckWait = AckWait
	}
	if w.DrainTimeout <= 0 {
		w.DrainTimeout = 10 * time.Second
	}
	if w.Log == nil {
		w.Log = slog.Default()
	}
}

// backOff is the delay before try n+1: MinBackOff doubled per try, capped at
// MaxBackOff, with up to a quarter taken off at random so that deliveries
// failing together do not come back together.
func (w *Worker) backOff(tries uint64) time.Duration {
	d := w.MinBackOff
	for i := uint64(1); i < tries && d < w.MaxBackOff; i++ {
		d *= 2
	}
	d = min(d, w.MaxBackOff)
	return d - time.Duration(rand.Int64N(int64(d)/4+1))
}

// minPull is the fewest messages a worker asks for at once. Pulling one at a
// time (Concurrency 1) lets the client miss a pull under load and stall until
// its heartbeat notices; a few more buffered cost nothing, and the handlers
// still run Concurrency at a time, in delivery order.
const minPull = 16

// pullExpiry bounds each pull request; the server's heartbeats come every
// half of it, and two missed ones make the client pull again. With nats.go's
// default (30 s) a consumer whose leader moved (a NATS node of a cluster
// killed) stalled for up to 30 s before it asked the new leader: in the chaos
// cluster scenario, 128 of 300 notifies were answered "queued" and the burst
// took 49 s; with 5 s, 48–54 and 26–27 s over three runs (the rest is the
// election itself; 2 s changed nothing). An idle worker pays one pull request every 5 s.
const pullExpiry = 5 * time.Second

// handlerIdle is how long a handler goroutine waits for another message.
const handlerIdle = 5 * time.Second

// ackLinger is how long the ack of a message handled while no other was in
// hand waits for the acks of the messages after it. On a work-queue stream an
// ack removes the message, and an ack that leaves the stream empty makes
// nats-server replace the stream's last block file (create a file, write a
// tombstone, delete the old one) under the stream's lock. With messages
// arriving one at a time that happened on every ack: a fifth of herald dev's
// CPU at 1,000 notify/s. Acks sent together empty the stream once. Nobody
// waits for an ack (the answer has gone when the handler returns), and a
// crash inside the linger redelivers the message after AckWait, as any crash
// between handling and ack already did; the ledger and the duplicate window
// answer it without doing the work again.
const ackLinger = 10 * time.Millisecond

// acker sends acks: at once while other messages are in hand (the stream
// is not emptied by them), else ackLinger after the first, together with the
// ones that came meanwhile.
type acker struct {
	log *slog.Logger

	mu      sync.Mutex
	pending []jetstream.Msg
	timer   *time.Timer
}

// add acks m; busy says other messages are being handled.
func (a *acker) add(m jetstream.Msg, busy bool) {
	a.mu.Lock()
	if busy && len(a.pending) == 0 {
		a.mu.Unlock()
		a.ack(m)
		return
	}
	a.pending = append(a.pending, m)
	if a.timer == nil {
		a.timer = time.AfterFunc(ackLinger, a.flush)
	}
	a.mu.Unlock()
}

// flush sends every ack waiting now.
func (a *acker) flush() {
	a.mu.Lock()
	pending := a.pending
	a.pending = nil
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	a.mu.Unlock()
	for _, m := range pending {
		a.ack(m)
	}
}

func (a *acker) ack(m jetstream.Msg) {
	if err := m.Ack(); err != nil {
		a.log.Warn("ack failed; the message will be redelivered and answered from the ledger", "subject", m.Subject(), "err", err)
	}
}

// Run consumes until ctx is done, then stops taking messages, lets in-flight
// ones finish within DrainTimeout, and hands back (Nak) whatever could not.
func (w *Worker) Run(ctx context.Context, js jetstream.JetStream) error {
	w.defaults()
	w.js = js
	w.acker.log = w.Log
	// Acks still waiting go out before Run returns (its caller may close
	// the connection next).
	defer w.acker.flush()
	cons, err := BindConsumer(ctx, js, w.Stream, WorkConsumer(w.Durable, w.Concurrency, w.AckWait, w.MaxDeliver), w.Log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: not a failure
		}
		return fmt.Errorf("consumer %s on %s: %w", w.Durable, w.Stream, err)
	}
	// In-flight work outlives ctx by up to DrainTimeout.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, w.Concurrency)
		jobs = make(chan jetstream.Msg)
		quit = make(chan struct{})
	)
	// Handlers run on goroutines that stay for the next message while there
	// is work (a fresh goroutine per message would grow its stack anew each
	// time) and leave after handlerIdle without any.
	handler := func(m jetstream.Msg) {
		defer wg.Done()
		idle := time.NewTimer(handlerIdle)
		defer idle.Stop()
		for {
			w.handle(ctx, work, m)
			w.inHand.Add(-1)
			<-sem
			idle.Reset(handlerIdle)
			select {
			case m = <-jobs:
			case <-idle.C:
				return
			case <-quit:
				return
			}
		}
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case sem <- struct{}{}:
		default:
			// Every handler is busy: m waits for one, kept in progress
			// meanwhile, as it will be while handled.
			done := KeepInProgress(m, w.AckWait)
			sem <- struct{}{}
			done()
		}
		w.inHand.Add(1)
		select {
		case jobs <- m:
		default:
			wg.Add(1)
			go handler(m)
		}
	}, jetstream.PullMaxMessages(max(w.Concurrency, minPull)), jetstream.PullExpiry(pullExpiry), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !errors.Is(err, jetstream.ErrNoHeartbeat) {
			w.Log.Debug("consume", "stream", w.Stream, "err", err)
		}
	}))
	if err != nil {
		return fmt.Errorf("consuming %s: %w", w.Stream, err)
	}
	<-ctx.Done()
	cc.Drain()
	done := make(chan struct{})
	go func() { <-cc.Closed(); close(quit); wg.Wait(); w.confirming.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.DrainTimeout):
		w.Log.Warn("stop: in-flight work did not finish in time; handing it back", "stream", w.Stream)
		cancelWork()
		<-done
	}
	return nil
}

// maxDeliver is the consumer's MaxDeliver: unlimited unless set, because
// the retry horizon, not a count, ends retries (and a count reached by a crash
// would leave the message in the work queue with nobody to dead-letter it).
func maxDeliver(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

func (w *Worker) handle(runCtx, work context.Context, m jetstream.Msg) {
	// The message's trace goes with everything its handling logs and publishes.
	work = envelope.WithTraceparent(work, m.Headers().Get(envelope.HeaderTraceparent))
	meta, merr := m.Metadata()
	if merr == nil && meta.NumDelivered > 1 && time.Since(meta.Timestamp) > w.RetryFor+w.AckWait {
		// Back after a crash (or a stop) past its horizon: do not try again.
		w.giveUp(work, m, fmt.Errorf("%w: %w: tried since %s (retry_for %s), and the last try did not finish", envelope.ErrTimeout, ErrHorizon, meta.Timestamp.Format(time.RFC3339), w.RetryFor), meta.NumDelivered)
		return
	}
	// A long handler (a provider retrying, a slow SMTP server) keeps the
	// message from being redelivered elsewhere.
	done := KeepInProgress(m, w.AckWait)
	// A worker taking one message at a time has only the next one
	// delivered while this one waits (maxAckPending): its records go soon.
	confirms := &Confirms{Soon: w.Concurrency <= 1}
	err := w.call(WithConfirms(work, confirms), m)
	if err != nil {
		done()
		w.settle(runCtx, work, m, err)
		return
	}
	// Acked only once the records the handler wrote are stored, so that a
	// kill in between redoes the work and writes them again; the handler's
	// goroutine goes on meanwhile.
	w.confirming.Add(1)
	confirms.Then(ConfirmWait, func(cerr error) {
		defer w.confirming.Done()
		done()
		if cerr != nil {
			// Left unacked, as a crash here would leave it: redelivered
			// after AckWait, redone, its records written again.
			w.Log.ErrorContext(work, "audit records not stored; the message is left to be redelivered and redone", "stream", w.Stream, "subject", m.Subject(), "err", cerr)
			return
		}
		w.settle(runCtx, work, m, nil)
	})
}

// KeepInProgress tells NATS every ackWait/3 that m is still being worked
// on, until the returned func is called: one timer per message, not a
// goroutine. A process holding m that is killed stops telling, and m goes
// to another (or the restarted) process ackWait after the last word.
func KeepInProgress(m jetstream.Msg, ackWait time.Duration) (done func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(ackWait/3, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			_ = m.InProgress()
			t.Reset(ackWait / 3)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// call runs Handle, turning a panic into an internal error so one poisoned
// message cannot take the whole service down with it.
func (w *Worker) call(ctx context.Context, m jetstream.Msg) (err error) {
	defer func() {
		if p := recover(); p != nil {
			w.Log.ErrorContext(ctx, "handler panicked", "stream", w.Stream, "subject", m.Subject(), "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: the handler panicked: %v", envelope.ErrInternal, p)
		}
	}()
	return w.Handle(ctx, m)
}

func (w *Worker) settle(runCtx, work context.Context, m jetstream.Msg, err error) {
	if err == nil {
		w.acker.add(m, w.inHand.Load() > 1)
		return
	}
	// Classed retryable but refused by NATS for what it is: give up now.
	err = unfixable(err)
	tries, stored := uint64(1), time.Now()
	if meta, merr := m.Metadata(); merr == nil {
		tries, stored = meta.NumDelivered, meta.Timestamp
	}
	// Stopping: give the message back at once for another replica or the restart.
	if runCtx.Err() != nil && (work.Err() != nil || errors.Is(err, context.Canceled)) {
		_ = m.Nak()
		return
	}
	left := w.RetryFor - time.Since(stored)
	if envelope.Retryable(err) && left > 0 && (w.MaxDeliver <= 0 || int(tries) < w.MaxDeliver) {
		delay := w.backOff(tries)
		var ra *envelope.RetryAfterError
		if errors.As(err, &ra) && ra.Wait > delay {
			delay = ra.Wait
		}
		// The last try comes at the horizon, not before it.
		delay = min(delay, left)
		w.Log.WarnContext(work, "will retry", "stream", w.Stream, "subject", m.Subject(), "try", tries, "delay", delay, "err", err)
		_ = m.NakWithDelay(delay)
		return
	}
	if envelope.Retryable(err) && left <= 0 {
		err = fmt.Errorf("%w: retried for %s (retry_for): %w", ErrHorizon, w.RetryFor, err)
	}
	w.giveUp(work, m, err, tries)
}

// giveUp hands a message that will not be tried again to GiveUp and then to
// the dead-letter stream.
func (w *Worker) giveUp(ctx context.Context, m jetstream.Msg, err error, tries uint64) {
	w.Log.ErrorContext(ctx, "giving up; dead-lettered", "stream", w.Stream, "subject", m.Subject(), "tries", tries, "err", err)
	if w.GiveUp != nil {
		w.GiveUp(ctx, m, err)
	}
	if derr := w.deadLetter(ctx, m, err, tries); derr != nil {
		// Keep it in the stream rather than lose it; it will come back after AckWait.
		w.Log.ErrorContext(ctx, "dead-letter publish failed; leaving the message in place", "subject", m.Subject(), "err", derr)
		_ = m.NakWithDelay(w.AckWait)
		return
	}
	_ = m.Term()
}

func (w *Worker) deadLetter(ctx context.Context, m jetstream.Msg, cause error, tries uint64) error {
	h := nats.Header{}
	for k, v := range m.Headers() {
		h[k] = v
	}
	h.Set(HeaderSubject, m.Subject())
	h.Set(HeaderError, cause.Error())
	h.Set(HeaderErrorClass, envelope.ClassOf(cause))
	h.Set(HeaderDeliveries, strconv.FormatUint(tries, 10))
	h.Del(nats.MsgIdHdr)
	if meta, err := m.Metadata(); err == nil {
		// One dead letter per stream message, however often this runs.
		h.Set(nats.MsgIdHdr, fmt.Sprintf("dead:%s:%d", w.Stream, meta.Sequence.Stream))
	}
	_, err := w.js.PublishMsg(ctx, &nats.Msg{Subject: DeadSubject(w.Stream, m.Subject()), Data: m.Data(), Header: h})
	return err
}

// AckWait is the ack wait of every durable consumer: a process marks each
// message it holds in progress every third of it (KeepInProgress), so what
// a killed process held comes back to another, or to it restarted, within
// seconds: a killed messenger's deliveries (taken over as soon as its
// presence lapses, services/messenger/presence.go), a killed switchboard's
// routes, results and inbound messages (a tap among them, counted before
// the escalation it acknowledged), a killed butler's inbox message. It was
// 30 s (NATS's default) for all but the messenger's until issue 38: a tap the
// switchboard held when killed counted 30 s late, and a note escalated
// although its person had tapped "Got it" 25 s before the deadline; a
// butler killed holding a message stalled its inbox 30 s. A shorter wait
// costs only those marks, one per held message every AckWait/3.
const AckWait = 4 * time.Second

// WorkConsumer is the durable consumer of a worker: herald setup makes it
// with the defaults, a worker binds to it.
func WorkConsumer(durable string, concurrency int, ackWait time.Duration, maxDeliverN int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    maxDeliver(maxDeliverN),
		MaxAckPending: maxAckPending(concurrency),
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// maxAckPending is a worker's bound on messages delivered and not yet
// acked: none (-1) for a worker that handles several at once. nats-server
// keeps a message waiting out a nak's delay in that count, so with a bound
// (it was 4 × concurrency, 256 for HERALD_ROUTE) a few hundred failing
// routes of one butler, each waiting for its retry, held every slot and the
// consumer delivered nothing else until their horizon (issue 37: another
// butler's route waited minutes, up to retry_for). What such a worker has
// in hand is bounded by its pull and its Concurrency anyway. A worker that
// takes one message at a time (the switchboard's inbound) keeps a bound of
// 2, below its pull of minPull: the one handled and the next, both kept in
// progress (the next while it waits for the handler in Run); a third would
// wait in the client, unmarked, and could be redelivered behind a slow one.
func maxAckPending(concurrency int) int {
	if concurrency <= 1 {
		return 2
	}
	return -1
}

// BindConsumer returns the durable consumer want.Durable of stream: as it is
// if its settings are want's, else updated, else made. A service's NATS user
// may only look (herald setup makes and repairs consumers); if the update is
// refused, the consumer is used as it is and the difference logged.
func BindConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig, log *slog.Logger) (jetstream.Consumer, error) {
	if log == nil {
		log = slog.Default()
	}
	cons, err := js.Consumer(ctx, stream, want.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return js.CreateOrUpdateConsumer(ctx, stream, want)
	case err != nil:
		return nil, err
	}
	if sameConsumer(cons.CachedInfo().Config, want) {
		return cons, nil
	}
	uctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	updated, uerr := js.CreateOrUpdateConsumer(uctx, stream, want)
	if uerr != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		log.Error("consumer has other settings than this version wants and may not be changed from here; run herald setup", "stream", stream, "consumer", want.Durable, "err", uerr)
		return cons, nil
	}
	return updated, nil
}

// sameConsumer compares the settings Herald chooses. An unset MaxDeliver
// (0, as InboxConsumer leaves it) is the server's -1: both are unlimited.
func sameConsumer(have, want jetstream.ConsumerConfig) bool {
	return have.AckPolicy == want.AckPolicy && have.AckWait == want.AckWait &&
		unlimited(int64(have.MaxDeliver)) == unlimited(int64(want.MaxDeliver)) &&
		have.MaxAckPending == want.MaxAckPending && have.FilterSubject == want.FilterSubject
}

// InboxConsumer is butler's durable consumer of its inbox: filtered on its
// own subject, one message at a time so they reach the model in order.
func InboxConsumer(butler string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       ConsumerInbox(butler),
		FilterSubject: InboxSubject(butler),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       AckWait,
		MaxAckPending: 1,
	}
}

// durables are the fleet's durable consumers, as herald setup makes them:
// the workers' with their defaults (the switchboard's inbound worker takes one
// message at a time), and each butler's inbox.
func (t Topology) durables() map[string][]jetstream.ConsumerConfig {
	out := map[string][]jetstream.ConsumerConfig{
		StreamRoute:   {WorkConsumer(ConsumerSwitchboard, DefaultConcurrency, AckWait, 0)},
		StreamResult:  {WorkConsumer(ConsumerResults, DefaultConcurrency, AckWait, 0)},
		StreamIngress: {WorkConsumer(ConsumerIngress, 1, AckWait, 0)},
		StreamDeliver: {WorkConsumer(ConsumerMessenger, DefaultConcurrency, AckWait, 0)},
	}
	for _, b := range t.Butlers {
		out[StreamInbox] = append(out[StreamInbox], InboxConsumer(b))
	}
	return out
}
