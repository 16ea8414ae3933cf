package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

const (
	// MaxBody bounds one inbound request's body, as the messenger's
	// listener does for every pushed channel.
	MaxBody = 1 << 20
	// seenIDs is how many webhook-ids each receiver remembers.
	seenIDs = 10000
	// retryAfterSeconds is what a 503 asks a sender to wait.
	retryAfterSeconds = "5"
)

// Why a request was refused, as audited.
const (
	ReasonUnsigned       = "unsigned"
	ReasonBadSignature   = "bad_signature"
	ReasonBadToken       = "bad_token"
	ReasonStaleTimestamp = "stale_timestamp"
	ReasonReplayedID     = "replayed_id"
	ReasonInvalid        = "invalid"
)

// idPattern is what an integration id must be to become a path
// (config.Validate already requires it).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

// Path is where the inbound webhooks of an integration are posted.
func Path(integrationID string) string { return "/hooks/" + integrationID }

// receiver takes the POSTs of one webhook integration and hands each to the
// sink. It answers 503 until Receive runs.
type receiver struct {
	id      string
	path    string
	secrets *secrets
	log     *slog.Logger
	now     func() time.Time
	seen    *seen
	// refusals bounds how many refused requests a second are audited and
	// logged, so a scan of the endpoint cannot flood the audit log.
	refusals *rate.Limiter
	mounted  bool

	mu   sync.Mutex
	sink deliver.Sink
}

// NewReceiver is the deliver.ReceiverFactory of webhook integrations: nil,
// nil unless the integration has inbound enabled. It mounts POST
// /hooks/<id> on env.HTTP, served by the messenger on http_listen.
func NewReceiver(in config.Integration, env deliver.Env) (deliver.Receiver, error) {
	if !in.Inbound.Enabled || in.Disabled {
		return nil, nil
	}
	if !idPattern.MatchString(in.ID) {
		return nil, fmt.Errorf("%w: webhook integration id %q cannot be a path: use letters, digits, _ and - only", config.ErrInvalid, in.ID)
	}
	_, sec, err := loadSecrets(in, env.Lookup())
	if err != nil {
		return nil, err
	}
	log := env.Log()
	r := &receiver{
		id:       in.ID,
		path:     Path(in.ID),
		secrets:  sec,
		log:      log.With("channel", "webhook:"+in.ID),
		now:      time.Now,
		seen:     newSeen(seenIDs),
		refusals: rate.NewLimiter(10, 50),
	}
	if env.HTTP != nil {
		env.HTTP.Handle("POST "+r.path, r)
		r.mounted = true
	}
	return r, nil
}

// Receive takes requests until ctx is done; before and after, they are
// answered 503.
func (r *receiver) Receive(ctx context.Context, sink deliver.Sink) error {
	st := deliver.Status{Integration: r.id, Channel: "webhook", State: deliver.StateRunning, Detail: "taking POST " + r.path + " on http_listen"}
	if !r.mounted {
		st.State, st.Detail = deliver.StateError, "no HTTP listener to take POST "+r.path+" on; this messenger was started without one"
	} else {
		r.mu.Lock()
		r.sink = sink
		r.mu.Unlock()
	}
	st.UpdatedAt = time.Now().UTC()
	sink.Status(st)
	<-ctx.Done()
	r.mu.Lock()
	if r.sink == sink {
		r.sink = nil
	}
	r.mu.Unlock()
	return nil
}

func (r *receiver) current() deliver.Sink {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sink
}

