// Package core is the switchboard's routing core: it takes every route.v1
// a butler publishes (core.go, direct.go), checks who sends it and where it
// may go, hands it to the messenger and relays the outcome to the waiting
// butler; and it takes every ingress.v1 the messenger stores (inbound.go),
// lets in only the senders allowed (gate.go, ratelimit.go), and routes each
// message to its butler's inbox in its thread (thread.go, topics.go).
// Human-in-the-loop features (attention, quiet hours, claims, prompts,
// questions) are packages of their own that the core calls at fixed points
// (Feature, feature.go); Env (env.go) is what they are given.
package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/pkg/approval"
	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/obs"
)

// Options configure a switchboard.
type Options struct {
	Config *config.Config
	NC     *nats.Conn
	Log    *slog.Logger
	// Concurrency of each consumer; 0 takes bus.Worker's default.
	Concurrency int
	// Metrics and Health are the process's (nil: none). The switchboard
	// counts what it routes and refuses, and is ready while its consumers run.
	Metrics *obs.Metrics
	Health  *obs.Health
	// Running, if set, is called once it works: its consumers run (a
	// reload waits for it before it says the new configuration runs).
	Running func()
	// Features are the human-in-the-loop features, called in this order.
	Features []New
}

// HealthCheck is the name of the switchboard's readiness check: its three
// consumers run and NATS answers for each.
const HealthCheck = "switchboard.consumers"

// consumers are the switchboard's durable consumers.
var consumers = []obs.Consumer{
	{Stream: bus.StreamRoute, Durable: bus.ConsumerSwitchboard},
	{Stream: bus.StreamResult, Durable: bus.ConsumerResults},
	{Stream: bus.StreamIngress, Durable: bus.ConsumerIngress},
}

// Core routes.
type Core struct {
	*Env
	cfg      *config.Config
	log      *slog.Logger
	features []Feature
	// lastErr is the last failure of any handler, for the status answer.
	lastErr obs.LastError
	// background is work that outlives the message that started it
	// (answering a repeat from the ledger, the features' ticks, direct
	// routes); Run cancels it at stop and waits for it.
	background     sync.WaitGroup
	backgroundCtx  context.Context
	stopBackground context.CancelFunc
	// flushDrops logs the channel rate limit's drops not logged yet.
	flushDrops func()
}

// Run routes until ctx is done, then drains.
func Run(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("service", "switchboard")
	// Not ready until the consumers run; not ready again once they stopped.
	state := obs.NewState()
	o.Health.Add(HealthCheck, state.Check)
	err := run(ctx, o, log, state)
	if err != nil {
		state.Set(fmt.Errorf("%w: %w", obs.ErrStopped, err))
	} else {
		state.Set(obs.ErrStopped)
	}
	return err
}

