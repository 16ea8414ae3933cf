// Package bus is Herald's use of NATS JetStream (architecture.md §4): subjects, the
// streams and buckets every service relies on, publishing with idempotency
// keys, and a consumer runner that retries with backoff and dead-letters what
// can never succeed.
package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/pkg/envelope"
)

// Streams, buckets and durable consumers.
const (
	StreamRoute      = "HERALD_ROUTE"
	StreamDeliver    = "HERALD_DELIVER"
	StreamResult     = "HERALD_RESULT"
	StreamAudit      = "HERALD_AUDIT"
	StreamDeadLetter = "HERALD_DEADLETTER"
	StreamIngress    = "HERALD_INGRESS"
	StreamInbox      = "HERALD_INBOX"
	// StreamWeb holds the web chat's conversations, one subject per visitor
	// (services/messenger/web), kept WebRetention, WebMaxPerVisitor each.
	StreamWeb = "HERALD_WEB"

	// BucketDeliveries: the delivery ledger (pkg/ledger).
	BucketDeliveries = "herald_deliveries"
	// BucketSessions: thread -> session registry of inbound conversations.
	BucketSessions = "herald_sessions"
	// BucketLeases: who holds a singleton job, such as polling one bot token.
	BucketLeases = "herald_leases"
	// BucketChannelState: a channel's own durable state (Telegram offsets,
	// butlers' forum topics: pkg/forum).
	BucketChannelState = "herald_channel_state"
	// BucketPairing: pending pairing codes and the senders they let in.
	BucketPairing = "herald_pairing"
	// BucketApprovals: open permission prompts, single use.
	BucketApprovals = "herald_approvals"
	// BucketStatus: each integration's health, as its messenger last saw it.
	BucketStatus = "herald_status"
	// BucketRequests: inbound messages a butler handed to its model, by
	// "<butler>.<request_id>", so reply and react can answer only those.
	BucketRequests = "herald_requests"
	// BucketLimits: providers' rate limits shared by messenger replicas.
	BucketLimits = "herald_limits"
	// BucketTokens: MCP bearer tokens minted for butlers, by
	// "<butler>.<token id>" (only a hash of each secret is kept).
	BucketTokens = "herald_tokens"
	// BucketSeen: the provider ids of inbound messages stored lately
	// ("<integration>.<digest of the native id>"), so a replayed signed
	// request is a duplicate after any restart (SeenTTL).
	BucketSeen = "herald_seen"
	// BucketProbe: one small record per process, written every few seconds
	// (obs.StoreWatch): whether NATS can store at all. Its keys are
	// ServiceProbeKey and ButlerProbeKey.
	BucketProbe = "herald_probe"
	// BucketHeld: notes held for an integration's quiet hours, until
	// their digest goes out (services/switchboard/quiet), and the
	// digests being sent.
	BucketHeld = "herald_held"

	ConsumerSwitchboard = "switchboard"
	ConsumerResults     = "switchboard_results"
	ConsumerMessenger   = "messenger"
	ConsumerIngress     = "switchboard_ingress"
)

// ConsumerInbox is the durable consumer of one butler's inbox.
func ConsumerInbox(butler string) string { return "butler_" + butler }

// Headers Herald sets besides Nats-Msg-Id.
const (
	// HeaderKey carries the notify's idempotency key from hop to hop.
	HeaderKey = "Herald-Idempotency-Key"
	// HeaderError and HeaderErrorClass say why a message was dead-lettered.
	HeaderError      = "Herald-Error"
	HeaderErrorClass = "Herald-Error-Class"
	// HeaderSubject is the subject a dead-lettered message was first published on.
	HeaderSubject = "Herald-Subject"
	// HeaderChannel names the integration ("type:id") a result is about.
	HeaderChannel = "Herald-Channel"
	// HeaderIntent names the intent of the notify a result is about.
	HeaderIntent = "Herald-Intent"
	// HeaderDeliveries is how many times it was tried.
	HeaderDeliveries = "Herald-Deliveries"
	// HeaderRelay on a delivery asks the messenger to hand its outcome to
	// the switchboard (HERALD_RESULT) even when the butler is waiting: the
	// switchboard has bookkeeping to do with it (a claimed thread's message
	// ids). Without it the messenger answers the waiting butler itself.
	HeaderRelay = "Herald-Relay"
	// HeaderArgs on a delivery carries the digest of the notify's arguments
	// as the butler made it (envelope.Notify.ArgsDigest), before the
	// switchboard added its own buttons: what a repeat with the same
	// idempotency_key is checked against.
	HeaderArgs = "Herald-Args"
	// HeaderEdit on a delivery (the switchboard's alone) names the provider
	// id of a message the integration sent to the recipient, to be edited
	// into the delivery's text rather than a new one sent (a closed
	// permission prompt); a channel that cannot edit sends it anew.
	HeaderEdit = "Herald-Edit"
)

