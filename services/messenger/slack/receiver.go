package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

const (
	// MaxClockSkew is how far a request's X-Slack-Request-Timestamp may be
	// from now; older requests are refused as replays (Slack's advice).
	MaxClockSkew = 5 * time.Minute
	// maxEventBody bounds an Events API request body; Slack's are a few KB.
	maxEventBody = 1 << 20
	// ingressTimeout bounds storing one event on the bus. Slack retries an
	// event it has no answer to within 3 s, and the retry is deduplicated.
	ingressTimeout = 10 * time.Second
	// rememberFor is how long a stored event's native id is remembered, so
	// that Slack's retries (within an hour) are answered at once.
	rememberFor = time.Hour
	// maxRemembered bounds that memory.
	maxRemembered = 10000
)

// Reasons a request is refused before it is read, as audited.
const (
	ReasonBadSignature   = "bad_signature"
	ReasonStaleTimestamp = "stale_timestamp"
)

// receiver is the Events API and interactivity endpoints of one Slack app.
type receiver struct {
	id          string
	secret      []byte
	path        string // the Events API's
	interactive string // interactivity's: button clicks
	mounted     bool
	log         *slog.Logger
	now         func() time.Time

	mu   sync.Mutex
	sink deliver.Sink
	// stored holds the native ids stored lately, and when.
	stored map[string]time.Time
}

// NewReceiver is the deliver.ReceiverFactory of Slack integrations: it
// returns nil, nil unless the integration takes inbound messages. It mounts
// the Events API endpoint, POST /slack/<integration id>/events, and the
// interactivity endpoint, POST /slack/<integration id>/interactive, on
// env.HTTP (nothing when env.HTTP is nil). A message is answered 200 only once
// stored, so Slack retries the rest; docs/channels.md#slack has every answer.
func NewReceiver(in config.Integration, env deliver.Env) (deliver.Receiver, error) {
	if !in.Inbound.Enabled || in.Disabled {
		return nil, nil
	}
	c, err := config.SettingsOf[*Config](&in)
	if err != nil {
		return nil, err
	}
	if errs := c.CheckInbound(in.Facts()); len(errs) > 0 {
		return nil, fmt.Errorf("%w: slack integration %q: %s", config.ErrInvalid, in.ID, strings.Join(errs, "; "))
	}
	getenv := env.Lookup()
	secret, err := config.Secret(getenv, c.SigningSecretEnv, "")
	if err != nil {
		return nil, fmt.Errorf("slack integration %q: signing secret: %w", in.ID, err)
	}
	log := env.Log()
	r := &receiver{
		id:          in.ID,
		secret:      []byte(secret),
		path:        "/slack/" + in.ID + "/events",
		interactive: "/slack/" + in.ID + "/interactive",
		log:         log.With("channel", "slack:"+in.ID),
		now:         time.Now,
		stored:      map[string]time.Time{},
	}
	if env.HTTP != nil {
		env.HTTP.Handle("POST "+r.path, r)
		env.HTTP.Handle("POST "+r.interactive, http.HandlerFunc(r.serveInteraction))
		r.mounted = true
	}
	return r, nil
}

// Receive takes events into sink until ctx is done.
func (r *receiver) Receive(ctx context.Context, sink deliver.Sink) error {
	r.mu.Lock()
	r.sink = sink
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.sink == sink {
			r.sink = nil
		}
		r.mu.Unlock()
	}()
	st := deliver.Status{Integration: r.id, Channel: "slack", State: deliver.StateRunning,
		Detail: "Events API at POST " + r.path + " and interactivity at POST " + r.interactive + " on http_listen", UpdatedAt: time.Now().UTC()}
	if !r.mounted {
		st.State, st.Detail = deliver.StateError, "no HTTP listener to serve the Events API and interactivity on"
	}
	sink.Status(st)
	<-ctx.Done()
	return nil
}

func (r *receiver) currentSink() deliver.Sink {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sink
}

// ServeHTTP answers one Events API request.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	sink := r.currentSink()
	body, ok := r.authentic(w, req, sink, "event")
	if !ok {
		return
	}
	var cb callback
	if err := json.Unmarshal(body, &cb); err != nil {
		http.Error(w, "not an Events API request", http.StatusBadRequest)
		return
	}
	switch cb.Type {
	case "url_verification":
		// The handshake of Event Subscriptions: it needs no sink.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": cb.Challenge})
		return
	case "event_callback":
	case "app_rate_limited":
		r.log.Warn("slack stopped sending events for a minute: more than 30,000 in an hour (app_rate_limited)")
		return
	default:
		return
	}
	if sink == nil {
		http.Error(w, "not receiving yet; retry", http.StatusServiceUnavailable)
		return
	}
	in, why := toIngress(r.id, &cb)
	if in == nil {
		r.log.Debug("slack event skipped", "event_id", cb.EventID, "why", why)
		return
	}
	r.store(w, req, sink, in, "event", "Slack will retry it", "event_id", cb.EventID)
}