func run(ctx context.Context, o Options, log *slog.Logger, state *obs.State) error {
	js, err := bus.Open(ctx, o.NC, bus.Topology{Replicas: o.Config.NATS.Replicas, FilesMaxBytes: o.Config.NATS.FilesMaxBytes, Uses: &bus.SwitchboardUses, Log: log}, time.Duration(o.Config.NATS.Wait), log)
	if err != nil {
		return err
	}
	led, err := ledger.Open(ctx, js)
	if err != nil {
		return err
	}
	approvals, err := approval.Open(ctx, js)
	if err != nil {
		return err
	}
	requests, err := openRequests(ctx, js)
	if err != nil {
		return err
	}
	sessionsKV, err := js.KeyValue(ctx, bus.BucketSessions)
	if err != nil {
		return err
	}
	env := &Env{Config: o.Config, NC: o.NC, JS: js, Log: log, Audit: &audit.Writer{JS: js, Log: log}, Metrics: o.Metrics, Ledger: led,
		Approvals: approvals, Sessions: sessionsKV, Requests: requests, Copies: &Copies{kv: sessionsKV}}
	s := &Core{Env: env, cfg: o.Config, log: log}
	defer env.Audit.Flush()
	for _, newFeature := range o.Features {
		f, err := newFeature(ctx, env)
		if err != nil {
			return err
		}
		s.features = append(s.features, f)
	}
	s.backgroundCtx, s.stopBackground = context.WithCancel(context.WithoutCancel(ctx))
	defer s.stopBackground()
	retryFor := time.Duration(o.Config.Delivery.RetryFor)
	routes := &bus.Worker{Stream: bus.StreamRoute, Durable: bus.ConsumerSwitchboard, Handle: obs.Noted(&s.lastErr, s.route), GiveUp: s.reject, Concurrency: o.Concurrency, RetryFor: retryFor, Log: log}
	results := &bus.Worker{Stream: bus.StreamResult, Durable: bus.ConsumerResults, Handle: obs.Noted(&s.lastErr, s.relay), GiveUp: s.giveUpResult, Concurrency: o.Concurrency, RetryFor: retryFor, Log: log}
	ingress, err := s.ingressWorker(ctx)
	if err != nil {
		return err
	}
	defer s.flushDrops()
	svc, err := obs.AddService(o.NC, obs.ServiceSwitchboard, obs.Version, s.status)
	if err != nil {
		return err
	}
	svc.SetHealth(o.Health)
	defer func() { _ = svc.Stop() }()
	defer o.Metrics.WatchConsumers(js, consumers...)()
	o.Health.Add(HealthCheck, obs.All(state.Check, obs.ConsumerCheck(js, consumers...)))
	direct, err := s.serveDirect(s.backgroundCtx, o.Concurrency)
	if err != nil {
		return fmt.Errorf("answering direct routes: %w", err)
	}
	defer func() { _ = direct.Unsubscribe() }()
	log.InfoContext(ctx, "switchboard running", "butlers", len(o.Config.Butlers), "integrations", len(o.Config.Integrations))
	g, ctx := errgroup.WithContext(ctx)
	for _, w := range []*bus.Worker{routes, results, ingress} {
		g.Go(func() error {
			err := w.Run(ctx, js)
			if err != nil {
				// Not ready from now, not only once the others have drained.
				state.Set(fmt.Errorf("%w: consumer %s: %w", obs.ErrStopped, w.Durable, err))
			}
			return err
		})
	}
	for _, f := range s.features {
		s.background.Go(func() { tick(s.backgroundCtx, f) })
	}
	state.Set(nil)
	if o.Running != nil {
		o.Running()
	}
	err = g.Wait()
	// A direct route from now on finds no switchboard here and goes to
	// the stream at once; those taken are finished.
	_ = direct.Unsubscribe()
	s.stopBackground()
	s.background.Wait()
	return err
}

// tick runs f's Tick every TickEvery until ctx ends.
func tick(ctx context.Context, f Feature) {
	t := time.NewTicker(TickEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f.Tick(ctx, now)
		}
	}
}

// Status is the switchboard's answer on its status endpoint
// (herald.status.switchboard).
type Status struct {
	Service      string              `json:"service"`
	Butlers      []string            `json:"butlers"`
	Integrations []string            `json:"integrations"`
	Consumers    []obs.ConsumerState `json:"consumers"`
	// Held are the notes kept for quiet hours; OpenPrompts and
	// OpenQuestions the permission prompts and ask questions waiting for
	// an answer. Counting, if it failed, is in CountError.
	Held          int              `json:"held"`
	OpenPrompts   int              `json:"open_prompts"`
	OpenQuestions int              `json:"open_questions"`
	CountError    string           `json:"count_error,omitempty"`
	LastError     *obs.ErrorRecord `json:"last_error"`
}

func (s *Core) status() any {
	st := Status{Service: obs.ServiceSwitchboard, Butlers: s.cfg.ButlerNames(), Integrations: []string{},
		Consumers: obs.Lag(context.Background(), s.JS, consumers...), LastError: s.lastErr.Last()}
	for _, it := range s.cfg.Integrations {
		if !it.Disabled {
			st.Integrations = append(st.Integrations, it.Channel())
		}
	}
	if err := s.countWaiting(&st); err != nil {
		st.CountError = err.Error()
	}
	return st
}

// countWaiting fills in what waits for a time or a person: held notes,
// open prompts and questions.
func (s *Core) countWaiting(st *Status) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.Approvals != nil {
		var err error
		if st.OpenPrompts, st.OpenQuestions, err = s.Approvals.Open(ctx); err != nil {
			return fmt.Errorf("counting open prompts: %w", err)
		}
	}
	kv, err := s.JS.KeyValue(ctx, bus.BucketHeld)
	if err != nil {
		return fmt.Errorf("counting held notes: %w", err)
	}
	l, err := kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("counting held notes: %w", err)
	}
	defer func() { _ = l.Stop() }()
	for range l.Keys() {
		st.Held++
	}
	return nil
}

// butlerLabel is butler as a metric label: a name no configuration knows
// (a route published on a made-up subject) is "unknown", so such traffic
// cannot grow the series without bound.
func (s *Core) butlerLabel(butler string) string {
	if s.cfg.Butler(butler) == nil {
		return "unknown"
	}
	return butler
}

