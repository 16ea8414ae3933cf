package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ratelimit"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// timing is how the receiver waits; tests shorten it.
type timing struct {
	// retry backs off between failed connections and while the bus does not
	// take a message.
	retryMin, retryMax time.Duration
	// lease is the TTL of the gateway lease: how long the other replicas
	// wait before taking over from one that died.
	lease time.Duration
	// hello bounds dialling the gateway and its Hello.
	hello time.Duration
	// invalidMin and invalidMax bound the random wait after an Invalid
	// Session before identifying again (Discord asks for 1 to 5 seconds).
	invalidMin, invalidMax time.Duration
	// identifyGap is the least time between two identifies (Discord allows
	// one per 5 seconds).
	identifyGap time.Duration
	// stable is how long a connection must have lasted for the backoff to
	// start over: a session that opens and closes again at once is a loop
	// to slow down, not a recovery.
	stable time.Duration
}

var defaultTiming = timing{
	retryMin:    time.Second,
	retryMax:    time.Minute,
	lease:       10 * time.Second,
	hello:       30 * time.Second,
	invalidMin:  time.Second,
	invalidMax:  5 * time.Second,
	identifyGap: 5 * time.Second,
	stable:      time.Minute,
}

// receiver keeps one bot's gateway session and hands what people write to
// it, and the buttons they press, to the sink.
type receiver struct {
	*sender    // the REST client, the token (for scrubbing) and the log
	gatewayURL string
	instance   string
	js         jetstream.JetStream
	timing     timing
	kinds      *channelKinds
	// warnNoContent logs once that server messages come without text.
	warnNoContent sync.Once
}

// NewReceiver is the deliver.ReceiverFactory of Discord integrations: it
// returns nil, nil unless the integration takes inbound messages. Its one
// gateway session per bot (a lease across replicas) is resumed across
// reconnects and restarts, and an event counts as handled only once the sink
// stored it, since Discord replays nothing else; a close code reconnecting
// cannot help stops it. docs/channels.md#discord (Receiving) has the rest.
func NewReceiver(in config.Integration, env deliver.Env) (deliver.Receiver, error) {
	if !in.Inbound.Enabled || in.Disabled {
		return nil, nil
	}
	s, err := newSender(in, env)
	if err != nil {
		return nil, err
	}
	c, err := config.SettingsOf[*Config](&in)
	if err != nil {
		return nil, err
	}
	instance := env.Replica()
	r := &receiver{
		sender:     s,
		gatewayURL: strings.TrimSpace(c.GatewayURL),
		instance:   instance,
		js:         env.JS,
		timing:     defaultTiming,
	}
	r.kinds = newChannelKinds(r.channelKind)
	r.log = r.log.With("instance", instance)
	return r, nil
}

// leaseKey names the bot in herald_leases and herald_channel_state.
func (r *receiver) leaseKey() string {
	if r.botID != "" {
		return "discord." + r.botID
	}
	return "discord." + r.id
}

// Receive keeps the gateway session while this replica holds the bot's
// lease and stands by while another does, until ctx is done.
func (r *receiver) Receive(ctx context.Context, sink deliver.Sink) error {
	st := deliver.NewReporter(sink, r.log, "discord receiving", deliver.Status{Integration: r.id, Channel: "discord", Instance: r.instance})
	if r.js == nil {
		r.run(ctx, sink, st, nil)
		return nil
	}
	l := deliver.Lease{
		Key:      r.leaseKey(),
		Instance: r.instance,
		TTL:      r.timing.lease,
		Retry:    deliver.Backoff{Min: r.timing.retryMin, Max: r.timing.retryMax},
		Log:      r.log,
		Work:     "keeps this bot's gateway session",
		Name:     "gateway",
	}
	return l.Run(ctx, r.js, st, func(ctx context.Context, state jetstream.KeyValue) {
		r.run(ctx, sink, st, &sessionStore{kv: state, key: r.leaseKey() + ".session", log: r.log})
	})
}

// session is what a resume needs; kept across connections and, with the
// bus, across restarts.
type session struct {
	ID        string `json:"session_id"`
	ResumeURL string `json:"resume_gateway_url"`
	Seq       int64  `json:"seq"`
}

