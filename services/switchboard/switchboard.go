// Package switchboard is Herald's only router (architecture.md §1). It takes every
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

// Switchboard routes.
type Switchboard struct {
	cfg       *config.Config
	nc        *nats.Conn
	js        jetstream.JetStream
	log       *slog.Logger
	audit     *audit.Writer
	ledger    *ledger.Ledger
	approvals *approval.Store
	requests  jetstream.KeyValue // routed inbound messages (requests.go)
	// sessionsKV is herald_sessions: threads' sessions and claims (claim.go).
	sessionsKV jetstream.KeyValue
	metrics    *obs.Metrics
	// lastErr is the last failure of any handler, for the status answer.
	lastErr obs.LastError
	// later is work that outlives the message that started it (answering a
	// repeat from the ledger); Run cancels it at stop and waits for it.
	later     sync.WaitGroup
	laterCtx  context.Context
	stopLater context.CancelFunc
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
	s := &Switchboard{cfg: o.Config, nc: o.NC, js: js, log: log, audit: &audit.Writer{JS: js, Log: log}, ledger: led, approvals: approvals, requests: requests, sessionsKV: sessionsKV, metrics: o.Metrics}
	s.laterCtx, s.stopLater = context.WithCancel(context.WithoutCancel(ctx))
	defer s.audit.Flush()
	defer s.stopLater()
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
	defer func() { _ = svc.Stop() }()
	defer o.Metrics.WatchConsumers(js, consumers...)()
	o.Health.Add(HealthCheck, obs.All(state.Check, obs.ConsumerCheck(js, consumers...)))
	direct, err := s.serveDirect(s.laterCtx, o.Concurrency)
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
	s.later.Go(func() { s.expirePrompts(s.laterCtx) })
	s.later.Go(func() { s.flushHeld(s.laterCtx) })
	state.Set(nil)
	if o.Running != nil {
		o.Running()
	}
	err = g.Wait()
	// A direct route from now on finds no switchboard here and goes to
	// the stream at once; those taken are finished.
	_ = direct.Unsubscribe()
	s.stopLater()
	s.later.Wait()
	return err
}

// Status is the switchboard's answer on its status endpoint
// (herald.status.switchboard).
type Status struct {
	Service      string              `json:"service"`
	Butlers      []string            `json:"butlers"`
	Integrations []string            `json:"integrations"`
	Consumers    []obs.ConsumerState `json:"consumers"`
	LastError    *obs.ErrorRecord    `json:"last_error"`
}

func (s *Switchboard) status() any {
	st := Status{Service: obs.ServiceSwitchboard, Butlers: s.cfg.ButlerNames(), Integrations: []string{},
		Consumers: obs.Lag(context.Background(), s.js, consumers...), LastError: s.lastErr.Last()}
	for _, in := range s.cfg.Integrations {
		if !in.Disabled {
			st.Integrations = append(st.Integrations, in.Channel())
		}
	}
	return st
}

// butlerLabel is butler as a metric label: a name no configuration knows
// (a route published on a made-up subject) is "unknown", so such traffic
// cannot grow the series without bound.
func (s *Switchboard) butlerLabel(butler string) string {
	if s.cfg.Butler(butler) == nil {
		return "unknown"
	}
	return butler
}

// giveUpResult notes a delivery outcome that could not be relayed before it
// is dead-lettered.
func (s *Switchboard) giveUpResult(_ context.Context, _ jetstream.Msg, cause error) {
	s.lastErr.Record(cause)
	s.metrics.DeadLetter(bus.StreamResult)
}

// route checks one route.v1 of HERALD_ROUTE and forwards it to the
// messenger.
func (s *Switchboard) route(ctx context.Context, m jetstream.Msg) error {
	return s.routeOne(ctx, strings.TrimPrefix(m.Subject(), bus.RoutePrefix), m.Subject(), m.Data())
}

// routeOne checks route.v1 raw, published by butler on subject, and
// forwards it to the messenger.
func (s *Switchboard) routeOne(ctx context.Context, butler, subject string, raw []byte) error {
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
	in, err := s.resolve(butler, n)
	if err != nil {
		return err
	}
	n.Delivery.Channel = in.Channel()
	if n.Delivery.Intent == envelope.IntentEdit {
		return s.routeEdit(ctx, r, butler, key, args, in)
	}
	if err := s.checkAddressee(ctx, butler, in, n); err != nil {
		return err
	}
	prompt, err := s.prompts(ctx, butler, r.RequestContext.RequestID, in, n)
	if err != nil {
		return err
	}
	claimed, err := s.offerClaim(ctx, butler, in, r)
	if err != nil {
		return err
	}
	mustSee, err := s.offerAck(ctx, butler, key, in, r)
	if err != nil {
		return err
	}
	if held, err := s.holdQuiet(ctx, butler, r, in, key, prompt || claimed || mustSee); held || err != nil {
		return err // held for quiet hours (quiet.go), and the butler told so
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	// A prompt's, question's or claim's outcome, like a note's, ends the
	// wait of a reply to its copy (ackSent).
	ack, err := bus.Publish(ctx, s.js, bus.DeliverSubject("messenger"), data, key, deliverHeader(args, claimed, prompt, mustSee || prompt || claimed))
	if err != nil {
		return &deliverUnsure{fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)}
	}
	s.routed(ctx, r, butler, key, ack.Duplicate)
	return nil
}

