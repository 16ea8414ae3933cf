// Package switchboard is Herald's only router (design §1). It takes every
// route.v1 a butler publishes, checks that it is well formed and that the
// butler speaks only for itself, applies policy (which integration a butler
// may use), forwards it to the messenger, relays the delivery's outcome to
// the waiting butler, and audits every step.
package switchboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/schemas"
)

// Options configure a switchboard.
type Options struct {
	Config *config.Config
	NC     *nats.Conn
	Log    *slog.Logger
	// Concurrency of each consumer; 0 takes bus.Worker's default.
	Concurrency int
}

// Switchboard routes.
type Switchboard struct {
	cfg    *config.Config
	nc     *nats.Conn
	js     jetstream.JetStream
	log    *slog.Logger
	audit  *audit.Writer
	ledger *ledger.Ledger
}

// Run routes until ctx is done, then drains.
func Run(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("service", "switchboard")
	js, err := bus.Open(ctx, o.NC, bus.Topology{Replicas: o.Config.NATS.Replicas})
	if err != nil {
		return err
	}
	led, err := ledger.Open(ctx, js)
	if err != nil {
		return err
	}
	s := &Switchboard{cfg: o.Config, nc: o.NC, js: js, log: log, audit: &audit.Writer{JS: js, Log: log}, ledger: led}
	routes := &bus.Worker{Stream: bus.StreamRoute, Durable: bus.ConsumerSwitchboard, Handle: s.route, GiveUp: s.reject, Concurrency: o.Concurrency, Log: log}
	results := &bus.Worker{Stream: bus.StreamResult, Durable: bus.ConsumerResults, Handle: s.relay, Concurrency: o.Concurrency, Log: log}
	ingress, err := s.ingressWorker(ctx)
	if err != nil {
		return err
	}
	log.Info("switchboard running", "butlers", len(o.Config.Butlers), "integrations", len(o.Config.Integrations))
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return routes.Run(ctx, js) })
	g.Go(func() error { return results.Run(ctx, js) })
	g.Go(func() error { return ingress.Run(ctx, js) })
	return g.Wait()
}

// route checks one route.v1 and forwards it to the messenger.
func (s *Switchboard) route(ctx context.Context, m jetstream.Msg) error {
	butler := strings.TrimPrefix(m.Subject(), bus.RoutePrefix)
	r, err := envelope.DecodeRoute(m.Data())
	if err != nil {
		return err
	}
	n := r.Notify()
	switch {
	case n == nil:
		return fmt.Errorf("%w: route.v1 on %s carries no notify_request", envelope.ErrValidation, m.Subject())
	// Origin identity comes from the subject, which NATS permissions tie to the
	// butler's credentials; the envelope's fields must agree with it.
	case n.OriginButler != butler:
		return fmt.Errorf("%w: published on %s but origin_butler is %q; a butler may only notify as itself", envelope.ErrForbidden, m.Subject(), n.OriginButler)
	case r.Target.Butler != butler:
		return fmt.Errorf("%w: published on %s but target.butler is %q", envelope.ErrForbidden, m.Subject(), r.Target.Butler)
	case s.cfg.Butler(butler) == nil:
		return fmt.Errorf("%w: butler %q is not configured; add it to butlers in herald.yaml", envelope.ErrForbidden, butler)
	}
	key := r.IdempotencyKey()
	in, err := s.resolve(butler, n)
	if err != nil {
		return err
	}
	n.Delivery.Channel = in.Channel()
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %v", envelope.ErrInternal, err)
	}
	ack, err := bus.Publish(ctx, s.js, bus.DeliverSubject("messenger"), data, key, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", envelope.ErrTargetUnavailable, err)
	}
	if ack.Duplicate {
		// The messenger has this delivery already: answer this copy from the
		// ledger once it is final, and send nothing again.
		go s.answerFromLedger(r, butler, key)
	}
	s.audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: butler, Channel: n.Delivery.Channel, Intent: n.Delivery.Intent, RequestID: r.RequestContext.RequestID, Key: key})
	s.log.Debug("routed", "butler", butler, "channel", n.Delivery.Channel, "request_id", r.RequestContext.RequestID)
	return nil
}

// answerFromLedger answers a repeated route with the outcome recorded for its
// idempotency key.
func (s *Switchboard) answerFromLedger(r *envelope.Route, butler, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerWait)
	defer cancel()
	rec, err := s.ledger.Wait(ctx, butler, key)
	if err != nil {
		s.log.Warn("repeat not answered: no final delivery record in time", "butler", butler, "request_id", r.RequestContext.RequestID, "err", err)
		return
	}
	s.answer(butler, r.RequestContext.RequestID, envelope.Answer(r, rec.Response(r.RequestContext.RequestID)))
}