// giveUpResult notes a delivery outcome that could not be relayed before it
// is dead-lettered.
func (s *Core) giveUpResult(_ context.Context, _ jetstream.Msg, cause error) {
	s.lastErr.Record(cause)
	s.Metrics.DeadLetter(bus.StreamResult)
}

// route checks one route.v1 of HERALD_ROUTE and forwards it to the
// messenger.
func (s *Core) route(ctx context.Context, m jetstream.Msg) error {
	return s.routeOne(ctx, strings.TrimPrefix(m.Subject(), bus.RoutePrefix), m.Subject(), m.Data())
}

// routeOne checks route.v1 raw, published by butler on subject, and
// forwards it to the messenger.
func (s *Core) routeOne(ctx context.Context, butler, subject string, raw []byte) error {
	r, err := envelope.DecodeRoute(raw)
	if err != nil {
		return err
	}
	ctx = envelope.Traced(ctx, r)
	if err := s.checkOrigin(subject, butler, r); err != nil {
		return err
	}
	n := r.Notify()
	key := r.IdempotencyKey()
	args := ""
	if n.IdempotencyKey != "" {
		args = n.ArgsDigest() // before the buttons below are added
	}
	it, err := s.resolve(butler, n)
	if err != nil {
		return err
	}
	n.Delivery.Channel = it.Channel()
	if n.Delivery.Intent == envelope.IntentEdit {
		return s.routeEdit(ctx, r, butler, key, args, it)
	}
	if err := s.checkAddressee(ctx, butler, it, n); err != nil {
		return err
	}
	d := &Outbound{Butler: butler, Route: r, Notify: n, Integration: it, Key: key}
	for _, f := range s.features {
		if taken, err := f.Outbound(ctx, d); taken || err != nil {
			return err // refused, or taken (held for quiet hours) and the butler told
		}
	}
	n.PermissionRequest = nil // the switchboard's to read; the messenger needs the message only
	ack, err := s.Deliver(ctx, r, key, deliverHeader(args), d.awaited, d.follow...)
	if err != nil {
		return err
	}
	s.routed(ctx, r, butler, key, ack.Duplicate)
	return nil
}

// routeEdit hands butler's edit r to the messenger as an edit of the
// message it names (editTarget): no prompt, claim, acknowledgement or quiet
// hours apply to a change of a message already sent.
func (s *Core) routeEdit(ctx context.Context, r *envelope.Route, butler, key, args string, it *config.Integration) error {
	id, err := s.editTarget(ctx, butler, it, r.Notify())
	if err != nil {
		return err
	}
	h := deliverHeader(args)
	h.Set(bus.HeaderEdit, id)
	ack, err := s.Deliver(ctx, r, key, h, nil)
	if err != nil {
		return err
	}
	s.routed(ctx, r, butler, key, ack.Duplicate)
	return nil
}

// checkOrigin checks that r, published on subject (herald.route.<butler>),
// carries a notify and speaks for butler only, a configured one. Origin
// identity comes from the subject, which NATS permissions tie to the
// butler's credentials; the envelope's fields must agree with it.
func (s *Core) checkOrigin(subject, butler string, r *envelope.Route) error {
	n := r.Notify()
	switch {
	case n == nil:
		return fmt.Errorf("%w: route.v1 on %s carries no notify_request", envelope.ErrValidation, subject)
	case n.OriginButler != butler:
		return fmt.Errorf("%w: published on %s but origin_butler is %q; a butler may only notify as itself", envelope.ErrForbidden, subject, n.OriginButler)
	case r.Target.Butler != butler:
		return fmt.Errorf("%w: published on %s but target.butler is %q", envelope.ErrForbidden, subject, r.Target.Butler)
	case s.cfg.Butler(butler) == nil:
		return fmt.Errorf("%w: butler %q is not configured; add it to butlers in herald.yaml", envelope.ErrForbidden, butler)
	}
	return nil
}

// checkAddressee checks whom n, going out through it, is for: a send only
// a recipient it allows, a reply or a reaction only a message that was
// routed to butler (inReplyTo).
func (s *Core) checkAddressee(ctx context.Context, butler string, it *config.Integration, n *envelope.Notify) error {
	if n.Delivery.Intent == envelope.IntentSend || n.Delivery.Intent == "" {
		if !it.AllowsRecipient(n.Delivery.Recipient) {
			return fmt.Errorf("%w: %s may not send to %q through %s; allowed are its default recipient, its inbound allow_from and approvers, and allow_to", envelope.ErrForbidden, butler, n.Delivery.Recipient, it.Channel())
		}
		return nil
	}
	return s.inReplyTo(ctx, butler, it, n)
}