// The web chat's history: how long, and how many messages per visitor.
const (
	WebRetention     = 7 * 24 * time.Hour
	WebMaxPerVisitor = 1000
)

// DuplicateWindow is how long JetStream drops a re-published message with the
// same Nats-Msg-Id. It covers a butler's retries after a lost answer (the
// notify timeout is 30 s); beyond it, the herald_deliveries ledger decides.
const DuplicateWindow = 5 * time.Minute

// AnswerWait is how long whoever answers a waiting butler (the messenger,
// or the switchboard relaying) waits for the butler to confirm it took the
// answer; without a confirmation the caller is taken to have left.
const AnswerWait = 2 * time.Second

// Subject prefixes; each is followed by a butler name.
const (
	RoutePrefix  = "herald.route."
	ResultPrefix = "herald.result."
	// DirectPrefix is the core NATS request a butler makes before it
	// publishes a route to HERALD_ROUTE: a switchboard that routes it at
	// once (and so stores it in HERALD_DELIVER) answers DirectRouted in
	// header HeaderDirect, and the route is not stored twice
	// (docs/decisions.md, "the direct route").
	DirectPrefix = "herald.direct."
)

// HeaderDirect is the switchboard's answer to a direct route: DirectRouted
// when it stored the route for the messenger; anything else (or no answer)
// sends the butler to HERALD_ROUTE. DirectNotRouted says nothing of it was
// stored for the messenger; DirectUnsure (and no answer) that it may have
// been.
const (
	HeaderDirect    = "Herald-Direct"
	DirectRouted    = "routed"
	DirectNotRouted = "not-routed"
	DirectUnsure    = "unsure"
)

// DirectWait bounds a butler's wait for a switchboard's answer to a direct
// route before it publishes the route to HERALD_ROUTE instead.
const DirectWait = 5 * time.Second

// TypingPrefix starts a butler's signs of life (core NATS, no stream):
// herald.typing.<butler>.start names a message that reached one of its
// sessions, .stop one the model answered; the messenger shows "typing…"
// in between (and puts ack_reaction on it at the start).
const (
	TypingPrefix = "herald.typing."
	TypingStart  = "start"
	TypingStop   = "stop"
)

// TypingSignal is the body of a sign of life: the request_id of the
// message it is about; for a stop, empty means every one of the butler's
// (the model asked a question, and now waits).
type TypingSignal struct {
	RequestID string `json:"request_id"`
}

// TypingSubject is butler's signal verb (TypingStart, TypingStop).
func TypingSubject(butler, verb string) string { return TypingPrefix + butler + "." + verb }

// WebTypingPrefix starts the web chat's "typing…" (core NATS, no stream,
// so nothing of it is kept in a conversation):
// herald.webtyping.<integration>.<visitor>, published by the messenger that
// runs the loop and heard by every messenger serving that integration's
// page.
const WebTypingPrefix = "herald.webtyping."

// WebTypingSubject is where visitor's pages of integration hear "typing…".
func WebTypingSubject(integration, visitor string) string {
	return WebTypingPrefix + integration + "." + visitor
}

// Routed inbound messages, so that a reply, a reaction or a sign of life
// can name only a message that really reached the butler. The switchboard
// keeps them in herald_requests under "_routed.<butler>.<request_id>":
// butlers read and write only their own "<butler>.…" keys there, and no
// butler name starts with "_", so none can read, forge or rewrite one.
const RoutedPrefix = "_routed."

// RoutedKey is where the switchboard records request id routed to butler.
func RoutedKey(butler, requestID string) string { return RoutedPrefix + butler + "." + requestID }