// routeEdit hands butler's edit r to the messenger as an edit of the
// message it names (editTarget): no prompt, claim, acknowledgement or quiet
// hours apply to a change of a message already sent.
func (s *Switchboard) routeEdit(ctx context.Context, r *envelope.Route, butler, key, args string, in *config.Integration) error {
	id, err := s.editTarget(ctx, butler, in, r.Notify())
	if err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	h := deliverHeader(args, false, false, false)
	h.Set(bus.HeaderEdit, id)
	ack, err := bus.Publish(ctx, s.js, bus.DeliverSubject("messenger"), data, key, h)
	if err != nil {
		return &deliverUnsure{fmt.Errorf("%w: %w", envelope.ErrTargetUnavailable, err)}
	}
	s.routed(ctx, r, butler, key, ack.Duplicate)
	return nil
}

// checkOrigin checks that r, published on subject (herald.route.<butler>),
// carries a notify and speaks for butler only, a configured one. Origin
// identity comes from the subject, which NATS permissions tie to the
// butler's credentials; the envelope's fields must agree with it.
func (s *Switchboard) checkOrigin(subject, butler string, r *envelope.Route) error {
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

// checkAddressee checks whom n, going out through in, is for: a send only
// a recipient in allows, a reply or a reaction only a message that was
// routed to butler (inReplyTo).
func (s *Switchboard) checkAddressee(ctx context.Context, butler string, in *config.Integration, n *envelope.Notify) error {
	if n.Delivery.Intent == envelope.IntentSend || n.Delivery.Intent == "" {
		if !in.AllowsRecipient(n.Delivery.Recipient) {
			return fmt.Errorf("%w: %s may not send to %q through %s; allowed are its default recipient, its inbound allow_from and approvers, and allow_to", envelope.ErrForbidden, butler, n.Delivery.Recipient, in.Channel())
		}
		return nil
	}
	return s.inReplyTo(ctx, butler, in, n)
}

// deliverHeader is the header of a delivery: the caller's arguments digest
// (args, if any), and what relay has to do with its outcome: record its
// sent message ids for a claim (claimSent), a prompt's copy
// (approvals.Sent), a note that must be seen, and the end of any copy's
// wait (ackSent).
func deliverHeader(args string, claimed, prompt, mustSee bool) nats.Header {
	var relays []string
	for kind, on := range map[string]bool{relayClaim: claimed, relayPrompt: prompt, relayAck: mustSee} {
		if on {
			relays = append(relays, kind)
		}
	}
	h := nats.Header{}
	if args != "" {
		h.Set(bus.HeaderArgs, args)
	}
	if len(relays) > 0 {
		slices.Sort(relays)
		h.Set(bus.HeaderRelay, strings.Join(relays, ","))
	}
	return h
}

// routed notes a route the messenger's stream took: a duplicate (the
// messenger has this delivery already) is answered from the ledger once it
// is final, later, and nothing is sent again; a new one is counted. Either
// is audited.
func (s *Switchboard) routed(ctx context.Context, r *envelope.Route, butler, key string, duplicate bool) {
	n := r.Notify()
	if duplicate {
		s.later.Go(func() { s.answerFromLedger(r, butler, key) })
	} else {
		s.metrics.Routed(butler, n.Delivery.Channel)
	}
	s.audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: butler, Channel: n.Delivery.Channel, Intent: n.Delivery.Intent, Recipient: n.Delivery.Recipient, RequestID: r.RequestContext.RequestID, Key: key, CallerKey: n.IdempotencyKey})
	s.log.DebugContext(ctx, "routed", "butler", butler, "channel", n.Delivery.Channel, "request_id", r.RequestContext.RequestID)
}

