package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ratelimit"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// maxUpdates bounds a getUpdates answer read into memory: up to 100
// updates, each a message of up to 4096 characters with its entities.
const maxUpdates = 64 << 20

// timing is how the receiver waits; tests shorten it.
type timing struct {
	// poll is getUpdates' long-poll timeout.
	poll time.Duration
	// lease is the TTL of the poller lease: how long the other replicas
	// wait before taking over from one that died.
	lease time.Duration
	// retry backs off after network errors and a failing bus.
	retryMin, retryMax time.Duration
	// refused backs off while Telegram refuses to serve this poller (409:
	// someone else polls; 401: the token is wrong).
	refusedMin, refusedMax time.Duration
}

var defaultTiming = timing{
	poll:       25 * time.Second,
	lease:      10 * time.Second,
	retryMin:   time.Second,
	retryMax:   time.Minute,
	refusedMin: 5 * time.Second,
	refusedMax: time.Minute,
}

// receiver long-polls getUpdates for one bot and hands every update to the
// sink before confirming it to Telegram.
type receiver struct {
	*sender  // the Bot API client, the token and its scrubber, and the log
	botID    string
	instance string
	js       jetstream.JetStream
	poller   *http.Client // getUpdates only: its timeout exceeds the long poll
	timing   timing
}

// NewReceiver is the deliver.ReceiverFactory of Telegram integrations: it
// returns nil, nil unless the integration takes inbound messages.
//
// The receiver polls getUpdates itself rather than with go-telegram/bot's
// poller, which confirms an update to Telegram before its handler has run.
// Here an update is confirmed (the offset, kept in the herald_channel_state
// bucket, moves past it) only once the sink has stored it on the bus, with
// its native id "<bot id>:<update id>" as the dedup key: a crash loses
// nothing and a replay adds nothing. Only one messenger replica polls a bot
// (a lease "telegram.<bot id>" in herald_leases); the others stand by and
// take over within seconds when it dies.
func NewReceiver(in config.Integration, env deliver.Env) (deliver.Receiver, error) {
	if !in.Inbound.Enabled || in.Disabled {
		return nil, nil
	}
	if env.JS == nil {
		return nil, fmt.Errorf("telegram integration %q: receiving needs the bus (deliver.Env.JS) for its lease and offsets", in.ID)
	}
	s, err := newSender(in, env)
	if err != nil {
		return nil, err
	}
	botID, _, _ := strings.Cut(s.token, ":")
	instance := env.Replica()
	r := &receiver{
		sender:   s,
		botID:    botID,
		instance: instance,
		js:       env.JS,
		timing:   defaultTiming,
	}
	r.log = r.log.With("bot_id", botID, "instance", instance)
	r.poller = deliver.NewClient(r.timing.poll + requestTimeout)
	return r, nil
}

// Receive polls Telegram while this replica holds the bot's lease and stands
// by while another does, until ctx is done.
func (r *receiver) Receive(ctx context.Context, sink deliver.Sink) error {
	st := deliver.NewReporter(sink, r.log, "telegram polling", deliver.Status{Integration: r.id, Channel: "telegram", Instance: r.instance})
	l := deliver.Lease{
		Key:      "telegram." + r.botID,
		Instance: r.instance,
		TTL:      r.timing.lease,
		Retry:    deliver.Backoff{Min: r.timing.retryMin, Max: r.timing.retryMax},
		Log:      r.log,
		Work:     "polls this bot",
		Name:     "poller",
	}
	return l.Run(ctx, r.js, st, func(ctx context.Context, offsets jetstream.KeyValue) {
		r.poll(ctx, sink, offsets, st)
	})
}

// offsetKey is where the next update id to ask for is kept.
func (r *receiver) offsetKey() string { return "telegram." + r.botID + ".offset" }