// RoutedRequest is what is kept of one routed inbound message.
type RoutedRequest struct {
	Integration    string                  `json:"integration"`
	RequestContext envelope.RequestContext `json:"request_context"`
	// Chat is where an answer to it goes (its chat id, or its sender): the
	// only recipient a reply or reaction to it may name.
	Chat string `json:"chat,omitempty"`
	// Attachments are the message's files, which only the butler it was
	// routed to may download.
	Attachments []envelope.Attachment `json:"attachments,omitempty"`
}

// Subjects. Request/reply subjects (herald.reply.>, herald.direct.>)
// overlap no stream.
func RouteSubject(butler string) string    { return RoutePrefix + butler }
func DirectSubject(butler string) string   { return DirectPrefix + butler }
func DeliverSubject(target string) string  { return "herald.deliver." + target }
func InboxSubject(butler string) string    { return "herald.inbox." + butler }
func IngressSubject(channel string) string { return "herald.ingress." + channel }
func ReplySubject(butler, id string) string {
	return "herald.reply." + butler + "." + id
}
func ResultSubject(butler, id string) string {
	return ResultPrefix + butler + "." + id
}
func AuditSubject(kind, channel string) string { return "herald.audit." + kind + "." + channel }

// ButlerAuditSubject is where butler publishes the audit records it writes
// itself (its answers by a grant): its name is in the subject, which NATS
// permissions tie to its credentials, so a record there speaks for it alone.
func ButlerAuditSubject(kind, butler string) string {
	return "herald.audit." + kind + "." + AuditButlerToken + "." + butler
}

// AuditButlerToken marks a butler's own audit subject: no channel type is
// named so.
const AuditButlerToken = "butler"

// DeadSubject is where a message of stream that can never succeed goes.
func DeadSubject(stream, subject string) string { return "herald.dead." + stream + "." + subject }