// run keeps connecting until ctx is done, or until Discord says that
// reconnecting cannot help.
func (r *receiver) run(ctx context.Context, sink deliver.Sink, st *deliver.Reporter, store *sessionStore) {
	g := &gatewayState{store: store}
	if s, ok := store.load(ctx); ok {
		g.sess = s
		g.seq.Store(s.Seq)
	}
	b := deliver.Backoff{Min: r.timing.retryMin, Max: r.timing.retryMax}
	for ctx.Err() == nil {
		started := time.Now()
		out := r.connect(ctx, g, sink, st)
		if out.stopped || ctx.Err() != nil {
			return
		}
		if out.kind == closeFatal {
			r.log.Error("discord receiving stopped: reconnecting cannot help", "detail", out.why)
			st.Set(deliver.StateError, out.why)
			<-ctx.Done()
			return
		}
		if out.established && time.Since(started) >= r.timing.stable {
			b.Reset()
		}
		switch {
		case out.kind == closeFresh:
			r.log.Warn("discord gateway session cannot be resumed; starting a new one: messages sent while no session was open are not delivered again",
				"reason", out.why)
			g.fresh = fmt.Sprintf("a new gateway session began at %s after %s; messages sent while no session was open were not delivered", time.Now().UTC().Format(time.RFC3339), out.why)
			g.forget(ctx)
			// Discord asks for a random 1 to 5 seconds before identifying;
			// a session that never got going backs off as any failure does.
			pause := r.timing.invalidMin + rand.N(max(r.timing.invalidMax-r.timing.invalidMin, 0)+1)
			if !out.established {
				pause = max(pause, b.Next())
			}
			if ratelimit.Sleep(ctx, pause) != nil {
				return
			}
		case out.asked && out.established:
			// Discord asked to reconnect (op 7): at once.
			r.log.Info("discord gateway asked to reconnect; resuming", "reason", out.why)
		default:
			if out.failed {
				st.Problem(deliver.StateError, out.why+"; reconnecting")
			} else {
				r.log.Info("discord gateway connection ended; resuming", "reason", out.why)
			}
			if ratelimit.Sleep(ctx, b.Next()) != nil {
				return
			}
		}
	}
}

// gatewayState is the session across connections.
type gatewayState struct {
	sess  session
	seq   atomic.Int64 // the last dispatch handled
	store *sessionStore
	// mainURL is the gateway URL to identify at (gateway_url or GET
	// /gateway/bot's), once known.
	mainURL      string
	lastIdentify time.Time
	botUser      string
	// fresh, if set, says why the last session had to be replaced; the next
	// READY's status says so.
	fresh    string
	lastSave time.Time
}

// forget drops the session: the next connection identifies.
func (g *gatewayState) forget(ctx context.Context) {
	g.sess = session{}
	g.seq.Store(0)
	g.store.clear(ctx)
}

// save keeps the session for a successor, at most once a second unless
// forced.
func (g *gatewayState) save(ctx context.Context, force bool) {
	if g.sess.ID == "" || (!force && time.Since(g.lastSave) < time.Second) {
		return
	}
	g.lastSave = time.Now()
	s := g.sess
	s.Seq = g.seq.Load()
	g.store.save(ctx, s)
}

// outcome is how one connection ended.
type outcome struct {
	kind        closeKind
	why         string
	stopped     bool // ctx is done
	established bool // it got READY or RESUMED
	asked       bool // Discord asked to reconnect (op 7)
	failed      bool // it could not connect, or broke before it was established
}

