// Package messenger is the only holder of channel credentials (architecture.md §1). It
// consumes deliveries from the switchboard, carries each out once on its
// integration (Telegram, email, log, ...), records it in the herald_deliveries
// ledger chunk by chunk, and answers the waiting butler (or, when nobody
// waits, hands the outcome back to the switchboard).
package messenger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/pkg/audit"
	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/obs"
	_ "github.com/heraldhq/herald/services/messenger/channels" // every channel of this build
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// Options configure a messenger.
type Options struct {
	Config *config.Config
	NC     *nats.Conn
	Log    *slog.Logger
	Getenv config.Getenv
	// Channels overrides the registered senders by channel type (tests,
	// benchmarks); a nil factory takes the type away.
	Channels map[string]deliver.Factory
	// Receivers overrides the registered receivers by channel type.
	Receivers map[string]deliver.ReceiverFactory
	// Concurrency of deliveries; 0 takes bus.Worker's default.
	Concurrency int
	// Metrics, Health and HTTP are the process's (nil: none). The pushed
	// channels' endpoints are mounted on HTTP; without one, the messenger
	// serves them on http_listen itself.
	Metrics *obs.Metrics
	Health  *obs.Health
	HTTP    *obs.Server
	// Running, if set, is called once it works: its consumers run (a
	// reload waits for it before it says the new configuration runs).
	Running func()
}

// HealthCheck names the messenger's readiness check: its deliveries are
// consumed and its receivers run.
const HealthCheck = "messenger"

// consumers are the durable consumers the messenger works from.
var consumers = []obs.Consumer{{Stream: bus.StreamDeliver, Durable: bus.ConsumerMessenger}}

// Messenger delivers.
type Messenger struct {
	cfg     *config.Config
	nc      *nats.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	ledger  *ledger.Ledger
	audit   *audit.Writer
	senders map[string]deliver.Sender // by integration id
	broken  map[string]error          // integrations that could not be set up
	// unworkable are the integrations whose configuration alone says why
	// they cannot work (a secret not set: config.Unworkable), in the words
	// herald dev's banner and herald config check use; status and Health
	// say that rather than the channel's error.
	unworkable map[string]string
	deaf       map[string]error // integrations whose receiver could not be set up
	instance   string
	leaseTTL   time.Duration
	leases     jetstream.KeyValue // bus.BucketLeases: presence (presence.go)

	metrics *obs.Metrics
	lastErr obs.LastError

	mu       sync.Mutex
	active   map[string]struct{} // idempotency keys being delivered in this process
	attempts uint64
	sinks    map[string]*sink // receiving integrations, by id
	// lastOut is when each integration (type:id) last delivered, in
	// this process (its status).
	lastOut map[string]time.Time

	transcriber *transcriber // nil without transcribe (transcribe.go)
}