// prompts checks a notify that asks a person something: a question (ask),
// or a permission prompt, which a butler relays as its client's request
// (permission_request) and the switchboard opens and writes (openPrompt). A
// butler's own buttons never answer a prompt: "perm:" data is Herald's.
func (s *Switchboard) prompts(ctx context.Context, butler, requestID string, in *config.Integration, n *envelope.Notify) (prompt bool, err error) {
	for _, a := range n.Delivery.Actions {
		if strings.HasPrefix(a.Data, "perm:") {
			return false, fmt.Errorf("%w: button data %q answers a permission prompt, and only Herald writes those: relay the client's request as permission_request", envelope.ErrForbidden, a.Data)
		}
	}
	if n.PermissionRequest != nil {
		return true, s.openPrompt(ctx, butler, requestID, in, n)
	}
	if qid := approval.QuestionOf(n.IdempotencyKey); qid != "" || hasAnswerButtons(n) {
		return s.question(ctx, butler, requestID, qid, in, n)
	}
	return false, nil
}

// answerFromLedger answers a repeated route with the outcome recorded for its
// idempotency key.
func (s *Switchboard) answerFromLedger(r *envelope.Route, butler, key string) {
	ctx, cancel := context.WithTimeout(s.laterCtx, ledgerWait)
	defer cancel()
	rec, err := s.ledger.Wait(ctx, butler, key)
	if err != nil {
		s.log.WarnContext(ctx, "repeat not answered: no final delivery record in time", "butler", butler, "request_id", r.RequestContext.RequestID, "err", err)
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
		// Seed 003's sentence first, as the schema's check words it.
		typ, _, _ := strings.Cut(ch, ":")
		return nil, fmt.Errorf("%w: Unsupported channel '%s': %w", envelope.ErrValidation, typ, err)
	case errors.Is(err, config.ErrNotGranted):
		return nil, fmt.Errorf("%w: %w", envelope.ErrForbidden, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", envelope.ErrNotFound, err)
	}
	return in, nil
}

// ledgerKey is what an idempotency key must look like to become part of a
// ledger key.
var ledgerKey = regexp.MustCompile(`^[A-Za-z0-9_=-]{1,128}$`)

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
	s.metrics.Refused(s.butlerLabel(butler), envelope.ClassOf(cause))
	s.metrics.DeadLetter(bus.StreamRoute)
	s.audit.Write(ctx, audit.Record{Kind: kind, Butler: butler, Channel: d.Channel, Intent: d.Intent, Recipient: d.Recipient, RequestID: id, Class: envelope.ClassOf(cause), Reason: cause.Error()})
	// A repeat of this notify within JetStream's duplicate window is dropped
	// before it reaches the switchboard: the ledger answers it with this
	// refusal, instead of leaving it "queued" for an outcome that never comes.
	if key := m.Headers().Get(nats.MsgIdHdr); ledgerKey.MatchString(key) && s.cfg.Butler(butler) != nil {
		args := ""
		if r, err := envelope.DecodeRoute(m.Data()); err == nil && r.Notify() != nil && r.Notify().IdempotencyKey != "" {
			args = r.Notify().ArgsDigest()
		}
		if err := s.ledger.Refuse(ctx, butler, key, args, envelope.ErrorBodyFrom(cause)); err != nil {
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
	if onward, err := s.ackSent(ctx, id, nr); err != nil {
		s.log.WarnContext(ctx, "a refused notify's copy is still taken as on its way; replies in its chat wait for it up to 10 minutes", "butler", butler, "request_id", id, "err", err)
	} else if onward != "" {
		resp.Error.Message = withOnward(resp.Error.Message, onward)
	}
	if err := s.settle(ctx, butler, id, d.Channel, resp); err != nil {
		s.log.ErrorContext(ctx, "a failed notify's butler could not be told", "butler", butler, "request_id", id, "err", err)
	}
}

// relay passes a delivery outcome from the messenger to the waiting butler.
func (s *Switchboard) relay(ctx context.Context, m jetstream.Msg) error {
	rest := strings.TrimPrefix(m.Subject(), bus.ResultPrefix)
	butler, id, ok := strings.Cut(rest, ".")
	if !ok {
		return fmt.Errorf("%w: result on unexpected subject %s", envelope.ErrValidation, m.Subject())
	}
	resp, err := envelope.DecodeTrustedResponse(m.Data())
	if err != nil {
		return err
	}
	s.audit.Write(ctx, audit.Outcome(butler, id, m.Headers().Get(bus.HeaderKey), m.Headers().Get(bus.HeaderChannel), m.Headers().Get(bus.HeaderIntent), resp))
	if butler == config.HeraldOrigin {
		// Herald's own messages (pairing codes, closed prompts): nobody
		// waits, and no butler is to be told.
		return nil
	}
	if resp.Result != nil {
		nr := resp.Result.NotifyResponse
		if relaying(m, relayClaim) {
			if err := s.claimSent(ctx, id, nr); err != nil {
				return err
			}
		}
		if relaying(m, relayPrompt) && nr != nil && nr.Status == envelope.StatusOK && nr.Delivery != nil {
			if err := s.copySent(ctx, id, nr.Delivery.MessageIDs); err != nil {
				return fmt.Errorf("%w: recording a permission prompt's copy: %w", envelope.ErrTargetUnavailable, err)
			}
		}
	}
	if relaying(m, relayAck) {
		// Sent or not, a note's copy is no longer on its way.
		var nr *envelope.NotifyResponse
		if resp.Result != nil {
			nr = resp.Result.NotifyResponse
		}
		onward, err := s.ackSent(ctx, id, nr)
		if err != nil {
			return err
		}
		if onward != "" {
			tellOnward(resp, onward)
		}
	}
	return s.settle(ctx, butler, id, m.Headers().Get(bus.HeaderChannel), resp)
}

// tellOnward adds onward to the error resp carries, what the butler reads
// of a failed notify.
func tellOnward(resp *envelope.RouteResponse, onward string) {
	if resp.Error != nil {
		resp.Error.Message = withOnward(resp.Error.Message, onward)
	}
	if resp.Result != nil && resp.Result.NotifyResponse != nil {
		if e := resp.Result.NotifyResponse.Error; e != nil && e != resp.Error {
			e.Message = withOnward(e.Message, onward)
		}
	}
}

// withOnward is an error's message with onward, a sentence, after it.
func withOnward(msg, onward string) string {
	return strings.TrimSuffix(msg, ".") + ". " + onward
}

// What relay does with a delivery's outcome (bus.HeaderRelay, a comma
// separated list of these).
const (
	relayClaim  = "claim"
	relayPrompt = "prompt"
	relayAck    = "ack"
)

// relaying reports whether the outcome m relays asks for kind.
func relaying(m jetstream.Msg, kind string) bool {
	return slices.Contains(strings.Split(m.Headers().Get(bus.HeaderRelay), ","), kind)
}

// settle gives the waiting butler its answer. When nobody waits any more (the
// caller was told "queued", which promises delivery or word of failure) and
// the outcome is a failure or uncertain, the butler gets that word as a
// delivery notice on its inbox instead: a channel notification its model sees.
func (s *Switchboard) settle(ctx context.Context, butler, id, channel string, resp *envelope.RouteResponse) error {
	if s.answer(butler, id, resp) {
		return nil
	}
	var nr *envelope.NotifyResponse
	if resp.Result != nil {
		nr = resp.Result.NotifyResponse
	}
	if nr == nil && resp.Error != nil {
		nr = envelope.Failed(id, resp.Error)
	}
	if nr == nil || (nr.Error == nil && (nr.Delivery == nil || nr.Delivery.Outcome != ledger.OutcomeUncertain)) {
		return nil // delivered: "queued" came true
	}
	if nr.Delivery != nil && nr.Delivery.Channel != "" {
		channel = nr.Delivery.Channel
	}
	notice := envelope.NewDeliveryNotice(id, channel, nr)
	ir := envelope.NewInboundRoute(butler, notice)
	ctx = envelope.Traced(ctx, ir)
	b, err := json.Marshal(ir)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	if _, err := bus.Publish(ctx, s.js, bus.InboxSubject(butler), b, "notice:"+id, nil); err != nil {
		return fmt.Errorf("%w: telling butler %s about request %s: %w", envelope.ErrTargetUnavailable, butler, id, err)
	}
	s.audit.Write(ctx, audit.Record{Kind: audit.Routed, Butler: butler, Channel: channel, RequestID: id, Reason: notice.Meta[envelope.MetaKind]})
	s.log.InfoContext(ctx, "butler told of a late outcome", "butler", butler, "request_id", id, "kind", notice.Meta[envelope.MetaKind])
	return nil
}

// answer sends a route_response to the caller's reply subject (core NATS) and
// reports whether the caller confirmed it: false means nobody is waiting any
// more (the ledger still holds the outcome).
func (s *Switchboard) answer(butler, id string, resp *envelope.RouteResponse) bool {
	b, err := json.Marshal(resp)
	if err != nil {
		s.log.Error("encoding answer", "request_id", id, "err", err)
		return false
	}
	if _, err := s.nc.Request(bus.ReplySubject(butler, id), b, bus.AnswerWait); err != nil {
		if !errors.Is(err, nats.ErrNoResponders) {
			s.log.Warn("answer not confirmed", "butler", butler, "request_id", id, "err", err)
		}
		return false
	}
	return true
}