// connect runs one gateway connection: it identifies or resumes, then
// handles what the gateway sends until the connection ends.
func (r *receiver) connect(ctx context.Context, g *gatewayState, sink deliver.Sink, st *deliver.Reporter) outcome {
	resuming := g.sess.ID != ""
	u := g.sess.ResumeURL
	if !resuming || u == "" {
		var out *outcome
		if u, out = r.identifyURL(ctx, g, st, resuming); out != nil {
			return *out
		}
	}
	c, err := dial(ctx, u, r.timing.hello, &g.seq)
	if err != nil {
		if ctx.Err() != nil {
			return outcome{stopped: true}
		}
		if resuming && u == g.sess.ResumeURL {
			// Resume through the main gateway next time.
			g.sess.ResumeURL = ""
		}
		return outcome{failed: true, why: fmt.Sprintf("cannot connect to the Discord gateway at %s (%s)", u, r.api.scrub(err.Error()))}
	}
	defer c.finish()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { c.close(closeStop, "herald stopping") })
	defer stop()

	hello := time.AfterFunc(r.timing.hello, func() { c.close(closeStop, "no hello") })
	p, err := c.read()
	hello.Stop()
	if err != nil || p.Op != opHello {
		return r.ended(ctx, c, err, false, "the gateway sent no Hello")
	}
	var h helloData
	if err := json.Unmarshal(p.D, &h); err != nil || h.HeartbeatInterval <= 0 {
		return outcome{failed: true, why: "the gateway's Hello names no heartbeat interval; check gateway_url"}
	}
	go c.beat(cctx, time.Duration(h.HeartbeatInterval)*time.Millisecond)

	if resuming {
		err = c.send(cctx, opResume, resumeData{Token: r.api.token, SessionID: g.sess.ID, Seq: g.seq.Load()})
	} else {
		g.lastIdentify = time.Now()
		err = c.send(cctx, opIdentify, identifyData{Token: r.api.token, Intents: Intents,
			Properties: identifyProperties{OS: osName(), Browser: "herald", Device: "herald"}})
	}
	if err != nil {
		return r.ended(ctx, c, err, false, "")
	}
	defer g.save(context.WithoutCancel(ctx), true)
	return r.serve(ctx, cctx, c, g, sink, st, resuming)
}

// serve handles what the gateway sends on c until the connection ends:
// dispatches (each handled before its sequence number counts), heartbeat
// requests and ACKs, Reconnect and Invalid Session.
func (r *receiver) serve(ctx, cctx context.Context, c *conn, g *gatewayState, sink deliver.Sink, st *deliver.Reporter, resuming bool) outcome {
	established := false
	for {
		p, err := c.read()
		if err != nil {
			return r.ended(ctx, c, err, established, "")
		}
		switch p.Op {
		case opDispatch:
			if !c.handling(func() bool { return r.dispatch(ctx, g, p, sink, st) }) {
				// Stopped while storing: the message stays unhandled, and a
				// resume brings it back.
				return outcome{stopped: true}
			}
			if p.S != nil && *p.S > g.seq.Load() {
				g.seq.Store(*p.S)
			}
			switch p.T {
			case "READY", "RESUMED":
				established = true
				g.save(ctx, true)
			default:
				g.save(ctx, false)
			}
		case opHeartbeat:
			// Discord asks for a heartbeat now.
			if err := c.heartbeat(cctx); err != nil {
				return r.ended(ctx, c, err, established, "")
			}
		case opHeartbeatACK:
			c.acked.Store(true)
		case opReconnect:
			c.close(closeStop, "reconnect requested")
			return outcome{kind: closeResume, why: "Discord asked to reconnect (op 7)", established: established, asked: true}
		case opInvalidSession:
			var resumable bool
			_ = json.Unmarshal(p.D, &resumable)
			c.close(closeStop, "invalid session")
			if resumable && resuming {
				return outcome{kind: closeResume, why: "Discord invalidated the connection (op 9, resumable)", established: established}
			}
			return outcome{kind: closeFresh, why: "Discord invalidated the session (op 9)", established: established}
		}
	}
}

// ended is the outcome of a connection whose read failed with err.
func (r *receiver) ended(ctx context.Context, c *conn, err error, established bool, what string) outcome {
	if ctx.Err() != nil {
		return outcome{stopped: true}
	}
	if c.zombie.Load() {
		return outcome{kind: closeResume, why: "a heartbeat went unacknowledged", established: established}
	}
	code := websocket.CloseStatus(err)
	kind, why := closeInfo(code)
	if code < 0 && err != nil {
		why = fmt.Sprintf("%s (%s)", why, r.api.scrub(err.Error()))
	}
	if what != "" {
		why = what + ": " + why
	}
	if kind == closeFatal {
		return outcome{kind: kind, why: r.fatalDetail(code, why)}
	}
	return outcome{kind: kind, why: "gateway closed with " + why, established: established, failed: !established}
}