// Run delivers until ctx is done, then drains and closes its senders.
func Run(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("service", "messenger")
	js, err := bus.Open(ctx, o.NC, bus.Topology{Replicas: o.Config.NATS.Replicas, FilesMaxBytes: o.Config.NATS.FilesMaxBytes, Uses: &bus.MessengerUses, Log: log}, time.Duration(o.Config.NATS.Wait), log)
	if err != nil {
		return err
	}
	led, err := ledger.Open(ctx, js)
	if err != nil {
		return err
	}
	m := &Messenger{cfg: o.Config, nc: o.NC, js: js, log: log, ledger: led, audit: &audit.Writer{JS: js, Log: log},
		senders: map[string]deliver.Sender{}, broken: map[string]error{}, deaf: map[string]error{}, instance: instanceName(),
		leaseTTL: ledger.LeaseTTL, active: map[string]struct{}{}, metrics: o.Metrics, sinks: map[string]*sink{}, lastOut: map[string]time.Time{}}
	defer m.audit.Flush()
	state := obs.NewState()
	o.Health.ReadyWhenUnable(o.Config.ReadyWhenDegraded)
	o.Health.Add(HealthCheck, obs.All(state.Check, obs.ConsumerCheck(js, consumers...), m.receiversCheck))
	getenv := o.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	status, err := js.KeyValue(ctx, bus.BucketStatus)
	if err != nil {
		return err
	}
	if m.leases, err = js.KeyValue(ctx, bus.BucketLeases); err != nil {
		return err
	}
	seen, err := js.KeyValue(ctx, bus.BucketSeen)
	if err != nil {
		return fmt.Errorf("opening %s (run herald setup after upgrading): %w", bus.BucketSeen, err)
	}
	m.transcriber = newTranscriber(o.Config.Transcribe, getenv)
	env := deliver.Env{Getenv: getenv, Logger: log, JS: js, Instance: m.instance, HTTP: deliver.NewHTTP()}
	if o.Config.PublicURL != "" {
		m.mountAckLinks(env.HTTP)
	}
	receivers, forget, err := m.setUp(ctx, o, env)
	if err != nil {
		return err
	}
	defer forget()
	defer m.close()
	srv, err := m.mountHTTP(o, env)
	if err != nil {
		return err
	}
	if srv != nil {
		defer srv.Mount(nil)
	}
	svc, err := obs.AddService(o.NC, obs.ServiceMessenger, obs.Version, m.status)
	if err != nil {
		return err
	}
	svc.SetHealth(o.Health)
	defer func() { _ = svc.Stop() }()
	defer o.Metrics.WatchConsumers(js, consumers...)()
	defer o.Metrics.IntegrationsUp(m.integrationsUp)()
	defer o.Metrics.Receivers(m.receiverStates)()
	return m.serve(ctx, o, receivers, status, seen, srv, state)
}

// reason is why integration id cannot work, err its channel's error: what
// the configuration says (m.unworkable) where it says, else err.
func (m *Messenger) reason(id string, err error) string {
	return cmp.Or(m.unworkable[id], err.Error())
}

// setUp makes each enabled integration's sender and receiver. One that
// cannot be set up is noted (its sends fail, Health names it) and the
// others go on; forget takes the notes back at stop, for a reload may
// fix it. A channel type with no implementation fails the whole start.
func (m *Messenger) setUp(ctx context.Context, o Options, env deliver.Env) (receivers map[string]deliver.Receiver, forget func(), err error) {
	var noted []string
	forget = func() {
		for _, name := range noted {
			o.Health.Unable(name, "")
		}
	}
	unable := func(name string, err error) {
		o.Health.Unable(name, err.Error())
		noted = append(noted, name)
	}
	receivers = map[string]deliver.Receiver{}
	m.unworkable = o.Config.Unworkable(env.Getenv)
	for _, in := range o.Config.Integrations {
		if in.Disabled {
			continue
		}
		ch, _ := deliver.Lookup(in.Type)
		factory, ok := o.Channels[in.Type]
		if !ok {
			factory = ch.New
		}
		if factory == nil {
			// Configured but not implemented: say so at start, not at the
			// first notify.
			m.close()
			forget()
			return nil, nil, fmt.Errorf("%w: integration %q: channel type %s has no implementation in this version of Herald; remove the integration or set disabled: true",
				config.ErrInvalid, in.ID, in.Type)
		}
		s, err := factory(in, env)
		if err != nil {
			// One misconfigured account must not silence the others.
			m.log.ErrorContext(ctx, "integration unavailable", "integration", in.ID, "channel", in.Type, "err", err)
			m.broken[in.ID] = err
			unable("integration."+in.ID, errors.New(m.reason(in.ID, err)))
			continue
		}
		m.senders[in.ID] = s
		if !in.Inbound.Enabled {
			continue
		}
		// A channel that both sends and receives (the web page) is one object.
		if r, ok := s.(deliver.Receiver); ok {
			receivers[in.ID] = r
			continue
		}
		rf, ok := o.Receivers[in.Type]
		if !ok {
			rf = ch.NewReceiver
		}
		if rf == nil {
			m.log.WarnContext(ctx, "inbound is configured but this channel type cannot receive yet", "integration", in.ID, "channel", in.Type)
			continue
		}
		r, err := rf(in, env)
		if err != nil {
			m.log.ErrorContext(ctx, "receiver unavailable", "integration", in.ID, "channel", in.Type, "err", err)
			m.deaf[in.ID] = err
			unable("integration."+in.ID+".inbound", errors.New(m.reason(in.ID, err)))
			continue
		}
		if r != nil {
			receivers[in.ID] = r
		}
	}
	return receivers, forget, nil
}