// Connect dials NATS with the reconnect behaviour a long-running service
// wants: retry the first connect, reconnect forever. name ("switchboard",
// "messenger", "butler.health") is also the connection's inbox prefix,
// _INBOX.<name>, so NATS permissions can let each service see only the
// replies meant for it.
func Connect(url, name, credsFile string, log *slog.Logger) (*nats.Conn, error) {
	if log == nil {
		log = slog.Default()
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.CustomInboxPrefix("_INBOX." + name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		// A server that stops answering without closing the connection (a
		// silent partition, a stopped process) is noticed by the pings, not
		// by TCP, which retransmits for minutes: at most PingInterval ×
		// (MaxPingsOutstanding + 1) after the last answer, then the client
		// moves to another server of the cluster.
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOutstanding),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
	}
	if credsFile != "" {
		opts = append(opts, nats.UserCredentials(credsFile))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	return nc, nil
}

// PingInterval and MaxPingsOutstanding: a connection whose server has not
// answered for 9 s is taken as lost (nats.go's defaults, 2 minutes and 2,
// take 6 minutes).
const (
	PingInterval        = 3 * time.Second
	MaxPingsOutstanding = 2
)

// DrainTimeout bounds how long a stopping service drains its connection.
const DrainTimeout = 10 * time.Second

// Drain drains nc (subscriptions finish the messages they hold, buffered
// publishes are flushed) and waits until it is closed, at most timeout;
// then it closes it. An error says what may not have gone out.
func Drain(nc *nats.Conn, timeout time.Duration) error {
	if nc.IsClosed() {
		return nil
	}
	if err := nc.Drain(); err != nil {
		nc.Close()
		return fmt.Errorf("draining the NATS connection: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for !nc.IsClosed() {
		if time.Now().After(deadline) {
			nc.Close()
			return fmt.Errorf("draining the NATS connection took more than %s; closed it", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// Topology is what EnsureTopology creates: every stream and bucket, or with
// Uses only those a service works with.
type Topology struct {
	Replicas int
	// Uses, if set, limits the topology to one service's streams and
	// buckets: what it checks at start (and may create, where NATS lets it).
	Uses *Uses
	// Repair updates what differs from Herald's settings (herald setup);
	// without it a service only logs the difference.
	Repair bool
	Log    *slog.Logger
	// Butlers are the fleet's butlers: herald setup (the whole topology,
	// with Repair) makes the durable consumers too, their inboxes included.
	Butlers []string
	// FilesMaxBytes bounds herald_files (nats.files_max_bytes); 0 is
	// FilesMaxBytes.
	FilesMaxBytes int64
}

// filesMaxBytes is what herald_files may hold.
func (t Topology) filesMaxBytes() int64 {
	if t.FilesMaxBytes > 0 {
		return t.FilesMaxBytes
	}
	return FilesMaxBytes
}

// SeenTTL is how long an inbound message's provider id is remembered in
// BucketSeen: far beyond twice any signature's tolerance (Slack's and
// Standard Webhooks' 5 minutes) and a sending server's retries of a mail,
// yet short of the week after which Telegram may number updates afresh.
const SeenTTL = 48 * time.Hour

// HeldTTL bounds how long a note held for quiet hours is kept: as long as
// the queues keep a message. Quiet hours are shorter than a day, so only a
// switchboard stopped for a week leaves one to expire.
const HeldTTL = 7 * 24 * time.Hour

// ProbeTTL is how long a probe record is kept: a process writes its own
// every few seconds, so only a stopped process's record ever expires.
const ProbeTTL = 10 * time.Minute

// ProbeSubject is where a process writes its probe record, key: a put to
// BucketProbe, which needs no permission but this subject.
func ProbeSubject(key string) string { return "$KV." + BucketProbe + "." + key }

// ServiceProbeKey is the probe key of a process running service
// ("switchboard", "messenger", "dev"): "_" and the name, as a butler's name
// cannot begin with "_".
func ServiceProbeKey(service string) string { return "_" + service }

// ButlerProbeKey is the probe key of butler name's process: under its own
// name, as every key a butler may write.
func ButlerProbeKey(name string) string { return name + ".probe" }

// Uses are the streams and buckets one service works with.
type Uses struct {
	Streams []string
	Buckets []string
}

// What each service works with; natsauth lets each see only these. A butler
// uses none by name: it touches only its own subjects and consumer.
var (
	SwitchboardUses = Uses{
		Streams: []string{StreamRoute, StreamDeliver, StreamResult, StreamIngress, StreamInbox, StreamAudit, StreamDeadLetter},
		Buckets: []string{BucketDeliveries, BucketSessions, BucketPairing, BucketApprovals, BucketRequests, BucketHeld},
	}
	MessengerUses = Uses{
		Streams: []string{StreamDeliver, StreamResult, StreamIngress, StreamAudit, StreamDeadLetter, StreamWeb, StreamFiles},
		Buckets: []string{BucketDeliveries, BucketLeases, BucketChannelState, BucketStatus, BucketLimits, BucketSeen},
	}
	ButlerUses = Uses{}
)

// Stream is the configuration Herald gives stream name.
func (t Topology) Stream(name string) jetstream.StreamConfig {
	for _, s := range t.streams() {
		if s.Name == name {
			return s
		}
	}
	panic("bus: no stream " + name) // a programming error: names are constants
}

func (t Topology) uses(kind, name string) bool {
	if t.Uses == nil {
		return true
	}
	if kind == "stream" {
		return slices.Contains(t.Uses.Streams, name)
	}
	return slices.Contains(t.Uses.Buckets, name)
}

// Limits of every stream (docs/reliability.md, "A month of steady load"):
// chosen so that a fleet at 50 notifies/s and 5 inbound messages/s runs a
// month within nats-server's budget, and their MaxBytes, which nats-server
// reserves against its max_file_store, sum to StoreReserved.
//
// A work queue is a backlog: when one is full its publisher gets an error
// (DiscardNew), which a butler answers "not confirmed" and a service
// retries; nothing already stored is dropped. A log (the audit log, the web
// chat's history) forgets its oldest records first (DiscardOld). The dead
// letters refuse new ones when full (DiscardNew): the worker then leaves
// the message in its work queue, logged, rather than lose it.
const (
	// QueueAge bounds how long a message waits in a work queue.
	QueueAge = 7 * 24 * time.Hour
	// AuditAge is the audit log's 30 days (architecture.md §4), AuditMaxBytes
	// what it may hold: at 50 notifies/s (about 630 bytes a notify) 13
	// hours of it, at 10,000 notifies a day all 30 days (docs/reliability.md).
	AuditAge      = 30 * 24 * time.Hour
	AuditMaxBytes = 1536 << 20

	// StoreReserved is the sum of every stream's and bucket's MaxBytes,
	// which nats-server reserves against its max_file_store (10 GB in
	// deploy/nats.conf; an embedded server's default is 75% of the disk's
	// free space): a server with less cannot make the topology.
	StoreReserved = 9016 << 20
)

func (t Topology) streams() []jetstream.StreamConfig {
	r := max(t.Replicas, 1)
	wq := func(name, subject, desc string, maxAge time.Duration, maxMsgs, maxBytes int64) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name: name, Description: desc, Subjects: []string{subject},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
			Replicas: r, Duplicates: DuplicateWindow, MaxAge: maxAge, Discard: jetstream.DiscardNew,
			MaxMsgs: maxMsgs, MaxBytes: maxBytes,
		}
	}
	log := func(name, subject, desc string, maxMsgs, maxBytes int64, discard jetstream.DiscardPolicy) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name: name, Description: desc, Subjects: []string{subject},
			Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage,
			Replicas: r, MaxAge: AuditAge, Duplicates: DuplicateWindow,
			MaxMsgs: maxMsgs, MaxBytes: maxBytes, Discard: discard,
		}
	}
	return []jetstream.StreamConfig{
		// Empty while the switchboard runs (it takes routes directly); full
		// after hours of a stopped switchboard at 50/s.
		wq(StreamRoute, "herald.route.>", "butler -> switchboard", QueueAge, 500_000, 256<<20),
		// What waits out a provider's outage: at 50/s, hours of it.
		wq(StreamDeliver, "herald.deliver.>", "switchboard -> messenger", QueueAge, 1_000_000, 512<<20),
		wq(StreamResult, "herald.result.>", "messenger -> switchboard: delivery outcomes", 24*time.Hour, 100_000, 64<<20),
		wq(StreamIngress, "herald.ingress.>", "messenger -> switchboard: what people sent", QueueAge, 200_000, 128<<20),
		// A butler that is not running keeps its inbox: at 5/s, hours of it.
		wq(StreamInbox, "herald.inbox.>", "switchboard -> butler: inbound, one filtered consumer per butler", QueueAge, 500_000, 256<<20),
		log(StreamAudit, "herald.audit.>", "audit / notification log", 5_000_000, AuditMaxBytes, jetstream.DiscardOld),
		log(StreamDeadLetter, "herald.dead.>", "messages that can never succeed", 200_000, 256<<20, jetstream.DiscardNew),
		{
			Name: StreamWeb, Description: "web chat conversations, one subject per visitor", Subjects: []string{"herald.web.>"},
			Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, Replicas: r, MaxAge: WebRetention,
			MaxMsgsPerSubject: WebMaxPerVisitor, Discard: jetstream.DiscardOld, Duplicates: DuplicateWindow,
			MaxMsgs: 100_000, MaxBytes: 64 << 20,
		},
		// An Object Store bucket's stream (files.go): nats.go opens it
		// as the bucket herald_files.
		{
			Name: StreamFiles, Description: "files to and from people, chunk by chunk", Subjects: []string{"$O." + BucketFiles + ".C.>", "$O." + BucketFiles + ".M.>"},
			Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, Replicas: r, MaxAge: FilesAge,
			Discard: jetstream.DiscardNew, AllowRollup: true, AllowDirect: true, Duplicates: DuplicateWindow,
			MaxMsgs: 1_000_000, MaxBytes: t.filesMaxBytes(),
		},
	}
}

// EnsureTopology creates every stream and bucket of t that is missing and,
// with t.Repair, puts back one whose settings differ (herald setup). A
// service calls it for what it uses: under the permissions of `herald
// nats-auth` it may only look, so a missing stream is an error that says to
// run herald setup, and a changed one is logged. An unchanged topology costs
// only lookups (a needless update would also race consumer creation inside
// nats-server).
func EnsureTopology(ctx context.Context, js jetstream.JetStream, t Topology) error {
	log := t.Log
	if log == nil {
		log = slog.Default()
	}
	drift := func(kind, name string) error {
		if !t.Repair {
			log.Error(kind+" differs from Herald's settings (was it changed by hand, or to leak messages?); run herald setup to repair it", kind, name)
			return nil
		}
		log.Warn("repairing "+kind, kind, name)
		return errRepair
	}
	for _, want := range t.streams() {
		if !t.uses("stream", want.Name) {
			continue
		}
		s, err := js.Stream(ctx, want.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			_, err = js.CreateStream(ctx, want)
		case err == nil && !sameStream(s.CachedInfo().Config, want):
			if err = drift("stream", want.Name); err != nil {
				_, err = js.UpdateStream(ctx, want)
			}
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", want.Name, setupHint(js, err))
		}
	}
	for _, want := range t.buckets() {
		if !t.uses("bucket", want.Bucket) {
			continue
		}
		s, err := js.Stream(ctx, "KV_"+want.Bucket)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			if _, err = js.CreateKeyValue(ctx, want.KeyValueConfig); err == nil {
				err = limitBucket(ctx, js, want)
			}
		case err == nil && (kvTampered(want.Bucket, s.CachedInfo().Config) || !sameBucket(s.CachedInfo().Config, want)):
			if err = drift("bucket", want.Bucket); err != nil {
				if _, err = js.CreateOrUpdateKeyValue(ctx, want.KeyValueConfig); err == nil {
					err = limitBucket(ctx, js, want)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("bucket %s: %w", want.Bucket, setupHint(js, err))
		}
	}
	if t.Uses != nil || !t.Repair {
		// A service binds its consumers itself (BindConsumer); only setup
		// (or herald dev) makes the fleet's.
		return nil
	}
	// A fleet of many butlers has as many inbox consumers: check and make
	// them a few at a time rather than one round trip after another.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for stream, consumers := range t.durables() {
		for _, want := range consumers {
			g.Go(func() error {
				if _, err := BindConsumer(gctx, js, stream, want, log); err != nil {
					return fmt.Errorf("consumer %s on %s: %w", want.Durable, stream, setupHint(js, err))
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// errRepair says a repair is due; it never leaves EnsureTopology.
var errRepair = errors.New("repair")

// ErrNoPermission: NATS refused a request for lack of permission.
var ErrNoPermission = errors.New("not permitted")

// setupHint explains a refusal to create: the service's NATS user may not,
// and the operator's herald setup must.
func setupHint(js jetstream.JetStream, err error) error {
	// A refused request is told on the connection, and times out.
	if isPermission(err) || isPermission(js.Conn().LastError()) {
		return fmt.Errorf("%w (%w): NATS lets only the setup user create or change streams; run `herald setup` with its credentials first", ErrNoPermission, err)
	}
	if apiErr, ok := errors.AsType[*jetstream.APIError](err); ok && apiErr.ErrorCode == errCodeStorageExceeded {
		return fmt.Errorf("%w: Herald's streams and buckets reserve %d MiB of the NATS store; raise max_file_store in nats-server's config (deploy/nats.conf has 10GB) or the account's JetStream limit", err, StoreReserved>>20)
	}
	return err
}

// errCodeStorageExceeded is nats-server's JSStorageResourcesExceededErr:
// the reservations of a stream's MaxBytes exceed the store (nats.go names
// no constant for it).
const errCodeStorageExceeded = 10047

func isPermission(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "permissions violation")
}

// bucket is a KV bucket as Herald makes it: nats.go's configuration, and
// the limits its KeyValueConfig cannot say, set on the bucket's stream: how
// many keys it keeps and what it does when full.
type bucket struct {
	jetstream.KeyValueConfig
	MaxMsgs int64
	Discard jetstream.DiscardPolicy
}

// LedgerMaxRecords is how many delivery records herald_deliveries keeps
// (besides its 30 days): at 50 notifies/s, 27 hours of them, so a
// delivery's record outlives the 24 hours promised for a repeat of it up
// to 57 notifies/s sustained (docs/reliability.md). Each record costs
// nats-server about 300 bytes of memory (its key's subject state) as long
// as it is kept; the oldest goes first.
const LedgerMaxRecords = 5_000_000

// The limits of each bucket. A bucket of records that expire (the ledger,
// the requests butlers may answer, the provider ids seen) forgets its oldest
// first when full (DiscardOld): what it forgets is what is least likely to
// come back, and the docs say how long that is at 50 notifies/s. A bucket
// of state (sessions, pairing, tokens, leases, ...) holds a key per
// configured thing, far below its limits; if one is ever full it refuses a
// new key (DiscardNew), and the writer says so, rather than forget a paired
// sender or a minted token.
func (t Topology) buckets() []bucket {
	kv := func(name, desc string, ttl time.Duration, maxMsgs, maxBytes int64, discard jetstream.DiscardPolicy) bucket {
		return bucket{
			KeyValueConfig: jetstream.KeyValueConfig{
				Bucket: name, Description: desc, Storage: jetstream.FileStorage, Replicas: max(t.Replicas, 1),
				TTL: ttl, History: 1, MaxBytes: maxBytes,
			},
			MaxMsgs: maxMsgs, Discard: discard,
		}
	}
	const year = 365 * 24 * time.Hour
	return []bucket{
		kv(BucketDeliveries, "idempotency records of deliveries", 30*24*time.Hour, LedgerMaxRecords, 2560<<20, jetstream.DiscardOld),
		kv(BucketSessions, "thread -> session registry", 0, 1_000_000, 64<<20, jetstream.DiscardNew),
		kv(BucketLeases, "singleton jobs: one holder each", 0, 100_000, 8<<20, jetstream.DiscardNew),
		kv(BucketChannelState, "channels' durable state, e.g. Telegram offsets", 0, 100_000, 16<<20, jetstream.DiscardNew),
		kv(BucketPairing, "pairing codes and paired senders", 0, 100_000, 8<<20, jetstream.DiscardNew),
		kv(BucketApprovals, "open permission prompts", 24*time.Hour, 100_000, 32<<20, jetstream.DiscardNew),
		kv(BucketStatus, "integration health", 0, 10_000, 8<<20, jetstream.DiscardNew),
		// Two keys per inbound message (the switchboard's and the
		// butler's): at 5/s, 27 hours of replies to them.
		kv(BucketRequests, "inbound messages butlers may answer", 30*24*time.Hour, 1_000_000, 768<<20, jetstream.DiscardOld),
		kv(BucketLimits, "providers' rate limits and pauses, shared by messengers", time.Hour, 100_000, 16<<20, jetstream.DiscardOld),
		kv(BucketTokens, "MCP bearer tokens minted for butlers (hashes only)", year, 100_000, 16<<20, jetstream.DiscardNew),
		// At 5/s, SeenTTL's 48 hours are 864,000 ids.
		kv(BucketSeen, "provider ids of inbound messages stored lately, against replays", SeenTTL, 1_000_000, 256<<20, jetstream.DiscardOld),
		kv(BucketProbe, "each process's probe write: can NATS store?", ProbeTTL, 10_000, 16<<20, jetstream.DiscardOld),
		kv(BucketHeld, "notes held for quiet hours, until their digest", HeldTTL, 500_000, 128<<20, jetstream.DiscardNew),
	}
}

// sameBucket compares a bucket's stream with Herald's settings: replicas (a
// fleet moved from one node to a cluster keeps its ledger and sessions on
// every node) and limits. A stream nats-server shows with no limit where
// Herald sets one, or another, is an older fleet's: herald setup puts them.
func sameBucket(have jetstream.StreamConfig, want bucket) bool {
	return have.Replicas == want.Replicas && have.MaxAge == want.TTL &&
		unlimited(have.MaxMsgs) == unlimited(want.MaxMsgs) && unlimited(have.MaxBytes) == unlimited(want.MaxBytes) &&
		have.Discard == want.Discard
}

// withLimits is the bucket's stream as it is, with Herald's limits.
func withLimits(have jetstream.StreamConfig, want bucket) jetstream.StreamConfig {
	have.MaxMsgs, have.MaxBytes, have.MaxAge, have.Discard = want.MaxMsgs, want.MaxBytes, want.TTL, want.Discard
	return have
}

// limitBucket sets the limits nats.go's KeyValueConfig has no field for
// (MaxMsgs, Discard) on the bucket's stream.
func limitBucket(ctx context.Context, js jetstream.JetStream, want bucket) error {
	s, err := js.Stream(ctx, "KV_"+want.Bucket)
	if err != nil {
		return err
	}
	if have := s.CachedInfo().Config; !sameBucket(have, want) {
		_, err = js.UpdateStream(ctx, withLimits(have, want))
	}
	return err
}

// sameStream compares the settings Herald chooses, and every setting that
// could send a stream's messages elsewhere or change what it keeps (sources,
// mirror, republish, subject transform, limits, sealing): a stream someone
// changed to leak or drop messages is repaired, not trusted.
func sameStream(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) && have.Retention == want.Retention &&
		have.Storage == want.Storage && have.Replicas == want.Replicas &&
		have.Duplicates == want.Duplicates && have.MaxAge == want.MaxAge &&
		have.Discard == want.Discard && have.Description == want.Description &&
		len(have.Sources) == 0 && have.Mirror == nil && have.RePublish == nil && have.SubjectTransform == nil &&
		unlimited(have.MaxMsgs) == unlimited(want.MaxMsgs) && unlimited(have.MaxBytes) == unlimited(want.MaxBytes) &&
		unlimited(have.MaxMsgsPerSubject) == unlimited(want.MaxMsgsPerSubject) && unlimited(int64(have.MaxMsgSize)) == unlimited(int64(want.MaxMsgSize)) &&
		!have.Sealed && have.DenyDelete == want.DenyDelete && have.DenyPurge == want.DenyPurge
}

// unlimited folds the server's -1 and an unset 0 into one "no limit".
func unlimited(v int64) int64 {
	if v <= 0 {
		return -1
	}
	return v
}

// kvTampered reports whether a bucket's stream was changed to send its keys
// elsewhere or take in other subjects.
func kvTampered(bucket string, have jetstream.StreamConfig) bool {
	return len(have.Sources) > 0 || have.Mirror != nil || have.RePublish != nil || have.SubjectTransform != nil ||
		!slices.Equal(have.Subjects, []string{"$KV." + bucket + ".>"})
}

// DefaultWaitForNATS is how long Open waits for NATS and JetStream to answer
// before a service gives up at start.
const DefaultWaitForNATS = 2 * time.Minute

// Open is how every service starts on the bus: a JetStream context on nc, with
// the topology ensured. It waits for NATS and JetStream to answer (a server
// starting, a cluster electing its leaders), backing off and saying so with
// the URL, and fails naming the URL only after wait (DefaultWaitForNATS if 0).
func Open(ctx context.Context, nc *nats.Conn, t Topology, wait time.Duration, log *slog.Logger) (jetstream.JetStream, error) {
	if log == nil {
		log = slog.Default()
	}
	if wait <= 0 {
		wait = DefaultWaitForNATS
	}
	// Records that must not hold up a message (the audit log) are published
	// without waiting for their acks; a failure is logged here.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
		log.Error("asynchronous publish failed", "subject", m.Subject, "err", err)
	}), jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	delay := 250 * time.Millisecond
	for try := 1; ; try++ {
		if nc.IsConnected() {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = EnsureTopology(tctx, js, t)
			cancel()
			if errors.Is(err, ErrNoPermission) {
				return nil, err
			}
			if err == nil {
				if try > 1 {
					log.Info("NATS and JetStream are answering", "url", URL(nc))
				}
				return js, nil
			}
		} else {
			err = fmt.Errorf("not connected (%s)", nc.Status())
			if last := nc.LastError(); last != nil {
				err = fmt.Errorf("not connected: %w", last)
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().Add(delay).After(deadline) {
			return nil, fmt.Errorf("NATS at %s did not answer with JetStream within %s: %w", URL(nc), wait, err)
		}
		log.Warn("waiting for NATS and JetStream", "url", URL(nc), "try", try, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// URL is where nc is connected, or else the servers it tries, without
// passwords.
func URL(nc *nats.Conn) string {
	if u := nc.ConnectedUrlRedacted(); u != "" {
		return u
	}
	var out []string
	for _, s := range nc.Servers() {
		if u, err := url.Parse(s); err == nil {
			out = append(out, u.Redacted())
		}
	}
	return strings.Join(out, ",")
}

// Publish sends data to a stream subject with Nats-Msg-Id = key, so a
// re-publish inside DuplicateWindow is dropped by JetStream (ack.Duplicate).
// The Herald-Idempotency-Key header carries key to the next hop.
// The trace ctx carries (envelope.Traceparent) goes in its traceparent header.
func Publish(ctx context.Context, js jetstream.JetStream, subject string, data []byte, key string, h nats.Header, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	m := &nats.Msg{Subject: subject, Data: data, Header: h}
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	if key != "" {
		m.Header.Set(nats.MsgIdHdr, key)
		m.Header.Set(HeaderKey, key)
	}
	if tp := envelope.Traceparent(ctx); tp != "" && m.Header.Get(envelope.HeaderTraceparent) == "" {
		m.Header.Set(envelope.HeaderTraceparent, tp)
	}
	ack, err := js.PublishMsg(ctx, m, opts...)
	if err != nil {
		return nil, fmt.Errorf("publishing to %s: %w", subject, err)
	}
	return ack, nil
}

// IsNoResponders reports whether err means no JetStream stream answered.
func IsNoResponders(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}