// fatalDetail says what to fix for a close code reconnecting cannot help.
func (r *receiver) fatalDetail(code websocket.StatusCode, why string) string {
	switch code {
	case 4004:
		return fmt.Sprintf("Discord rejected the bot token of integration %q (gateway close %s): put the bot's current token (Developer Portal → your application → Bot → Reset Token) in %s and reload; Herald does not reconnect with a rejected token, since Discord resets tokens that fail too often",
			r.id, why, r.tokenSource())
	case 4013, 4014:
		return fmt.Sprintf("Discord refused the gateway intents of integration %q (close %s): in the Developer Portal, under your application → Bot → Privileged Gateway Intents, turn on Message Content Intent, then reload",
			r.id, why)
	case 4010, 4011:
		return fmt.Sprintf("Discord wants integration %q's bot sharded (close %s): Herald keeps one shard, for bots in fewer than 2,500 servers; use a bot of its own for Herald", r.id, why)
	case 4012:
		return fmt.Sprintf("the gateway of integration %q does not speak API v%s (close %s): check gateway_url, or leave it out", r.id, GatewayVersion, why)
	}
	return fmt.Sprintf("the gateway of integration %q closed with %s", r.id, why)
}

// gatewayBot is GET /gateway/bot's answer.
type gatewayBot struct {
	URL               string `json:"url"`
	SessionStartLimit struct {
		Total      int   `json:"total"`
		Remaining  int   `json:"remaining"`
		ResetAfter int64 `json:"reset_after"` // milliseconds
	} `json:"session_start_limit"`
}

// identifyURL is where to connect to identify (or to resume when the
// resume URL failed): gateway_url, or GET /gateway/bot's URL. Before an
// identify it asks GET /gateway/bot, which checks the token over REST and
// says how many sessions Discord still allows today; it waits when none
// are left, and keeps identifies 5 seconds apart. A non-nil outcome ends
// the attempt.
func (r *receiver) identifyURL(ctx context.Context, g *gatewayState, st *deliver.Reporter, resuming bool) (string, *outcome) {
	if !resuming {
		if wait := r.timing.identifyGap - time.Since(g.lastIdentify); wait > 0 {
			if ratelimit.Sleep(ctx, wait) != nil {
				return "", &outcome{stopped: true}
			}
		}
	}
	if r.gatewayURL != "" {
		g.mainURL = r.gatewayURL
	}
	if resuming && g.mainURL != "" {
		return g.mainURL, nil
	}
	var gb gatewayBot
	err := r.api.call(ctx, "GET", "/gateway/bot", "/gateway/bot", nil, &gb)
	var ae *apiError
	switch {
	case ctx.Err() != nil:
		return "", &outcome{stopped: true}
	case errors.As(err, &ae) && ae.status == 401:
		return "", &outcome{kind: closeFatal, why: fmt.Sprintf("Discord rejected the bot token of integration %q (401 Unauthorized from GET /gateway/bot): put the bot's current token (Developer Portal → your application → Bot → Reset Token) in %s and reload",
			r.id, r.tokenSource())}
	case err != nil && g.mainURL == "":
		return "", &outcome{failed: true, why: fmt.Sprintf("cannot ask Discord for its gateway (GET /gateway/bot at api_url %s: %s)", r.api.base, r.api.scrub(err.Error()))}
	case err != nil:
		r.log.Warn("discord GET /gateway/bot failed; connecting to the gateway known", "err", r.api.scrub(err.Error()))
		return g.mainURL, nil
	}
	if r.gatewayURL == "" {
		if _, err := gatewayURL(gb.URL); err != nil {
			return "", &outcome{failed: true, why: fmt.Sprintf("GET /gateway/bot at api_url %s named no gateway URL (%q); check api_url", r.api.base, gb.URL)}
		}
		g.mainURL = gb.URL
	}
	if l := gb.SessionStartLimit; !resuming && l.Total > 0 && l.Remaining <= 0 {
		wait := time.Duration(max(l.ResetAfter, 100)) * time.Millisecond
		st.Problem(deliver.StateError, fmt.Sprintf("Discord allows no more new gateway sessions for this bot today (session_start_limit: 0 of %d left); waiting %s until it resets", l.Total, wait.Round(time.Second)))
		if ratelimit.Sleep(ctx, wait) != nil {
			return "", &outcome{stopped: true}
		}
	}
	return g.mainURL, nil
}