// mountHTTP mounts the pushed channels' endpoints (webhooks, Slack's
// events, ack links) on the process's listener, or on one of the
// messenger's own if it runs alone with none; nil if there are none.
func (m *Messenger) mountHTTP(o Options, env deliver.Env) (*obs.Server, error) {
	srv := o.HTTP
	if srv == nil && len(env.HTTP.Patterns()) > 0 {
		srv = obs.NewServer(o.Config.HTTPListenFor("messenger"), nil, nil, m.log)
		if err := srv.Listen(); err != nil {
			return nil, fmt.Errorf("http_listen: %w", err)
		}
	}
	if srv != nil {
		// Mounted in place of an earlier run's (a reload restarts the
		// messenger); unmounted at stop, so a provider calling meanwhile is
		// told to come back rather than sent to a stopped receiver.
		srv.Mount(http.MaxBytesHandler(env.HTTP, maxHookBody))
	}
	return srv, nil
}

// serve runs the delivery worker, the receivers, presence and (when the
// messenger has its own) the HTTP listener until ctx is done or the worker
// fails.
func (m *Messenger) serve(ctx context.Context, o Options, receivers map[string]deliver.Receiver, status, seen jetstream.KeyValue, srv *obs.Server, state *obs.State) error {
	w := &bus.Worker{Stream: bus.StreamDeliver, Durable: bus.ConsumerMessenger, Handle: obs.Noted(&m.lastErr, m.deliver), GiveUp: m.giveUp,
		Concurrency: o.Concurrency, RetryFor: time.Duration(o.Config.Delivery.RetryFor), Log: m.log}
	g, ctx := errgroup.WithContext(ctx)
	stopSigns, err := m.signsOfLife(ctx)
	if err != nil {
		return fmt.Errorf("listening for the butlers' signs of life: %w", err)
	}
	defer stopSigns()
	stopDownloads, err := m.downloads(ctx)
	if err != nil {
		return fmt.Errorf("listening for the butlers' downloads: %w", err)
	}
	defer stopDownloads()
	g.Go(func() error { m.presence(ctx); return nil })
	for id, r := range receivers {
		s := &sink{in: *o.Config.Integration(id), js: m.js, status: status, seen: seen, audit: m.audit, m: m}
		m.mu.Lock()
		m.sinks[id] = s
		m.mu.Unlock()
		g.Go(func() error {
			defer s.stop()
			m.receive(ctx, r, s)
			return nil
		})
	}
	if srv != nil && o.HTTP == nil {
		// Its own listener, for the pushed channels alone.
		g.Go(func() error { return srv.Serve(ctx) })
	}
	g.Go(func() error {
		err := w.Run(ctx, m.js)
		if err != nil {
			state.Set(fmt.Errorf("%w: consumer %s: %w", obs.ErrStopped, w.Durable, err))
		}
		return err
	})
	state.Set(nil)
	if o.Running != nil {
		o.Running()
	}
	m.log.InfoContext(ctx, "messenger running", "integrations", len(m.senders), "receivers", len(receivers), "unavailable", len(m.broken))
	return g.Wait()
}

func (m *Messenger) close() {
	for id, s := range m.senders {
		if c, ok := s.(deliver.Closer); ok {
			if err := c.Close(); err != nil {
				m.log.Warn("closing integration", "integration", id, "err", err)
			}
		}
	}
}

