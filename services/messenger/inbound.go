package messenger

import (
	"context"
	"encoding/json"
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
	audit  *audit.Writer
	m      *Messenger

	mu    sync.Mutex
	last  deliver.Status
	flush *time.Timer // a pending write of last_inbound
}

// Ingress stores one inbound message durably. A malformed one is audited and
// swallowed (nil), so a receiver never stalls on it; only a bus failure is an
// error, on which the receiver must not confirm the message to its provider.
func (s *sink) Ingress(ctx context.Context, in *envelope.Ingress) error {
	in.SchemaVersion = envelope.IngressV1
	in.IntegrationID = s.in.ID
	if err := envelope.Check(schemas.Ingress, in); err != nil {
		s.m.log.ErrorContext(ctx, "inbound message malformed; dropped", "integration", s.in.ID, "native_id", in.NativeID, "err", err)
		s.Dropped(ctx, in, "malformed")
		return nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	// A person's message starts its trace here, on its way to the butler.
	ctx = envelope.WithTraceparent(ctx, envelope.NewTraceparent())
	if _, err := bus.Publish(ctx, s.js, bus.IngressSubject(s.in.Type), b, s.in.ID+":"+in.NativeID, nil); err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)
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