// ledgerWait bounds how long a repeated route waits for its original's outcome.
const ledgerWait = 2 * time.Minute

// resolve picks the integration a notify goes to: its channel, else (reply,
// react) the channel it came in on, else the butler's default.
func (s *Switchboard) resolve(butler string, n *envelope.Notify) (*config.Integration, error) {
	ch := n.Delivery.Channel
	if ch == "" && n.Delivery.Intent != envelope.IntentSend && n.RequestContext != nil {
		ch = n.RequestContext.SourceChannel
	}
	if ch == "" {
		ch = s.cfg.Butler(butler).DefaultChannel
	}
	in, err := s.cfg.Resolve(butler, ch)
	switch {
	case errors.Is(err, config.ErrUnknownChannel):
		return nil, fmt.Errorf("%w: channel %q: %v", envelope.ErrValidation, ch, err)
	case errors.Is(err, config.ErrNotGranted):
		return nil, fmt.Errorf("%w: %v", envelope.ErrForbidden, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", envelope.ErrNotFound, err)
	}
	return in, nil
}

// reject answers a route that can never be routed, and audits it.
func (s *Switchboard) reject(ctx context.Context, m jetstream.Msg, cause error) {
	butler := strings.TrimPrefix(m.Subject(), bus.RoutePrefix)
	// The route may be too broken to decode; its request_id is enough to answer.
	var head struct {
		RequestContext struct {
			RequestID string `json:"request_id"`
		} `json:"request_context"`
		Input struct {
			Context struct {
				NotifyRequest struct {
					Delivery struct {
						Channel string `json:"channel"`
						Intent  string `json:"intent"`
					} `json:"delivery"`
				} `json:"notify_request"`
			} `json:"context"`
		} `json:"input"`
	}
	_ = json.Unmarshal(m.Data(), &head)
	id := head.RequestContext.RequestID
	kind := audit.Rejected
	if envelope.Retryable(cause) {
		kind = audit.Failed
	}
	d := head.Input.Context.NotifyRequest.Delivery
	s.audit.Write(ctx, audit.Record{Kind: kind, Butler: butler, Channel: d.Channel, Intent: d.Intent, RequestID: id, Class: envelope.ClassOf(cause), Reason: cause.Error()})
	if id == "" || strings.ContainsAny(id, ".*> ") {
		return
	}
	s.answer(butler, id, envelope.Reject(id, cause))
}

// relay passes a delivery outcome from the messenger to the waiting butler.
func (s *Switchboard) relay(ctx context.Context, m jetstream.Msg) error {
	rest := strings.TrimPrefix(m.Subject(), bus.ResultPrefix)
	butler, id, ok := strings.Cut(rest, ".")
	if !ok {
		return fmt.Errorf("%w: result on unexpected subject %s", envelope.ErrValidation, m.Subject())
	}
	if err := envelope.Validate(schemas.RouteResponse, m.Data()); err != nil {
		return err
	}
	var resp envelope.RouteResponse
	if err := json.Unmarshal(m.Data(), &resp); err != nil {
		return fmt.Errorf("%w: %v", envelope.ErrValidation, err)
	}
	rec := audit.Record{Kind: audit.Delivered, Butler: butler, RequestID: id, Key: m.Headers().Get(bus.HeaderKey)}
	if nr := resp.Result; nr != nil && nr.NotifyResponse != nil && nr.NotifyResponse.Delivery != nil {
		rec.Channel, rec.DeliveryID = nr.NotifyResponse.Delivery.Channel, nr.NotifyResponse.Delivery.DeliveryID
	}
	if resp.Status == envelope.StatusError && resp.Error != nil {
		rec.Kind, rec.Class, rec.Reason = audit.Failed, resp.Error.Class, resp.Error.Message
		rec.Channel = m.Headers().Get(bus.HeaderChannel)
	}
	s.audit.Write(ctx, rec)
	s.answer(butler, id, &resp)
	return nil
}

// answer publishes a route_response on the caller's reply subject. Core NATS:
// if nobody waits any more, the ledger still holds the outcome.
func (s *Switchboard) answer(butler, id string, resp *envelope.RouteResponse) {
	b, err := json.Marshal(resp)
	if err != nil {
		s.log.Error("encoding answer", "request_id", id, "err", err)
		return
	}
	if err := s.nc.Publish(bus.ReplySubject(butler, id), b); err != nil {
		s.log.Warn("answer not sent", "butler", butler, "request_id", id, "err", err)
	}
}