// dispatch handles one event; false means ctx ended before it was handled
// (a message not stored).
func (r *receiver) dispatch(ctx context.Context, g *gatewayState, p *payload, sink deliver.Sink, st *deliver.Reporter) bool {
	switch p.T {
	case "READY":
		var d readyData
		if err := json.Unmarshal(p.D, &d); err != nil || d.SessionID == "" {
			r.log.Warn("discord READY without a session id; the next connection identifies again")
			return true
		}
		g.sess = session{ID: d.SessionID, ResumeURL: d.ResumeGatewayURL}
		if d.User.ID != "" {
			g.botUser = d.User.ID
		}
		r.log.Info("discord gateway session ready", "bot", d.User.Username, "bot_id", d.User.ID)
		st.Set(deliver.StateRunning, g.fresh)
		g.fresh = ""
	case "RESUMED":
		r.log.Info("discord gateway session resumed", "seq", g.seq.Load())
		st.Set(deliver.StateRunning, "")
	case "GUILD_CREATE":
		r.kinds.learnGuild(p.D)
	case "CHANNEL_CREATE", "CHANNEL_UPDATE", "THREAD_CREATE", "THREAD_UPDATE":
		r.kinds.learnChannel(p.D)
	case "THREAD_LIST_SYNC":
		r.kinds.learnThreads(p.D)
	case "CHANNEL_DELETE", "THREAD_DELETE":
		r.kinds.forgetChannel(p.D)
	case "MESSAGE_CREATE":
		return r.message(ctx, g, p.D, sink, st)
	case "INTERACTION_CREATE":
		return r.interaction(ctx, g, p.D, sink, st)
	case "MESSAGE_REACTION_ADD":
		var ev reactionEvent
		if err := json.Unmarshal(p.D, &ev); err != nil {
			r.log.Warn("discord MESSAGE_REACTION_ADD unreadable; skipped", "err", err)
			return true
		}
		in, why := fromReaction(r.id, r.botUserID(g), &ev)
		if in == nil {
			r.log.Debug("discord reaction skipped", "message_id", ev.MessageID, "why", why)
			return true
		}
		_, done := r.store(ctx, sink, in, st)
		return done
	}
	return true
}

// botUserID is the bot's user id: READY's, else the token's.
func (r *receiver) botUserID(g *gatewayState) string {
	if g.botUser != "" {
		return g.botUser
	}
	return r.botID
}

// message stores a MESSAGE_CREATE.
func (r *receiver) message(ctx context.Context, g *gatewayState, d json.RawMessage, sink deliver.Sink, st *deliver.Reporter) bool {
	m, err := decodeMessage(d)
	if err != nil {
		r.log.Warn("discord MESSAGE_CREATE unreadable; skipped", "err", err)
		return true
	}
	var at where
	if m.GuildID != "" {
		at = r.kinds.where(ctx, m.ChannelID)
	}
	in, why := fromMessage(r.id, r.botUserID(g), m, at)
	if in == nil {
		if why == "no text or files" && m.GuildID != "" {
			r.warnNoContent.Do(func() {
				r.log.Warn("discord message from a server arrived without text: turn on Message Content Intent for the bot (Developer Portal → Bot → Privileged Gateway Intents)",
					"channel_id", m.ChannelID, "message_id", m.ID)
			})
		}
		r.log.Debug("discord message skipped", "message_id", m.ID, "why", why)
		return true
	}
	_, done := r.store(ctx, sink, in, st)
	return done
}

// interaction stores a button press and then acknowledges it.
func (r *receiver) interaction(ctx context.Context, g *gatewayState, d json.RawMessage, sink deliver.Sink, st *deliver.Reporter) bool {
	var ev interactionEvent
	if err := json.Unmarshal(d, &ev); err != nil {
		r.log.Warn("discord INTERACTION_CREATE unreadable; skipped", "err", err)
		return true
	}
	var at where
	if ev.GuildID != "" {
		at = r.kinds.where(ctx, ev.ChannelID)
	}
	in, why := fromInteraction(r.id, r.botUserID(g), &ev, at)
	if in == nil {
		r.log.Debug("discord interaction skipped", "interaction_id", ev.ID, "why", why)
		return true
	}
	ok, done := r.store(ctx, sink, in, st)
	if ok {
		r.acknowledge(ctx, ev.ID, ev.Token)
	}
	return done
}

