package messenger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// sink is where one integration's receiver hands what people send: onto
// HERALD_INGRESS, deduplicated by the provider's own message id.
type sink struct {
	in     config.Integration
	js     jetstream.JetStream
	status jetstream.KeyValue
	seen   jetstream.KeyValue // bus.BucketSeen
	audit  *audit.Writer
	m      *Messenger

	mu    sync.Mutex
	last  deliver.Status
	flush *time.Timer // a pending write of last_inbound
}

// ReasonDuplicate is the audit reason of an inbound message stored before
// (a provider's retry, or a captured signed request replayed).
const ReasonDuplicate = "duplicate"

// Ingress stores one inbound message durably. A malformed one is audited and
// swallowed (nil), so a receiver never stalls on it; only a bus failure is an
// error, on which the receiver must not confirm the message to its provider.
//
// A message whose provider id (NativeID) was stored in the last
// bus.SeenTTL, before any restart of a messenger or of NATS, is not stored
// again: it is audited as a duplicate, Ingress returns nil and sets
// in.RequestContext.RequestID to the first one's, so the receiver answers as
// it did the first time.
func (s *sink) Ingress(ctx context.Context, in *envelope.Ingress) error {
	in.SchemaVersion = envelope.IngressV1
	in.IntegrationID = s.in.ID
	if err := envelope.Check(schemas.Ingress, in); err != nil {
		s.m.log.ErrorContext(ctx, "inbound message malformed; dropped", "integration", s.in.ID, "native_id", in.NativeID, "err", err)
		s.Dropped(ctx, in, "malformed")
		return nil
	}
	key := seenKey(s.in.ID, in.NativeID)
	if first, dup, err := s.firstSeen(ctx, key); err != nil {
		return err
	} else if dup {
		if first != "" {
			in.RequestContext.RequestID = first
		}
		s.m.log.InfoContext(ctx, "inbound message stored before; not routed again", "integration", s.in.ID, "native_id", in.NativeID, "request_id", in.RequestContext.RequestID)
		s.Dropped(ctx, in, ReasonDuplicate)
		return nil
	}
	s.m.transcribe(ctx, &s.in, in)
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	// A person's message starts its trace here, on its way to the butler.
	ctx = envelope.WithTraceparent(ctx, envelope.NewTraceparent())
	ack, err := bus.Publish(ctx, s.js, bus.IngressSubject(s.in.Type), b, s.in.ID+":"+in.NativeID, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)
	}
	// Remembered after it is stored: a crash in between leaves it to
	// JetStream's duplicate window, never loses the message. A repeat JetStream
	// caught keeps the first one's record.
	if !ack.Duplicate {
		rec, _ := json.Marshal(seenRecord{RequestID: in.RequestContext.RequestID})
		if _, err := s.seen.Create(ctx, key, rec); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			s.m.log.WarnContext(ctx, "inbound message stored but not remembered; a replay after a restart would be routed again", "integration", s.in.ID, "request_id", in.RequestContext.RequestID, "err", err)
		}
	}
	// Last inbound is for people reading channel_status: written at most once
	// a second (the last one of a burst included), not once per message.
	s.mu.Lock()
	s.last.LastInbound = time.Now().UTC()
	if s.last.State != "" && s.flush == nil {
		wait := max(0, time.Second-time.Since(s.last.UpdatedAt))
		s.flush = time.AfterFunc(wait, func() {
			s.mu.Lock()
			st := s.last
			s.flush = nil
			s.mu.Unlock()
			s.Status(st)
		})
	}
	s.mu.Unlock()
	return nil
}

// seenRecord is what BucketSeen keeps of a stored inbound message.
type seenRecord struct {
	RequestID string `json:"request_id"`
}

// seenKey is the key of a provider id in BucketSeen: its SHA-256, since
// provider ids (Message-IDs above all) hold characters no key may.
func seenKey(integration, nativeID string) string {
	sum := sha256.Sum256([]byte(nativeID))
	return integration + "." + hex.EncodeToString(sum[:16])
}

// firstSeen reports whether the message of key was stored lately, and
// under which request id ("" if the record does not say). A bus failure is
// an error, so the receiver does not confirm the message and its provider
// sends it again.
func (s *sink) firstSeen(ctx context.Context, key string) (requestID string, seen bool, err error) {
	e, err := s.seen.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%w: checking whether the message was stored before: %w", envelope.ErrTargetUnavailable, err)
	}
	var rec seenRecord
	_ = json.Unmarshal(e.Value(), &rec) // unreadable, yet it was stored: still seen
	return rec.RequestID, true, nil
}

// stop ends a pending last_inbound flush, so nothing of the sink runs after
// its receiver has stopped.
func (s *sink) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flush != nil {
		s.flush.Stop()
		s.flush = nil
	}
}

// state is the receiver's last reported state.
func (s *sink) state() deliver.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Dropped audits and counts what a receiver refused on arrival.
func (s *sink) Dropped(ctx context.Context, in *envelope.Ingress, reason string) {
	s.m.metrics.Inbound(s.in.Channel(), obs.InboundDropped, reason)
	rec := audit.Record{Kind: audit.Dropped, Channel: s.in.Channel(), Reason: reason}
	if in != nil {
		rec.RequestID = in.RequestContext.RequestID
	}
	s.audit.Write(ctx, rec)
}

// Status records the receiver's health in herald_status for channel_status,
// and logs changes of state.
func (s *sink) Status(st deliver.Status) {
	s.mu.Lock()
	if st.LastInbound.IsZero() {
		st.LastInbound = s.last.LastInbound
	}
	changed := st.State != s.last.State || st.Detail != s.last.Detail
	st.Integration, st.Channel, st.Instance, st.UpdatedAt = s.in.ID, s.in.Type, s.m.instance, time.Now().UTC()
	s.last = st
	s.mu.Unlock()
	if changed {
		log := s.m.log.Info
		if st.State == deliver.StateError || st.State == deliver.StateConflict {
			log = s.m.log.Warn
		}
		log("receiver "+st.State, "integration", s.in.ID, "detail", st.Detail)
	}
	b, _ := json.Marshal(st)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.status.Put(ctx, s.in.ID, b); err != nil {
		s.m.log.WarnContext(ctx, "status not recorded", "integration", s.in.ID, "err", err)
	}
}

// receive runs one integration's receiver until ctx is done, restarting it
// after a failure.
func (m *Messenger) receive(ctx context.Context, r deliver.Receiver, s *sink) {
	for backoff := time.Second; ctx.Err() == nil; backoff = min(backoff*2, time.Minute) {
		err := r.Receive(ctx, s)
		if ctx.Err() != nil {
			return
		}
		s.Status(deliver.Status{State: deliver.StateError, Detail: fmt.Sprintf("receiver stopped: %v; restarting in %s", err, backoff)})
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
	}
}

// instanceName names this replica in leases and status.
func instanceName() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "messenger"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), envelope.NewRequestID()[24:])
}