// serveInteraction answers one interactivity request: a click on a button.
func (r *receiver) serveInteraction(w http.ResponseWriter, req *http.Request) {
	sink := r.currentSink()
	body, ok := r.authentic(w, req, sink, "interaction")
	if !ok {
		return
	}
	// Slack posts a form whose one field, payload, is the JSON; the
	// signature is over the form as sent.
	form, err := url.ParseQuery(string(body))
	var p interaction
	if err != nil || form.Get("payload") == "" || json.Unmarshal([]byte(form.Get("payload")), &p) != nil {
		r.log.Warn("slack interaction refused: no JSON in a payload form field", "content_type", req.Header.Get("Content-Type"))
		http.Error(w, "not an interactivity request: want a form whose payload field is JSON", http.StatusBadRequest)
		return
	}
	if p.Type != "block_actions" {
		r.log.Debug("slack interaction skipped", "type", p.Type)
		return
	}
	if sink == nil {
		http.Error(w, "not receiving yet; retry", http.StatusServiceUnavailable)
		return
	}
	ins, why := clicks(r.id, &p)
	if len(ins) == 0 {
		r.log.Debug("slack click skipped", "trigger_id", p.TriggerID, "why", why)
		return
	}
	for _, in := range ins {
		if !r.store(w, req, sink, in, "click", "Slack shows the person an error; a click again is a new one", "callback_query_id", in.Meta["callback_query_id"]) {
			return
		}
	}
}

// authentic reads a request's body and checks that Slack signed it. A
// request it refuses it has answered (413, 400, or 401 audited through
// sink as dropped), and it reports false.
func (r *receiver) authentic(w http.ResponseWriter, req *http.Request, sink deliver.Sink, kind string) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxEventBody))
	if err != nil {
		if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return nil, false
		}
		http.Error(w, "cannot read the request body", http.StatusBadRequest)
		return nil, false
	}
	reason := r.verify(req.Header, body)
	if reason == "" {
		return body, true
	}
	r.log.Warn("slack "+kind+" refused", "reason", reason, "remote", req.RemoteAddr)
	if sink != nil {
		// Nothing in the body can be trusted: the record says only that a
		// request was refused, and why.
		sink.Dropped(req.Context(), &envelope.Ingress{
			SchemaVersion:  envelope.IngressV1,
			RequestContext: envelope.RequestContext{RequestID: envelope.NewRequestID(), SourceChannel: "slack", ReceivedAt: envelope.Now()},
			IntegrationID:  r.id,
		}, reason)
	}
	http.Error(w, "request not signed by Slack with this app's signing secret ("+reason+")", http.StatusUnauthorized)
	return nil, false
}

// store hands in to sink unless it was stored lately, and reports whether
// the request may go on being answered 200: false when it was not stored
// and answered 503, so that it comes again (lost says how). kind and attrs
// name it in logs.
func (r *receiver) store(w http.ResponseWriter, req *http.Request, sink deliver.Sink, in *envelope.Ingress, kind, lost string, attrs ...any) bool {
	if r.seen(in.NativeID) {
		r.log.Debug("slack "+kind+" already stored", append(attrs, "retry", req.Header.Get("X-Slack-Retry-Num"))...)
		return true
	}
	// Finish storing even if Slack hangs up after its 3 s: a retry is then
	// answered from memory.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), ingressTimeout)
	defer cancel()
	if err := sink.Ingress(ctx, in); err != nil {
		if errors.Is(err, envelope.ErrValidation) {
			// It can never be stored; a retry would fail the same way.
			r.log.Error("slack "+kind+" refused as invalid; skipped", append(attrs, "err", err)...)
			sink.Dropped(ctx, in, "invalid")
			return true
		}
		r.log.Warn("slack "+kind+" not stored; "+lost, append(attrs, "err", err)...)
		http.Error(w, "cannot store the "+kind+" now; retry", http.StatusServiceUnavailable)
		return false
	}
	r.remember(in.NativeID)
	return true
}

// verify checks Slack's signature and the request's age; it returns the
// reason to refuse, or "".
func (r *receiver) verify(h http.Header, body []byte) string {
	ts, sig := h.Get("X-Slack-Request-Timestamp"), h.Get("X-Slack-Signature")
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return ReasonBadSignature
	}
	mac := hmac.New(sha256.New, r.secret)
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	want := "v0=" + hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return ReasonBadSignature
	}
	// Checked after the signature, so a stale_timestamp is a request Slack
	// did sign: a replay, or a clock that is off.
	if skew := r.now().Sub(time.Unix(secs, 0)); skew > MaxClockSkew || skew < -MaxClockSkew {
		return ReasonStaleTimestamp
	}
	return ""
}

// seen reports whether the message with native id was stored lately.
func (r *receiver) seen(native string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.stored[native]
	return ok && r.now().Sub(at) < rememberFor
}

// remember notes that native was stored, forgetting the oldest past the
// bound.
func (r *receiver) remember(native string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if len(r.stored) >= maxRemembered {
		for k, at := range r.stored {
			if now.Sub(at) >= rememberFor {
				delete(r.stored, k)
			}
		}
		for k := range r.stored {
			if len(r.stored) < maxRemembered {
				break
			}
			delete(r.stored, k)
		}
	}
	r.stored[native] = now
}