// deliverHeader is the header of a delivery: the caller's arguments
// digest (args, if any), what a repeat with the same idempotency_key is
// checked against.
func deliverHeader(args string) nats.Header {
	h := nats.Header{}
	if args != "" {
		h.Set(bus.HeaderArgs, args)
	}
	return h
}

// routed notes a route the messenger's stream took: a duplicate (the
// messenger has this delivery already) is answered from the ledger once it
// is final, later, and nothing is sent again; a new one is counted. Either
// is audited.
func (s *Core) routed(ctx context.Context, r *envelope.Route, butler, key string, duplicate bool) {
	n := r.Notify()
	if duplicate {
		s.background.Go(func() { s.answerFromLedger(r, butler, key) })
	} else {
		s.Metrics.Routed(butler, n.Delivery.Channel)
	}
	s.Audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: butler, Channel: n.Delivery.Channel, Intent: n.Delivery.Intent, Recipient: n.Delivery.Recipient, RequestID: r.RequestContext.RequestID, Key: key, CallerKey: n.IdempotencyKey})
	s.log.DebugContext(ctx, "routed", "butler", butler, "channel", n.Delivery.Channel, "request_id", r.RequestContext.RequestID)
}

// answerFromLedger answers a repeated route with the outcome recorded for its
// idempotency key.
func (s *Core) answerFromLedger(r *envelope.Route, butler, key string) {
	ctx, cancel := context.WithTimeout(s.backgroundCtx, ledgerWait)
	defer cancel()
	rec, err := s.Ledger.Wait(ctx, butler, key)
	if err != nil {
		s.log.WarnContext(ctx, "repeat not answered: no final delivery record in time", "butler", butler, "request_id", r.RequestContext.RequestID, "err", err)
		return
	}
	s.Env.answer(butler, r.RequestContext.RequestID, envelope.Answer(r, rec.Response(r.RequestContext.RequestID)))
}

// ledgerWait bounds how long a repeated route waits for its original's outcome.
const ledgerWait = 2 * time.Minute