// answer is the JSON of every response.
type answer struct {
	OK        bool   `json:"ok"`
	RequestID string `json:"request_id,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	Error     string `json:"error,omitempty"`
}

func reply(w http.ResponseWriter, code int, a answer) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(a)
}

func refuse(w http.ResponseWriter, code int, format string, args ...any) {
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	reply(w, code, answer{Error: fmt.Sprintf(format, args...)})
}

// ServeHTTP takes one inbound webhook.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	sink := r.current()
	if sink == nil {
		refuse(w, http.StatusServiceUnavailable, "Herald is not taking messages on %s now (starting or stopping); send it again shortly", r.path)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			refuse(w, http.StatusRequestEntityTooLarge, "the body is over %d bytes; send a shorter text (a link to the rest)", tooBig.Limit)
			return
		}
		refuse(w, http.StatusBadRequest, "the body could not be read: %v", err)
		return
	}
	a, ok := r.authenticate(w, req, data, sink)
	if !ok {
		return
	}
	b, err := parseBody(data)
	if err != nil {
		refuse(w, http.StatusBadRequest, "%v", err)
		return
	}
	r.store(w, req, sink, a, b, sha256.Sum256(data))
}

// auth is how a request proved itself, and the id it is known by.
type auth struct {
	accepted
	// given: the request named its id (webhook-id), so a repeat is a
	// retry of the same message; otherwise every request is a new one.
	given bool
}

// authenticate checks the request's signature or bearer token; on failure
// it has answered and audited the refusal.
func (r *receiver) authenticate(w http.ResponseWriter, req *http.Request, data []byte, sink deliver.Sink) (auth, bool) {
	id, ts, sig := req.Header.Get(HeaderID), req.Header.Get(HeaderTimestamp), req.Header.Get(HeaderSignature)
	a := auth{accepted: accepted{integration: r.id}}
	deny := func(reason, format string, args ...any) (auth, bool) {
		r.dropped(req, sink, id, reason)
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+r.path+`"`)
		refuse(w, http.StatusUnauthorized, format, args...)
		return auth{}, false
	}
	switch {
	case sig != "":
		if !validID(id) {
			return deny(ReasonBadSignature, "the %s header is missing or unusable: 1 to %d printable characters without spaces or full stops", HeaderID, maxIDLength)
		}
		t, ok := parseTimestamp(ts)
		if !ok {
			return deny(ReasonBadSignature, "the %s header must be unix seconds", HeaderTimestamp)
		}
		if !r.secrets.verify(id, ts, data, sig) {
			return deny(ReasonBadSignature, "%s does not match: send v1,<base64 of the HMAC-SHA256 of '<%s>.<%s>.<body>'>, keyed with the base64-decoded part of this integration's whsec_ secret", HeaderSignature, HeaderID, HeaderTimestamp)
		}
		if off := r.now().Sub(t); off > Tolerance || off < -Tolerance {
			return deny(ReasonStaleTimestamp, "%s is %s from Herald's clock, more than %s: sign every attempt with the current time, and check the sender's clock", HeaderTimestamp, off.Abs().Round(time.Second), Tolerance)
		}
		a.messageID, a.ts, a.auth, a.given = id, ts, "signature", true
	case req.Header.Get("Authorization") != "":
		token, ok := bearerToken(req.Header.Get("Authorization"))
		if !ok || !r.secrets.bearer(token) {
			return deny(ReasonBadToken, "the Authorization header is not \"Bearer \" followed by this integration's whole secret (whsec_…)")
		}
		a.ts, a.auth = strconv.FormatInt(r.now().Unix(), 10), "bearer"
		switch {
		case id == "":
			a.messageID = "hook_" + strings.ReplaceAll(envelope.NewRequestID(), "-", "")
		case validID(id):
			a.messageID, a.given = id, true
		default:
			refuse(w, http.StatusBadRequest, "the %s header is unusable: 1 to %d printable characters without spaces or full stops", HeaderID, maxIDLength)
			return auth{}, false
		}
	default:
		return deny(ReasonUnsigned, "the request is not signed: send the Standard Webhooks headers %s, %s and %s, or Authorization: Bearer <the secret>", HeaderID, HeaderTimestamp, HeaderSignature)
	}
	return a, true
}

// bearerToken is the token of an "Authorization: Bearer <token>" value.
func bearerToken(v string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// store hands an authenticated message to the sink, once per webhook-id:
// a repeat of a stored one (a retry) is answered as the first was, a
// repeat with another body is refused.
func (r *receiver) store(w http.ResponseWriter, req *http.Request, sink deliver.Sink, a auth, b *body, hash [32]byte) {
	if a.given {
		for {
			if prev, ok := r.seen.get(a.messageID); ok {
				if prev.hash != hash {
					r.dropped(req, sink, a.messageID, ReasonReplayedID)
					refuse(w, http.StatusConflict, "%s %s was received already, with another body; give every message its own id (a retry sends the same body)", HeaderID, a.messageID)
					return
				}
				reply(w, http.StatusOK, answer{OK: true, RequestID: prev.requestID, Duplicate: true})
				return
			}
			wait, mine := r.seen.begin(a.messageID)
			if mine {
				break
			}
			// The same id is being stored by another request now.
			select {
			case <-wait:
			case <-req.Context().Done():
				refuse(w, http.StatusServiceUnavailable, "%s %s is being stored by another request; send it again shortly", HeaderID, a.messageID)
				return
			}
		}
		defer r.seen.end(a.messageID)
	}
	in := toIngress(a.accepted, b)
	fresh := in.RequestContext.RequestID
	if err := sink.Ingress(req.Context(), in); err != nil {
		if errors.Is(err, envelope.ErrValidation) {
			// It can never be stored; a retry would not help.
			r.log.Error("inbound webhook refused as invalid", "message_id", a.messageID, "err", err)
			sink.Dropped(context.WithoutCancel(req.Context()), in, ReasonInvalid)
			refuse(w, http.StatusBadRequest, "the message was refused as invalid: %s", deliver.Clip(err.Error(), 500))
			return
		}
		r.log.Warn("inbound webhook not stored; the sender is asked to retry", "message_id", a.messageID, "err", err)
		refuse(w, http.StatusServiceUnavailable, "the message could not be stored now; send it again shortly with the same %s", HeaderID)
		return
	}
	if a.given {
		r.seen.add(seenEntry{id: a.messageID, hash: hash, requestID: in.RequestContext.RequestID})
	}
	// The sink answers a message stored before (by this process or one
	// before a restart) with the first one's request id, and stores nothing.
	dup := in.RequestContext.RequestID != fresh
	r.log.Debug("inbound webhook stored", "message_id", a.messageID, "request_id", in.RequestContext.RequestID, "auth", a.auth, "duplicate", dup)
	reply(w, http.StatusOK, answer{OK: true, RequestID: in.RequestContext.RequestID, Duplicate: dup})
}

// dropped audits a refused request, at most so many a second.
func (r *receiver) dropped(req *http.Request, sink deliver.Sink, id, reason string) {
	if !r.refusals.Allow() {
		r.log.Debug("inbound webhook refused; not audited (too many refusals)", "reason", reason, "remote", req.RemoteAddr)
		return
	}
	r.log.Warn("inbound webhook refused", "reason", reason, "remote", req.RemoteAddr)
	native := ""
	if validID(id) {
		native = nativeID(r.id, id)
	}
	in := envelope.NewIngress(r.id, "webhook", r.id, "webhook:"+r.id, "", "", native, nil)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), 5*time.Second)
	defer cancel()
	sink.Dropped(ctx, in, reason)
}