// deliver carries out one routed notify, exactly once as far as the ledger
// can tell: a final record is answered from, a half-done one is resumed.
func (m *Messenger) deliver(ctx context.Context, msg jetstream.Msg) error {
	r, err := envelope.DecodeTrustedRoute(msg.Data())
	if err != nil {
		return err
	}
	ctx = envelope.Traced(ctx, r)
	n := r.Notify()
	if n == nil {
		return fmt.Errorf("%w: delivery carries no notify_request", envelope.ErrValidation)
	}
	key := msg.Headers().Get(bus.HeaderKey)
	if key == "" {
		key = r.IdempotencyKey()
	}
	// A message's first delivery (not an operator's replay) most likely has
	// no ledger record yet: it is not read first, and the claim before the
	// provider call creates it. If one exists after all (the same notify
	// again, past the duplicate window), the create fails before any call
	// and the delivery starts over from the record.
	fresh := msg.Headers().Get(bus.HeaderReplay) == ""
	if meta, err := msg.Metadata(); err == nil && meta.NumDelivered > 1 {
		m.metrics.Retry(n.Delivery.Channel)
		fresh = false
	}
	_, id, _ := strings.Cut(n.Delivery.Channel, ":")
	sender := m.senders[id]
	if sender == nil {
		if err := m.broken[id]; err != nil {
			// A configuration error: retrying will not fix it, an operator will.
			return fmt.Errorf("%w: integration %q is configured but cannot be used (%w); fix it and restart the messenger, or use another channel", envelope.ErrNotFound, id, err)
		}
		return fmt.Errorf("%w: integration %q is not configured in this messenger", envelope.ErrNotFound, n.Delivery.Channel)
	}

	// One attempt per delivery in this process: a redelivery that arrives
	// while the first is still working (NATS came back and handed it out
	// again) waits for its outcome instead of racing it.
	if !m.claimKey(key) {
		return &envelope.RetryAfterError{Wait: time.Second, Err: fmt.Errorf("%w: delivery %s is in progress in this messenger", envelope.ErrTargetUnavailable, envelope.DeliveryID(key))}
	}
	defer m.releaseKey(key)
	return m.attempt(ctx, msg, r, key, sender, fresh)
}

// attempt delivers r on sender; fresh skips reading its ledger record first.
func (m *Messenger) attempt(ctx context.Context, msg jetstream.Msg, r *envelope.Route, key string, sender deliver.Sender, fresh bool) error {
	n := r.Notify()
	rec, err := m.startingRecord(ctx, msg, r, key, fresh)
	if err != nil {
		return err
	}
	if rec != nil && rec.Final() {
		m.log.InfoContext(ctx, "already delivered; answering from the ledger", "butler", n.OriginButler, "delivery_id", rec.DeliveryID, "request_id", r.RequestContext.RequestID)
		return m.answer(ctx, msg, r, key, rec.Response(r.RequestContext.RequestID))
	}
	if rec == nil {
		rec = newRecord(msg, n, key)
		rec.Chat = m.chatOf(n)
	} else if err := m.heldElsewhere(ctx, r, rec); err != nil {
		return err
	}
	// An earlier try may have found the delivery uncertain already.
	outcome, note, err := m.resumed(ctx, r, key, rec)
	if err != nil {
		return err
	}
	files, unspool, err := m.spool(ctx, n)
	if err != nil {
		return err
	}
	defer unspool()
	a := m.newAttempt(rec)
	d := newDelivery(ctx, n, key, rec, a)
	d.Files = files
	receipt, err := carryOut(ctx, msg, sender, d)
	if err != nil {
		a.abandon(ctx, err)
		if fresh && errors.Is(err, errTakenOver) && !a.claimed() {
			// The record exists: no call was made; start over from it.
			return m.attempt(ctx, msg, r, key, sender, false)
		}
		return err
	}
	if outcome == "" {
		outcome = ledger.Confirmed
	}
	if err := a.finish(ctx, receipt.MessageIDs, ledger.Sent, outcome, note); err != nil {
		// Sent, and the ledger could not be told before this messenger
		// stopped: the next attempt finds the call uncertain.
		return err
	}
	m.reportDelivered(ctx, r, rec, receipt, outcome)
	return m.answer(ctx, msg, r, key, rec.Response(r.RequestContext.RequestID))
}