// store hands in to the sink, holding it and trying again while the bus
// refuses, until it is stored or ctx ends. ok reports whether it was
// stored; done whether it is dealt with (stored, or dropped as invalid).
func (r *receiver) store(ctx context.Context, sink deliver.Sink, in *envelope.Ingress, st *deliver.Reporter) (ok, done bool) {
	b := deliver.Backoff{Min: r.timing.retryMin, Max: r.timing.retryMax}
	failed := false
	for {
		err := sink.Ingress(ctx, in)
		if err == nil {
			if failed {
				st.Set(deliver.StateRunning, "")
			}
			st.Received(time.Now())
			st.Flush()
			return true, true
		}
		if errors.Is(err, envelope.ErrValidation) {
			// It can never be stored; holding it would stop the bot for good.
			r.log.Error("discord message refused as invalid; skipped", "native_id", in.NativeID, "err", err)
			sink.Dropped(ctx, in, "invalid")
			return false, true
		}
		if ctx.Err() != nil {
			return false, false
		}
		failed = true
		st.Problem(deliver.StateError, fmt.Sprintf("cannot store received messages on the bus (%v); holding them and retrying", err))
		if ratelimit.Sleep(ctx, b.Next()) != nil {
			return false, false
		}
	}
}

// interactionCallback is the answer to an interaction: type 6, a deferred
// update of the message, acknowledges the press without changing anything.
type interactionCallback struct {
	Type int `json:"type"`
}

const callbackDeferredUpdate = 6

// acknowledge answers a stored button press, so the person's button stops
// spinning. The press is stored already; a failure costs only the spinner
// (Discord shows "This interaction failed" after 3 seconds).
func (r *receiver) acknowledge(ctx context.Context, id, token string) {
	if !snowflakePattern.MatchString(id) || token == "" || strings.ContainsAny(token, "/?#") {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	// The interaction's token is a credential too: scrubbed like the bot's.
	caller := deliver.Caller{Client: r.api.client, Secrets: deliver.NewScrubber("<token>", r.api.token, token)}
	err := r.api.callWith(ctx, caller, "POST", "/interactions/{interaction}/{token}/callback", "/interactions/"+id+"/"+token+"/callback",
		interactionCallback{Type: callbackDeferredUpdate}, nil)
	if err == nil {
		return
	}
	var ae *apiError
	if errors.As(err, &ae) && (ae.code == codeUnknownInteraction || ae.code == codeAlreadyAcknowledged) {
		r.log.Debug("discord interaction not acknowledged", "interaction_id", id, "err", err)
		return
	}
	r.log.Warn("discord interaction not acknowledged", "interaction_id", id, "err", err)
}

// channelKind asks Discord what channel id is (GET /channels/{id}), for a
// message in a channel no event described.
func (r *receiver) channelKind(ctx context.Context, id string) (channelInfo, error) {
	var ch channelInfo
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	err := r.api.call(ctx, "GET", "/channels/{channel}", "/channels/"+id, nil, &ch)
	return ch, err
}

// sessionStore keeps the gateway session in herald_channel_state; a nil
// store keeps nothing.
type sessionStore struct {
	kv  jetstream.KeyValue
	key string
	log *slog.Logger
}

func (s *sessionStore) load(ctx context.Context) (session, bool) {
	if s == nil {
		return session{}, false
	}
	e, err := s.kv.Get(ctx, s.key)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			s.log.Warn("discord session not read; identifying afresh", "key", s.key, "err", err)
		}
		return session{}, false
	}
	var sess session
	if err := json.Unmarshal(e.Value(), &sess); err != nil || sess.ID == "" {
		return session{}, false
	}
	return sess, true
}

func (s *sessionStore) save(ctx context.Context, sess session) {
	if s == nil {
		return
	}
	b, _ := json.Marshal(sess)
	if _, err := s.kv.Put(ctx, s.key, b); err != nil && ctx.Err() == nil {
		s.log.Warn("discord session not saved; a restart may start a new session", "err", err)
	}
}

func (s *sessionStore) clear(ctx context.Context) {
	if s == nil {
		return
	}
	if err := s.kv.Delete(ctx, s.key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) && ctx.Err() == nil {
		s.log.Warn("discord session not cleared", "err", err)
	}
}
