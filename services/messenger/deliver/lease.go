package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/lease"
)

// Replica names this messenger replica in leases and statuses: Instance,
// or "<host>-<pid>" when the messenger named none.
func (e Env) Replica() string {
	if e.Instance != "" {
		return e.Instance
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Lease is how a receiver's work that one messenger replica at a time may
// do (polling a bot, keeping its gateway session) is shared: the replica
// holding Key in herald_leases does it, the others stand by, saying so in
// the status, and one takes over within TTL of the holder's end.
type Lease struct {
	Key      string
	Instance string // this replica (Env.Replica)
	TTL      time.Duration
	// Retry backs off while a bucket cannot be opened.
	Retry Backoff
	Log   *slog.Logger
	// Work says what the holder does, in a standby's status ("polls this
	// bot"); Name names the lease to a replica that lost it ("poller").
	Work, Name string
}

// Run does work while this replica holds the lease, with the
// herald_channel_state bucket open for it, and stands by while another
// does, until ctx is done.
func (l Lease) Run(ctx context.Context, js jetstream.JetStream, st *Reporter, work func(ctx context.Context, state jetstream.KeyValue)) error {
	leases, ok := OpenBucket(ctx, js, st, l.Retry, bus.BucketLeases)
	if !ok {
		return nil
	}
	state, ok := OpenBucket(ctx, js, st, l.Retry, bus.BucketChannelState)
	if !ok {
		return nil
	}
	held := &lease.Lease{
		KV:     leases,
		Key:    l.Key,
		Holder: l.Instance,
		TTL:    l.TTL,
		Logger: l.Log,
		Gone: func(ctx context.Context, holder string) bool {
			return PresenceLapsed(ctx, leases, holder)
		},
		OnStandby: func(holder string) {
			detail := fmt.Sprintf("messenger %s %s; this one takes over if it stops", holder, l.Work)
			if holder == l.Instance {
				detail = "this messenger lost its " + l.Name + " lease; it takes the lease again once the lease expires"
			}
			st.Set(StateStandby, detail)
		},
	}
	return held.Run(ctx, func(ctx context.Context) error {
		work(ctx, state)
		return nil
	})
}

// Presence: each messenger writes PresenceKey(its instance) in herald_leases
// every PresenceBeat while it runs, and deletes it when it stops
// (services/messenger/presence.go). A messenger whose key is older than
// PresenceTTL is gone (killed, cut off, paused): another takes over its
// deliveries, and its leases (a bot's poller, a gateway session), at once
// instead of when their own TTL runs out. A messenger killed while it
// polled a bot held inbound back 11 s (the poller lease's 10 s) before.
const (
	PresenceBeat = time.Second
	PresenceTTL  = 3 * time.Second
)

// PresenceKey is the key in bus.BucketLeases saying that the messenger
// instance is running.
func PresenceKey(instance string) string { return "presence." + instance }

// PresenceLapsed reports whether instance's presence key is there and has
// not been written for PresenceTTL. A key that is not there says nothing: a
// messenger that stopped cleanly released its leases too, and one that
// writes no presence (a test's receiver) is judged by the lease's TTL.
func PresenceLapsed(ctx context.Context, leases jetstream.KeyValue, instance string) bool {
	e, err := leases.Get(ctx, PresenceKey(instance))
	return err == nil && time.Since(e.Created()) > PresenceTTL
}
