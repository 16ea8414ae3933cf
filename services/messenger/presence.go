package messenger

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// A delivery record held by a messenger whose presence key
// (deliver.PresenceKey) is missing or older than deliver.PresenceTTL
// belongs to a messenger that is gone: another takes the delivery over at
// once instead of when the record's 30 s lease runs out. Taking over stays
// safe: the holder, if it comes back, writes the record compare-and-set
// before any provider call and finds it taken.

// holderOf is the messenger instance of an attempt token "<instance>.<n>".
func holderOf(attempt string) string {
	i := strings.LastIndexByte(attempt, '.')
	if i < 0 {
		return attempt
	}
	return attempt[:i]
}

// presence keeps this messenger's presence key fresh until ctx ends, then
// deletes it, so the others take over its deliveries at once.
func (m *Messenger) presence(ctx context.Context) {
	key := deliver.PresenceKey(m.instance)
	t := time.NewTicker(deliver.PresenceBeat)
	defer t.Stop()
	failing := false
	for {
		wctx, cancel := context.WithTimeout(ctx, deliver.PresenceBeat)
		_, err := m.leases.Put(wctx, key, nil)
		cancel()
		if err != nil && ctx.Err() == nil && !failing {
			m.log.WarnContext(ctx, "presence not written; other messengers may take over this one's deliveries (each is still sent at most once per call)", "err", err)
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = m.leases.Delete(dctx, key)
			cancel()
			return
		case <-t.C:
		}
	}
}

// holderGone reports whether the messenger holding a record with attempt
// token attempt is gone; if it is not, wait is how long until it would count
// as gone. This messenger's own tokens are never held: one attempt per key
// runs here (claimKey), so an own token on record is a finished one.
func (m *Messenger) holderGone(ctx context.Context, attempt string) (gone bool, wait time.Duration) {
	holder := holderOf(attempt)
	if holder == m.instance {
		return true, 0
	}
	e, err := m.leases.Get(ctx, deliver.PresenceKey(holder))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return true, 0
	case err != nil:
		// Not knowing is not gone: the record's lease decides.
		return false, deliver.PresenceTTL
	}
	age := time.Since(e.Created())
	if age > deliver.PresenceTTL {
		return true, 0
	}
	return false, deliver.PresenceTTL - age
}