// poll runs the getUpdates loop until ctx is done (this replica stops or
// loses the lease).
func (r *receiver) poll(ctx context.Context, sink deliver.Sink, kv jetstream.KeyValue, st *deliver.Reporter) {
	offset, ok := r.loadOffset(ctx, kv, st)
	if !ok {
		return
	}
	r.log.Info("telegram polling", "offset", offset)
	st.Set(deliver.StateRunning, "")
	retry := deliver.Backoff{Min: r.timing.retryMin, Max: r.timing.retryMax}
	refused := deliver.Backoff{Min: r.timing.refusedMin, Max: r.timing.refusedMax}
	for ctx.Err() == nil {
		updates, err := r.getUpdates(ctx, offset)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			_ = ratelimit.Sleep(ctx, r.pollFailed(err, st, &retry, &refused))
			continue
		}
		retry.Reset()
		refused.Reset()
		st.Set(deliver.StateRunning, "")
		for _, raw := range updates {
			next, err := r.handle(ctx, sink, raw, st)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// Not stored: ask for the same update again after a pause;
				// Telegram keeps it meanwhile.
				st.Problem(deliver.StateError, fmt.Sprintf("cannot store received messages on the bus (%v); Telegram keeps them, retrying", err))
				_ = ratelimit.Sleep(ctx, retry.Next())
				break
			}
			if next > offset {
				offset = next
				r.saveOffset(ctx, kv, offset)
			}
		}
		st.Flush()
	}
}

// loadOffset reads the stored offset (0, "whatever Telegram holds", if none).
func (r *receiver) loadOffset(ctx context.Context, kv jetstream.KeyValue, st *deliver.Reporter) (int64, bool) {
	b := deliver.Backoff{Min: r.timing.retryMin, Max: r.timing.retryMax}
	for {
		e, err := kv.Get(ctx, r.offsetKey())
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, true
		}
		if err == nil {
			offset, perr := strconv.ParseInt(string(e.Value()), 10, 64)
			if perr == nil {
				return offset, true
			}
			// Unreadable: start from what Telegram holds; the dedup by native
			// id absorbs anything seen before.
			r.log.Warn("telegram offset unreadable; starting from what Telegram holds", "key", r.offsetKey(), "value", string(e.Value()))
			return 0, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		st.Problem(deliver.StateError, fmt.Sprintf("cannot read the poll offset from NATS (%v); retrying", err))
		if ratelimit.Sleep(ctx, b.Next()) != nil {
			return 0, false
		}
	}
}

// saveOffset records that every update before offset is stored. A failure
// is only logged: Telegram is told by the next getUpdates anyway, and after a
// crash an older offset replays updates the bus already holds.
func (r *receiver) saveOffset(ctx context.Context, kv jetstream.KeyValue, offset int64) {
	if _, err := kv.Put(ctx, r.offsetKey(), []byte(strconv.FormatInt(offset, 10))); err != nil && ctx.Err() == nil {
		r.log.Warn("telegram offset not saved; a restart may replay updates, which dedup absorbs", "offset", offset, "err", err)
	}
}

