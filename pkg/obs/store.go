package obs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
)

// StoreCheck is the name of StoreWatch's readiness check on /readyz.
const StoreCheck = "nats.store"

// ProbeEvery is how often a StoreWatch writes its probe record, and
// probeTimeout how long it waits for JetStream to confirm one.
const (
	ProbeEvery   = 5 * time.Second
	probeTimeout = 2 * time.Second
)

// probeSize is the size of a probe record: a page of the disk, so that
// every probe needs a new block of it. A small record lands in the room left
// in the last page of the stream's file, which a full disk still takes:
// make chaos saw 26 s of probes of a few bytes stored on a full disk while
// every route failed.
const probeSize = 4096

// ErrCannotStore wraps why NATS does not store this process's writes.
var ErrCannotStore = errors.New("NATS cannot store")

// StoreWatch tells whether NATS can store: every ProbeEvery it writes one
// record of its own, a disk page in size, to the bucket herald_probe, a
// file-store write like any route or ledger record, and keeps the outcome. A connection that
// answers (the "nats" check) is not enough: a nats-server whose disk filled
// keeps answering but stores nothing, and keeps refusing writes to a stream
// that failed until it is restarted, even once space is freed. The outcome
// is /readyz's check "nats.store", the metrics herald_bus_store_ok and
// herald_bus_store_failures_total, and what a butler's notify says when the
// bus did not take a notification.
//
// A bucket that is missing (herald setup not run since the upgrade) or a
// probe the NATS user may not write (an authorization from before it) is a
// note on /readyz, not a failure: it says nothing of the store. A nil
// *StoreWatch knows nothing and says so.
type StoreWatch struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	metrics *Metrics
	health  *Health

	mu     sync.Mutex
	err    error // why the last probe failed; nil when it was stored
	since  time.Time
	failed int // probes failed in a row
}

// NewStoreWatch is the watch of the process whose probe record is key
// (bus.ServiceProbeKey, bus.ButlerProbeKey); it registers its check on h.
// Run starts its probes.
func NewStoreWatch(nc *nats.Conn, key string, m *Metrics, h *Health) *StoreWatch {
	js, _ := jetstream.New(nc) // fails only on invalid options
	w := &StoreWatch{nc: nc, js: js, subject: bus.ProbeSubject(key), metrics: m, health: h}
	h.Add(StoreCheck, w.Check)
	return w
}

// Run probes at once and then every ProbeEvery until ctx ends.
func (w *StoreWatch) Run(ctx context.Context) {
	if w == nil {
		return
	}
	t := time.NewTicker(ProbeEvery)
	defer t.Stop()
	for {
		w.Probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Probe writes the probe record once and records the outcome. While NATS is
// not connected it writes nothing and changes nothing: the "nats" check says
// so, and there is no store to judge.
func (w *StoreWatch) Probe(ctx context.Context) {
	if w == nil || !w.nc.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	at := time.Now().UTC()
	record := make([]byte, probeSize)
	copy(record, at.Format(time.RFC3339Nano))
	_, err := w.js.Publish(ctx, w.subject, record, jetstream.WithRetryAttempts(0))
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // stopping, not a verdict on the store
	}
	switch {
	case err == nil:
		w.set(nil, at)
		w.health.Degrade(StoreCheck, "")
	case bus.IsNoResponders(err):
		w.set(nil, at)
		w.health.Degrade(StoreCheck, "cannot probe the store: the bucket "+bus.BucketProbe+" is missing (run herald setup after upgrading)")
	case w.denied():
		w.set(nil, at)
		w.health.Degrade(StoreCheck, "cannot probe the store: NATS does not let this user write "+w.subject+" (regenerate the authorization with herald nats-auth)")
	default:
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("a probe write got no answer within %s", probeTimeout)
		} else {
			err = fmt.Errorf("a probe write failed: %w", err)
		}
		w.set(err, at)
	}
}

// denied reports whether the connection's last error is NATS refusing this
// user the probe subject.
func (w *StoreWatch) denied() bool {
	err := w.nc.LastError()
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "permissions violation") && strings.Contains(err.Error(), w.subject)
}

func (w *StoreWatch) set(err error, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.err, w.failed = nil, 0
	case w.err == nil:
		w.err, w.since, w.failed = err, at, 1
	default:
		w.err = err
		w.failed++
	}
	if err != nil {
		w.metrics.StoreFailed()
	}
	w.metrics.StoreOK(err == nil)
}

// Failed counts a write elsewhere (a route) that NATS did not store or did
// not confirm; readiness stays the probe's to judge.
func (w *StoreWatch) Failed() {
	if w != nil {
		w.metrics.StoreFailed()
	}
}

// Err is why NATS cannot store now (wrapping ErrCannotStore), or nil when
// the last probe was stored or nothing is known.
func (w *StoreWatch) Err() error {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil
	}
	return fmt.Errorf("%w since %s (%d probe writes in a row): %w; if its disk is full, free space and restart nats-server, which refuses writes to a stream that failed until it restarts",
		ErrCannotStore, w.since.Format("15:04:05 MST"), w.failed, w.err)
}

// Check is the watch as a readiness check.
func (w *StoreWatch) Check(context.Context) error { return w.Err() }