// uncertain handles a delivery whose last attempt died while calling the
// provider, as the integration's on_uncertain says: resend that part (at
// least once) or skip it (at most once: it counts as done, with an empty id,
// and the sender goes on after it). Either way it is audited, and the
// outcome the butler gets says so.
func (m *Messenger) uncertain(ctx context.Context, r *envelope.Route, key string, rec *ledger.Record) (outcome, note string, err error) {
	n := r.Notify()
	_, id, _ := strings.Cut(n.Delivery.Channel, ":")
	policy := config.OnUncertainResend
	if in := m.cfg.Integration(id); in != nil && in.OnUncertain != "" {
		policy = in.OnUncertain
	}
	chunk := len(rec.MessageIDs) + 1
	if policy == config.OnUncertainSkip {
		note = fmt.Sprintf("%s gave no answer to part %d of this message (a messenger stopped, or the call timed out or was cut off) and it was not sent again (on_uncertain: skip): the human may not have it", n.Delivery.Channel, chunk)
		rec.MessageIDs = append(rec.MessageIDs, "")
	} else {
		note = fmt.Sprintf("%s gave no answer to part %d of this message (a messenger stopped, or the call timed out or was cut off), so it was sent again (on_uncertain: resend): the human may have it twice", n.Delivery.Channel, chunk)
	}
	// Recorded before it is audited, so that a try that fails from here on
	// does not find the call uncertain again.
	rec.Calling, rec.Attempt, rec.Outcome, rec.Note = false, "", ledger.OutcomeUncertain, note
	if err := m.ledger.Save(ctx, rec); err != nil {
		return "", "", err
	}
	m.audit.Write(ctx, audit.Record{Kind: audit.Uncertain, Butler: n.OriginButler, Channel: n.Delivery.Channel, Intent: n.Delivery.Intent, RequestID: r.RequestContext.RequestID, Key: key, DeliveryID: rec.DeliveryID, Reason: note})
	m.log.WarnContext(ctx, "uncertain delivery", "butler", n.OriginButler, "delivery_id", rec.DeliveryID, "on_uncertain", policy, "chunk", chunk, "request_id", r.RequestContext.RequestID)
	return ledger.OutcomeUncertain, note, nil
}

// giveUp answers a delivery that will not be tried again, and records a
// permanent failure so a repeat of the same notify is answered the same way.
func (m *Messenger) giveUp(ctx context.Context, msg jetstream.Msg, cause error) {
	m.metrics.DeadLetter(bus.StreamDeliver)
	m.lastErr.Record(cause)
	r, err := envelope.DecodeTrustedRoute(msg.Data())
	if err != nil || r.Notify() == nil {
		m.log.ErrorContext(ctx, "undeliverable and undecodable; dead-lettered", "subject", msg.Subject(), "err", cause)
		return
	}
	n, key := r.Notify(), msg.Headers().Get(bus.HeaderKey)
	if key == "" {
		key = r.IdempotencyKey()
	}
	// The failure is the key's final answer, so a repeat of the same notify
	// (which JetStream may drop as a duplicate before it gets here) is
	// answered the same way instead of waiting for an outcome that never comes.
	// What went out before the failure is not hidden: a delivery with parts
	// accepted, or whose last call's outcome is unknown, is uncertain.
	rec, err := m.ledger.Get(ctx, n.OriginButler, key)
	if err != nil {
		m.log.WarnContext(ctx, "reading the delivery record of a failed delivery", "request_id", r.RequestContext.RequestID, "err", err)
	}
	if rec != nil {
		held, _ := rec.HeldBy("", m.leaseTTL)
		if held {
			gone, _ := m.holderGone(ctx, rec.Attempt)
			held = !gone
		}
		if rec.Final() || held {
			m.log.WarnContext(ctx, "giving up on a copy of a delivery that is done or in progress elsewhere", "delivery_id", rec.DeliveryID, "err", cause)
			return
		}
	}
	if rec == nil {
		rec = &ledger.Record{Key: key, Butler: n.OriginButler, Channel: n.Delivery.Channel, DeliveryID: envelope.DeliveryID(key)}
	}
	if err == nil {
		sent := len(slices.DeleteFunc(slices.Clone(rec.MessageIDs), func(id string) bool { return id == "" }))
		if sent > 0 || rec.Calling {
			rec.Status, rec.Outcome = ledger.Uncertain, ledger.OutcomeUncertain
			rec.Note = fmt.Sprintf("delivery failed part-way (%s): %d part(s) were accepted", envelope.ErrorBodyFrom(cause).Message, sent)
			if rec.Calling {
				rec.Note += ", and the outcome of the last call is unknown"
			}
		} else {
			rec.Status, rec.Error = ledger.Failed, envelope.ErrorBodyFrom(cause)
		}
		rec.Calling, rec.Attempt = false, ""
		if err := m.ledger.Save(ctx, rec); err != nil {
			m.log.WarnContext(ctx, "recording failure", "delivery_id", rec.DeliveryID, "err", err)
		}
	}
	nr := envelope.Failed(r.RequestContext.RequestID, cause)
	counted, class := obs.OutcomeFailed, envelope.ClassOf(cause)
	if rec.Status == ledger.Uncertain {
		counted = obs.OutcomeUncertain
		nr = rec.Response(r.RequestContext.RequestID)
		m.audit.Write(ctx, audit.Record{Kind: audit.Uncertain, Butler: n.OriginButler, Channel: n.Delivery.Channel, Intent: n.Delivery.Intent, RequestID: r.RequestContext.RequestID, Key: key, DeliveryID: rec.DeliveryID, Reason: rec.Note})
	}
	m.metrics.Delivery(n.OriginButler, n.Delivery.Channel, counted, class, obs.RequestIDTime(r.RequestContext.RequestID))
	if err := m.answer(ctx, msg, r, key, nr); err != nil {
		m.log.ErrorContext(ctx, "answering a failed delivery", "request_id", r.RequestContext.RequestID, "err", err)
	}
}

