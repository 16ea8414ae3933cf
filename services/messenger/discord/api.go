package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ratelimit"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// userAgent is what Discord asks every bot to send: "DiscordBot ($url,
// $versionNumber)"; requests without it may be refused by Cloudflare.
const userAgent = "DiscordBot (https://github.com/heraldhq/herald, 1)"

// rest is a client of Discord's REST API for one bot, on the messenger's
// one HTTP helper (deliver.Caller: no redirect followed, the answer read to
// a bound, OutcomeUnknown, secrets scrubbed): every call carries the token
// in the Authorization header only and ends in an answer or an *apiError
// with Discord's own account of what was wrong (its JSON error code). It
// keeps the buckets Discord's rate limit headers announce as spent, so that
// the next call on one waits for its reset instead of collecting a 429.
type rest struct {
	id      string // integration id, for messages
	base    string // api_url without a trailing slash
	token   string // only ever sent in the Authorization header
	client  *http.Client
	secrets *deliver.Scrubber
	caller  deliver.Caller
	// transfer is client without its bound of one JSON call, for calls
	// that carry files (up to 25 MB each, ten to a message): they take
	// as long as they take, within transferTimeout. uploads calls with it.
	transfer *http.Client
	uploads  deliver.Caller
	log      *slog.Logger
	now      func() time.Time

	mu    sync.Mutex
	spent map[string]time.Time // route key -> when its bucket resets
}

func newREST(id, base, token string, timeout, transferTimeout time.Duration, log *slog.Logger) *rest {
	r := &rest{id: id, base: base, token: token, client: deliver.NewClient(timeout), secrets: deliver.NewScrubber("<token>", token),
		log: log, now: time.Now, spent: map[string]time.Time{}}
	r.caller = deliver.Caller{Client: r.client, Secrets: r.secrets}
	r.transfer = &http.Client{Timeout: transferTimeout, Transport: r.client.Transport, CheckRedirect: r.client.CheckRedirect}
	r.uploads = deliver.Caller{Client: r.transfer, Secrets: r.secrets}
	return r
}

// apiError is a REST call that did not succeed: Discord's JSON error, an
// HTTP status that is not Discord's answer, or no answer at all. Its texts
// hold no token: the token travels only in a header, and transport errors
// are scrubbed.
type apiError struct {
	method, route string // "POST", "/channels/{id}/messages"
	// status is the HTTP status; 0 when no answer came.
	status int
	// code and message are Discord's ({"code": 10003, "message": "Unknown
	// Channel"}); code 0 with a message for a 401 or 429.
	code    int
	message string
	// detail is the first field error of a 50035 Invalid Form Body.
	detail string
	// retryAfter and global are a 429's (retry_after, global); scope is its
	// X-RateLimit-Scope (user, global, shared).
	retryAfter time.Duration
	global     bool
	scope      string
	// cause is the transport failure when no answer came, or a short
	// description of an answer that was not Discord's.
	cause error
	// unknown: the call went out whole and no complete answer came
	// (deliver.OutcomeUnknown), so Discord may have carried it out.
	unknown bool
}

func (e *apiError) Error() string {
	switch {
	case e.code != 0 || e.message != "":
		s := fmt.Sprintf("discord %s %s: %d %s", e.method, e.route, e.code, e.message)
		if e.detail != "" {
			s += " (" + e.detail + ")"
		}
		return s
	case e.cause != nil:
		return fmt.Sprintf("discord %s %s: %v", e.method, e.route, e.cause)
	}
	return fmt.Sprintf("discord %s %s: HTTP %d", e.method, e.route, e.status)
}

func (e *apiError) Unwrap() error { return e.cause }

// rateLimited reports whether err is Discord asking to wait, and how long:
// its retry_after, to the millisecond (deliver.RateLimits.Limited).
func rateLimited(err error) (time.Duration, bool) {
	e, ok := errors.AsType[*apiError](err)
	if !ok || e.status != http.StatusTooManyRequests {
		return 0, false
	}
	return max(e.retryAfter, 50*time.Millisecond), true
}

// errorBody is Discord's JSON error answer, and a 429's.
type errorBody struct {
	Code       int             `json:"code"`
	Message    string          `json:"message"`
	Errors     json.RawMessage `json:"errors"`
	RetryAfter float64         `json:"retry_after"`
	Global     bool            `json:"global"`
}

// call sends method to route (a path under api_url, ids in it; the
// route's template in tmpl, for messages and buckets) with body as JSON
// (an *upload as multipart/form-data), and decodes a successful answer
// into out (if not nil).
func (r *rest) call(ctx context.Context, method, tmpl, route string, body, out any) error {
	caller := r.caller
	if _, ok := body.(*upload); ok {
		caller = r.uploads
	}
	return r.callWith(ctx, caller, method, tmpl, route, body, out)
}

// ready waits until the bucket of a call is not spent: a sender waits
// before it marks a call in flight (deliver.Delivery.Calling), so that a
// crash during the wait leaves no call uncertain.
func (r *rest) ready(ctx context.Context, method, tmpl, route string) error {
	if err := r.waitBucket(ctx, method+" "+bucketKey(tmpl, route)); err != nil {
		return &apiError{method: method, route: tmpl, cause: err}
	}
	return nil
}

// callWith is call through caller (one that scrubs more secrets).
func (r *rest) callWith(ctx context.Context, caller deliver.Caller, method, tmpl, route string, body, out any) error {
	key := method + " " + bucketKey(tmpl, route)
	e := &apiError{method: method, route: tmpl}
	if err := r.waitBucket(ctx, key); err != nil {
		e.cause = err
		return e
	}
	rd, ctype, err := encode(body)
	if err != nil {
		// Nothing went out.
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+route, rd)
	if err != nil {
		if c, ok := rd.(io.Closer); ok {
			_ = c.Close()
		}
		e.cause = errors.New(caller.Secrets.Scrub(err.Error()))
		return e
	}
	if f, ok := rd.(*formBody); ok {
		req.ContentLength = f.size // sent with its length, not chunked
	}
	req.Header.Set("Authorization", "Bot "+r.token)
	req.Header.Set("User-Agent", userAgent)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	got, err := caller.Do(req)
	if err != nil {
		failed, ok := errors.AsType[*deliver.CallError](err) // the Caller's every error
		if !ok {
			e.cause = errors.New(caller.Secrets.Scrub(err.Error()))
			return e
		}
		if failed.Answer == nil {
			// No whole answer: a redirect, the network, an answer cut short.
			e.status, e.cause, e.unknown = failed.Status, failed, failed.Unknown
			return e
		}
		// Discord says why in its JSON, whatever the status.
		got = failed.Answer
	}
	r.noteBucket(key, got.Header)
	e.status = got.Status
	if got.Status >= 200 && got.Status < 300 {
		if out == nil || got.Status == http.StatusNoContent {
			return nil
		}
		if err := json.Unmarshal(got.Body, out); err != nil {
			e.cause = fmt.Errorf("the answer is not Discord API JSON (%.80q)", caller.Secrets.Scrub(string(got.Body)))
			return e
		}
		return nil
	}
	e.scope = got.Header.Get("X-RateLimit-Scope")
	var eb errorBody
	jsonErr := json.Unmarshal(got.Body, &eb)
	if got.Status == http.StatusTooManyRequests {
		e.retryAfter = retryAfter(eb.RetryAfter, got.Header)
		e.global = eb.Global || strings.EqualFold(got.Header.Get("X-RateLimit-Global"), "true")
	}
	if jsonErr != nil {
		// A proxy's or Cloudflare's page: only the status says anything.
		return e
	}
	e.code, e.message, e.detail = eb.Code, caller.Secrets.Scrub(eb.Message), caller.Secrets.Scrub(firstFieldError(eb.Errors))
	return e
}

// encode is a request's body, with its Content-Type: nil for none, an
// *upload as multipart/form-data (its files streamed), anything else as
// JSON.
func encode(body any) (io.Reader, string, error) {
	switch b := body.(type) {
	case nil:
		return nil, "", nil
	case *upload:
		f, err := b.open()
		if err != nil {
			return nil, "", err
		}
		return f, f.contentType, nil
	}
	j, err := json.Marshal(body)
	if err != nil {
		return nil, "", fmt.Errorf("%w: encoding a Discord request: %w", envelope.ErrInternal, err)
	}
	return bytes.NewReader(j), "application/json", nil
}

// retryAfter is a 429's wait: the body's retry_after (seconds, with
// fractions), else the Retry-After header (whole seconds).
func retryAfter(body float64, h http.Header) time.Duration {
	if body > 0 && !math.IsInf(body, 0) && body < 1e6 {
		return time.Duration(body * float64(time.Second))
	}
	if secs, err := strconv.ParseFloat(strings.TrimSpace(h.Get("Retry-After")), 64); err == nil && secs > 0 && secs < 1e6 {
		return time.Duration(secs * float64(time.Second))
	}
	return time.Second
}

// bucketKey is the route with its top-level resource (a channel's id) kept
// and every other id replaced: Discord counts limits per route and per
// channel, guild or webhook.
func bucketKey(tmpl, route string) string {
	if strings.HasPrefix(tmpl, "/channels/{") {
		rest, _ := strings.CutPrefix(route, "/channels/")
		ch, _, _ := strings.Cut(rest, "/")
		return strings.Replace(tmpl, "{channel}", ch, 1)
	}
	return tmpl
}

// noteBucket remembers a bucket that the answer says is spent
// (X-RateLimit-Remaining: 0), until X-RateLimit-Reset-After.
func (r *rest) noteBucket(key string, h http.Header) {
	if strings.TrimSpace(h.Get("X-RateLimit-Remaining")) != "0" {
		return
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(h.Get("X-RateLimit-Reset-After")), 64)
	if err != nil || secs <= 0 || secs > 3600 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spent[key] = r.now().Add(time.Duration(secs * float64(time.Second)))
}

// waitBucket waits until the bucket of key resets, if it is spent.
func (r *rest) waitBucket(ctx context.Context, key string) error {
	r.mu.Lock()
	until, ok := r.spent[key]
	if ok && !until.After(r.now()) {
		delete(r.spent, key)
		ok = false
	}
	r.mu.Unlock()
	if !ok {
		return nil
	}
	return ratelimit.Sleep(ctx, until.Sub(r.now()))
}

// firstFieldError is the first message of a 50035 Invalid Form Body's
// errors object ({"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH",
// "message": "Must be 2000 or fewer in length."}]}}), with its field path.
func firstFieldError(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var walk func(path string, v any) string
	walk = func(path string, v any) string {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		if list, ok := m["_errors"].([]any); ok && len(list) > 0 {
			if e, ok := list[0].(map[string]any); ok {
				msg, _ := e["message"].(string)
				code, _ := e["code"].(string)
				return strings.TrimPrefix(path, ".") + ": " + code + " " + msg
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if s := walk(path+"."+k, m[k]); s != "" {
				return s
			}
		}
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return walk("", v)
}

// scrub removes the token from text.
func (r *rest) scrub(text string) string { return r.secrets.Scrub(text) }

// Close releases idle connections.
func (r *rest) close() { r.client.CloseIdleConnections() }
