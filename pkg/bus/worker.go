package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/envelope"
)

// Worker runs one durable, explicitly acked consumer of a work-queue stream
// with bounded concurrency. A handler's error decides what happens next:
// retryable classes are tried again with backoff (or the provider's
// retry-after), up to MaxDeliver; anything else, or the last try, goes to
// GiveUp and then to the dead-letter stream, never silently away.
type Worker struct {
	Stream  string
	Durable string
	// Handle does the work; the message is acked when it returns nil.
	Handle func(ctx context.Context, m jetstream.Msg) error
	// GiveUp is called before a message is dead-lettered, so the caller can be
	// answered with the error and the failure audited.
	GiveUp func(ctx context.Context, m jetstream.Msg, err error)

	Concurrency  int             // handlers at once; default 64
	MaxDeliver   int             // tries in all; default 6
	BackOff      []time.Duration // delay before try n+1; default 1s 2s 5s 15s 30s
	AckWait      time.Duration   // redelivery after a crash; default 30s
	DrainTimeout time.Duration   // how long in-flight work may finish at stop; default 10s
	Log          *slog.Logger

	js jetstream.JetStream
}

func (w *Worker) defaults() {
	if w.Concurrency <= 0 {
		w.Concurrency = 64
	}
	if w.MaxDeliver <= 0 {
		w.MaxDeliver = 6
	}
	if w.BackOff == nil {
		w.BackOff = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second}
	}
	if w.AckWait <= 0 {
		w.AckWait = 30 * time.Second
	}
	if w.DrainTimeout <= 0 {
		w.DrainTimeout = 10 * time.Second
	}
	if w.Log == nil {
		w.Log = slog.Default()
	}
}

// minPull is the fewest messages a worker asks for at once. Pulling one at a
// time (Concurrency 1) lets the client miss a pull under load and stall until
// its heartbeat notices; a few more buffered cost nothing, and the handlers
// still run Concurrency at a time, in delivery order.
const minPull = 16

// Run consumes until ctx is done, then stops taking messages, lets in-flight
// ones finish within DrainTimeout, and hands back (Nak) whatever could not.
func (w *Worker) Run(ctx context.Context, js jetstream.JetStream) error {
	w.defaults()
	w.js = js
	cons, err := js.CreateOrUpdateConsumer(ctx, w.Stream, jetstream.ConsumerConfig{
		Durable:       w.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.AckWait,
		MaxDeliver:    w.MaxDeliver,
		MaxAckPending: w.Concurrency * 4,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", w.Durable, w.Stream, err)
	}
	// In-flight work outlives ctx by up to DrainTimeout.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var (
		wg  sync.WaitGroup
		sem = make(chan struct{}, w.Concurrency)
	)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			w.handle(ctx, work, m)
		}()
	}, jetstream.PullMaxMessages(max(w.Concurrency, minPull)), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
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
	go func() { <-cc.Closed(); wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.DrainTimeout):
		w.Log.Warn("stop: in-flight work did not finish in time; handing it back", "stream", w.Stream)
		cancelWork()
		<-done
	}
	return nil
}

func (w *Worker) handle(runCtx, work context.Context, m jetstream.Msg) {
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(w.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	err := w.Handle(work, m)
	close(stop)
	w.settle(runCtx, work, m, err)
}

func (w *Worker) settle(runCtx, work context.Context, m jetstream.Msg, err error) {
	if err == nil {
		if aerr := m.Ack(); aerr != nil {
			w.Log.Warn("ack failed; the message will be redelivered and answered from the ledger", "subject", m.Subject(), "err", aerr)
		}
		return
	}
	tries := uint64(1)
	if meta, merr := m.Metadata(); merr == nil {
		tries = meta.NumDelivered
	}
	// Stopping: give the message back at once for another replica or the restart.
	if runCtx.Err() != nil && (work.Err() != nil || errors.Is(err, context.Canceled)) {
		_ = m.Nak()
		return
	}
	if envelope.Retryable(err) && int(tries) < w.MaxDeliver {
		delay := w.BackOff[min(int(tries)-1, len(w.BackOff)-1)]
		var ra *envelope.RetryAfterError
		if errors.As(err, &ra) && ra.Wait > delay {
			delay = ra.Wait
		}
		w.Log.Warn("will retry", "stream", w.Stream, "subject", m.Subject(), "try", tries, "delay", delay, "err", err)
		_ = m.NakWithDelay(delay)
		return
	}
	w.Log.Error("giving up; dead-lettered", "stream", w.Stream, "subject", m.Subject(), "tries", tries, "err", err)
	if w.GiveUp != nil {
		w.GiveUp(work, m, err)
	}
	if derr := w.deadLetter(work, m, err, tries); derr != nil {
		// Keep it in the stream rather than lose it; it will come back after AckWait.
		w.Log.Error("dead-letter publish failed; leaving the message in place", "subject", m.Subject(), "err", derr)
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