// handle stores one update and returns the offset that confirms it. An error
// means it was not stored and must be asked for again.
func (r *receiver) handle(ctx context.Context, sink deliver.Sink, raw json.RawMessage, st *deliver.Reporter) (int64, error) {
	var head struct {
		ID int64 `json:"update_id"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.ID <= 0 {
		return 0, fmt.Errorf("an update from Telegram has no update_id: %.200s", raw)
	}
	next := head.ID + 1
	var u models.Update
	if err := json.Unmarshal(raw, &u); err != nil {
		// A shape the client library cannot read must not stop the bot.
		r.log.Warn("telegram update unreadable; skipped", "update_id", head.ID, "err", err)
		return next, nil
	}
	in, queryID := toIngress(r.id, r.botID, &u, time.Now())
	if in == nil {
		r.log.Debug("telegram update without text or files; skipped", "update_id", head.ID)
		return next, nil
	}
	if err := sink.Ingress(ctx, in); err != nil {
		if errors.Is(err, envelope.ErrValidation) {
			// It can never be stored; retrying would stop the bot for good.
			r.log.Error("telegram update refused as invalid; skipped", "update_id", head.ID, "err", err)
			sink.Dropped(ctx, in, "invalid")
			return next, nil
		}
		r.log.Debug("telegram update not stored", "update_id", head.ID, "err", err)
		return 0, err
	}
	st.Received(time.Now())
	if queryID != "" {
		r.answer(ctx, queryID)
	}
	return next, nil
}

// answer acknowledges a button tap, so the spinner on the person's button
// stops. The tap is stored already; a failure only costs the spinner.
func (r *receiver) answer(ctx context.Context, queryID string) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := r.bot.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: queryID}); err != nil {
		r.log.Warn("telegram answerCallbackQuery failed", "err", r.secrets.Scrub(err.Error()))
	}
}

// pollFailed reports a failed getUpdates in the status (and the log, once per
// episode) and says how long to wait.
func (r *receiver) pollFailed(err error, st *deliver.Reporter, retry, refused *deliver.Backoff) time.Duration {
	var tooMany *bot.TooManyRequestsError
	switch {
	case errors.Is(err, bot.ErrorConflict):
		detail := "another client is polling this bot token (409 Conflict): stop it, or remove this integration's inbound"
		if strings.Contains(strings.ToLower(err.Error()), "webhook") {
			detail = "a webhook is set for this bot token (409 Conflict): delete it (deleteWebhook), or remove this integration's inbound"
		}
		st.Problem(deliver.StateConflict, detail)
		return refused.Next()
	case errors.Is(err, bot.ErrorUnauthorized):
		st.Problem(deliver.StateError, fmt.Sprintf("the bot token was rejected by Telegram (401 Unauthorized): check that token_env or token_file of integration %q holds the current token from @BotFather", r.id))
		return refused.Next()
	case errors.Is(err, bot.ErrorNotFound):
		st.Problem(deliver.StateError, fmt.Sprintf("Telegram answered 404 Not Found to getUpdates: check that api_url %s is a Bot API server and that the token of integration %q is complete", r.apiURL, r.id))
		return refused.Next()
	case errors.As(err, &tooMany):
		st.Problem(deliver.StateError, fmt.Sprintf("Telegram rate-limits getUpdates (429, retry_after %ds)", tooMany.RetryAfter))
		return max(time.Duration(tooMany.RetryAfter)*time.Second, retry.Next())
	}
	st.Problem(deliver.StateError, fmt.Sprintf("Telegram getUpdates at %s failed (%s): Telegram or the network is unavailable; retrying", r.apiURL, err))
	return retry.Next()
}

// getUpdates asks for the updates from offset on, waiting up to the poll
// timeout for one to arrive. Errors carry go-telegram/bot's sentinels
// (bot.ErrorConflict, ...) and never the token.
func (r *receiver) getUpdates(ctx context.Context, offset int64) ([]json.RawMessage, error) {
	body, err := json.Marshal(map[string]any{
		"offset":          offset,
		"limit":           100,
		"timeout":         int(r.timing.poll / time.Second),
		"allowed_updates": allowedUpdates,
	})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.apiURL+"/bot"+r.token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, errors.New(r.secrets.Scrub(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	got, err := botClient{deliver.Caller{Client: r.poller, Secrets: r.secrets, MaxAnswer: maxUpdates}}.answer(req)
	if err != nil {
		return nil, err
	}
	var answer struct {
		OK          bool              `json:"ok"`
		Result      []json.RawMessage `json:"result"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(got.Body, &answer); err != nil {
		return nil, fmt.Errorf("HTTP %d without a Bot API answer (%.100q)", got.Status, r.secrets.Scrub(string(got.Body)))
	}
	if answer.OK {
		return answer.Result, nil
	}
	desc := r.secrets.Scrub(answer.Description)
	// The same errors go-telegram/bot returns for its own calls.
	switch answer.ErrorCode {
	case http.StatusConflict:
		return nil, fmt.Errorf("%w, %s", bot.ErrorConflict, desc)
	case http.StatusUnauthorized:
		return nil, fmt.Errorf("%w, %s", bot.ErrorUnauthorized, desc)
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w, %s", bot.ErrorNotFound, desc)
	case http.StatusForbidden:
		return nil, fmt.Errorf("%w, %s", bot.ErrorForbidden, desc)
	case http.StatusBadRequest:
		return nil, fmt.Errorf("%w, %s", bot.ErrorBadRequest, desc)
	case http.StatusTooManyRequests:
		return nil, &bot.TooManyRequestsError{Message: fmt.Sprintf("%s, %s", bot.ErrorTooManyRequests, desc), RetryAfter: answer.Parameters.RetryAfter}
	}
	return nil, fmt.Errorf("%d %s", answer.ErrorCode, desc)
}