// answer gives the outcome to the butler waiting for it, on its reply
// subject, and audits it. The butler confirms it took the answer; when it
// does not (it answered its caller "queued" and left, or it is gone), or when
// the switchboard asked for the outcome (bus.HeaderRelay), the outcome is
// stored on HERALD_RESULT instead, for the switchboard to relay, audit and,
// for a caller that left, turn into a delivery notice on its inbox. The
// outcome is in the ledger before this runs, so a crash in between is
// answered from there on redelivery.
func (m *Messenger) answer(ctx context.Context, msg jetstream.Msg, r *envelope.Route, key string, nr *envelope.NotifyResponse) error {
	resp := envelope.Answer(r, nr)
	b, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("%w: %w", envelope.ErrInternal, err)
	}
	channel, intent, id, butler := r.Notify().Delivery.Channel, r.Notify().Delivery.Intent, r.RequestContext.RequestID, r.Target.Butler
	h := nats.Header{}
	if tp := envelope.Traceparent(envelope.Traced(ctx, r)); tp != "" {
		h.Set(envelope.HeaderTraceparent, tp)
	}
	if m.nc != nil && msg.Headers().Get(bus.HeaderRelay) == "" {
		if _, err := m.nc.RequestMsg(&nats.Msg{Subject: bus.ReplySubject(butler, id), Data: b, Header: h}, bus.AnswerWait); err == nil {
			m.audit.Write(ctx, audit.Outcome(butler, id, key, channel, intent, resp))
			return nil
		}
	}
	h.Set(bus.HeaderChannel, channel)
	h.Set(bus.HeaderKey, key)
	if intent != "" {
		h.Set(bus.HeaderIntent, intent)
	}
	if relay := msg.Headers().Get(bus.HeaderRelay); relay != "" {
		h.Set(bus.HeaderRelay, relay) // what the switchboard has to do with it
	}
	_, err = m.js.PublishMsg(ctx, &nats.Msg{Subject: bus.ResultSubject(butler, id), Data: b, Header: withMsgID(h, "result:"+id)})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: publishing result: %w", envelope.ErrTargetUnavailable, err)
	}
	return err
}

func withMsgID(h nats.Header, id string) nats.Header {
	h.Set(nats.MsgIdHdr, id)
	return h
}

// maxHookBody bounds one request to a pushed channel's endpoint.
const maxHookBody = 1 << 20