// resolve picks the integration a notify goes to: its channel, else (reply,
// react) the channel it came in on, else the butler's default.
func (s *Core) resolve(butler string, n *envelope.Notify) (*config.Integration, error) {
	ch := n.Delivery.Channel
	if ch == "" && n.Delivery.Intent != envelope.IntentSend && n.RequestContext != nil {
		ch = n.RequestContext.SourceChannel
	}
	if ch == "" {
		ch = s.cfg.Butler(butler).DefaultChannel
	}
	it, err := s.cfg.Resolve(butler, ch)
	switch {
	case errors.Is(err, config.ErrUnknownChannel):
		// Seed 003's sentence first, as the schema's check words it.
		typ, _, _ := strings.Cut(ch, ":")
		return nil, fmt.Errorf("%w: Unsupported channel '%s': %w", envelope.ErrValidation, typ, err)
	case errors.Is(err, config.ErrNotGranted):
		return nil, fmt.Errorf("%w: %w", envelope.ErrForbidden, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", envelope.ErrNotFound, err)
	}
	return it, nil
}

// ledgerKey is what an idempotency key must look like to become part of a
// ledger key.
var ledgerKey = regexp.MustCompile(`^[A-Za-z0-9_=-]{1,128}$`)

// reject answers a route that can never be routed, and audits it.
func (s *Core) reject(ctx context.Context, m jetstream.Msg, cause error) {
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
						Channel   string `json:"channel"`
						Intent    string `json:"intent"`
						Recipient string `json:"recipient"`
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
	s.lastErr.Record(cause)
	s.Metrics.Refused(s.butlerLabel(butler), envelope.ClassOf(cause))
	s.Metrics.DeadLetter(bus.StreamRoute)
	s.Audit.Write(ctx, audit.Record{Kind: kind, Butler: butler, Channel: d.Channel, Intent: d.Intent, Recipient: d.Recipient, RequestID: id, Class: envelope.ClassOf(cause), Reason: cause.Error()})
	// A repeat of this notify within JetStream's duplicate window is dropped
	// before it reaches the switchboard: the ledger answers it with this
	// refusal, instead of leaving it "queued" for an outcome that never comes.
	if key := m.Headers().Get(nats.MsgIdHdr); ledgerKey.MatchString(key) && s.cfg.Butler(butler) != nil {
		args := ""
		if r, err := envelope.DecodeRoute(m.Data()); err == nil && r.Notify() != nil && r.Notify().IdempotencyKey != "" {
			args = r.Notify().ArgsDigest()
		}
		if err := s.Ledger.Refuse(ctx, butler, key, args, envelope.ErrorBodyFrom(cause)); err != nil {
			s.log.WarnContext(ctx, "refusal not recorded; a repeat of the notify would be answered queued", "butler", butler, "request_id", id, "err", err)
		}
	}
	if id == "" || strings.ContainsAny(id, ".*> ") {
		return
	}
	// A copy of it marked on its way (a note's, a question's, a claim
	// offer's) will not be sent: replies in its chat stop waiting for it.
	// Refused, it reached nobody, unless it may be in the messenger's stream
	// already (a publish there that was never confirmed).
	var nr *envelope.NotifyResponse
	if _, unsure := errors.AsType[*deliverUnsure](cause); !unsure {
		nr = envelope.Failed(id, cause)
	}
	resp := envelope.Reject(id, cause)
	o := &Outcome{Butler: butler, RequestID: id, Response: nr, Refused: true}
	err := s.outcome(ctx, o, func(Feature) bool { return true })
	if err == nil {
		err = s.Copies.Arrived(ctx, id)
	}
	if err != nil {
		s.log.WarnContext(ctx, "a refused notify's copy is still taken as on its way; replies in its chat wait for it up to 10 minutes", "butler", butler, "request_id", id, "err", err)
	}
	for _, sentence := range o.told {
		resp.Error.Message = withSentence(resp.Error.Message, sentence)
	}
	if err := s.Settle(ctx, butler, id, d.Channel, resp); err != nil {
		s.log.ErrorContext(ctx, "a failed notify's butler could not be told", "butler", butler, "request_id", id, "err", err)
	}
}

// relay passes a delivery outcome from the messenger to the waiting butler.
func (s *Core) relay(ctx context.Context, m jetstream.Msg) error {
	rest := strings.TrimPrefix(m.Subject(), bus.ResultPrefix)
	butler, id, ok := strings.Cut(rest, ".")
	if !ok {
		return fmt.Errorf("%w: result on unexpected subject %s", envelope.ErrValidation, m.Subject())
	}
	resp, err := envelope.DecodeTrustedResponse(m.Data())
	if err != nil {
		return err
	}
	s.Audit.Write(ctx, audit.Outcome(butler, id, m.Headers().Get(bus.HeaderKey), m.Headers().Get(bus.HeaderChannel), m.Headers().Get(bus.HeaderIntent), resp))
	if butler == config.HeraldOrigin {
		// Herald's own messages (pairing codes, closed prompts): nobody
		// waits, and no butler is to be told.
		return nil
	}
	o := &Outcome{Butler: butler, RequestID: id}
	if resp.Result != nil {
		o.Response = resp.Result.NotifyResponse
	}
	relays := strings.Split(m.Headers().Get(bus.HeaderRelay), ",")
	if err := s.outcome(ctx, o, func(f Feature) bool { return slices.Contains(relays, f.Name()) }); err != nil {
		return err
	}
	if slices.Contains(relays, relayCopy) {
		// Sent or not, the copy is no longer on its way; each feature
		// that follows it has recorded it, so a reply waiting finds it.
		if err := s.Copies.Arrived(ctx, id); err != nil {
			return err
		}
	}
	for _, sentence := range o.told {
		addToError(resp, sentence)
	}
	return s.Settle(ctx, butler, id, m.Headers().Get(bus.HeaderChannel), resp)
}

// outcome gives o to each feature that follows it.
func (s *Core) outcome(ctx context.Context, o *Outcome, follows func(Feature) bool) error {
	for _, f := range s.features {
		if follows(f) {
			if err := f.Outcome(ctx, o); err != nil {
				return err
			}
		}
	}
	return nil
}

// addToError adds sentence to the error resp carries, what the butler
// reads of a failed notify (Outcome.Tell).
func addToError(resp *envelope.RouteResponse, sentence string) {
	if resp.Error != nil {
		resp.Error.Message = withSentence(resp.Error.Message, sentence)
	}
	if resp.Result != nil && resp.Result.NotifyResponse != nil {
		if e := resp.Result.NotifyResponse.Error; e != nil && e != resp.Error {
			e.Message = withSentence(e.Message, sentence)
		}
	}
}

// withSentence is an error's message with sentence after it.
func withSentence(msg, sentence string) string {
	return strings.TrimSuffix(msg, ".") + ". " + sentence
}
