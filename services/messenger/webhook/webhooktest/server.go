// Package webhooktest is a fake webhook receiver for tests, like
// net/http/httptest, that checks Standard Webhooks signatures with code of
// its own, written from the specification.
//
//   - NewServer, URL: a receiver with a secret, and the address of a path.
//   - Requests, Accepted: what it received, and the new webhooks it took.
//   - FailNext, FailNextWith, SetMaxBody, SetClock, OnAccept, HangUpNext: a
//     receiver that refuses, limits, judges time otherwise, or loses answers.
//   - Sign, Verify, NewSecret, Key: the specification's signatures.
//   - Post, PostOptions: a signed webhook to an inbound endpoint, or a forged one.
//
// What it checks, and how it deduplicates, is in docs/testing.md, "The fakes".
package webhooktest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
)

// Request is one request the server received, as it understood it.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Payload is the body decoded as a JSON object (a multipart body's
	// part "payload"); nil if it is not one.
	Payload map[string]any
	// Files are the file parts of a multipart body, in order; set only
	// when every one matched the size and sha256 the payload gives it.
	Files []File
	// ID and Timestamp are the webhook-id and webhook-timestamp headers;
	// Signatures the entries of webhook-signature.
	ID, Timestamp string
	Signatures    []string
	// Verified: the signature matched the secret and the timestamp was
	// fresh.
	Verified bool
	// Problem is why the server refused the request ("" if it did not, or
	// if it answered an injected fault).
	Problem string
	// Duplicate: a request with the same webhook-id and body was accepted
	// before.
	Duplicate bool
	// Status is what the server answered, or would have: a webhook it
	// hung up on (HungUp) is 200 and was never answered.
	Status int
	At     time.Time
	// HungUp: the server took the webhook and then reset the connection
	// instead of answering (HangUpNext).
	HungUp bool
}

// File is one file part of a multipart webhook.
type File struct {
	Part      string // its form name, as the payload's files name it
	Name      string // its filename
	MediaType string // its Content-Type
	Data      []byte
}

// DefaultMaxBody is the largest body a Server takes unless SetMaxBody says
// otherwise.
const DefaultMaxBody = 64 << 20

// Accepted reports whether the server took the request as a new webhook.
func (r Request) Accepted() bool {
	return r.Verified && r.Status >= 200 && r.Status < 300 && !r.Duplicate
}

// Server is a fake webhook receiver. Its methods are safe for concurrent use.
type Server struct {
	secret string
	http   *httptest.Server

	hooks   testkit.Hooks[Request] // of key ""
	maxBody atomic.Int64

	mu    sync.Mutex
	reqs  []Request
	fails []fault
	seen  map[string][32]byte // accepted ids → body hash
	now   func() time.Time
}

type fault struct {
	code       int
	retryAfter string
}

// NewServer starts a receiver that verifies with secret ("whsec_…"); it is
// closed when the test ends.
func NewServer(t testing.TB, secret string) *Server {
	t.Helper()
	if _, err := Key(secret); err != nil {
		t.Fatalf("webhooktest: %v", err)
	}
	s := &Server{secret: secret, seen: map[string][32]byte{}, now: time.Now}
	s.maxBody.Store(DefaultMaxBody)
	s.http = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// URL is the address of path on the server ("/ops" → "http://127.0.0.1:…/ops").
func (s *Server) URL(path string) string { return s.http.URL + path }

// Close shuts the server down; later requests fail to connect.
func (s *Server) Close() { s.http.Close() }

// SetClock makes the server judge timestamps by now instead of the time.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetMaxBody makes the server answer 413 to a body of more than n bytes,
// once it has read it all (so the sender always sees the answer).
func (s *Server) SetMaxBody(n int64) { s.maxBody.Store(n) }

// FailNext makes the next request (whatever it is) be answered with code,
// and a Retry-After of retryAfter in whole seconds if it is positive. Calls
// queue: FailNext twice fails the next two.
func (s *Server) FailNext(code int, retryAfter time.Duration) {
	ra := ""
	if retryAfter > 0 {
		ra = strconv.Itoa(int(retryAfter.Round(time.Second) / time.Second))
	}
	s.FailNextWith(code, ra)
}

// FailNextWith is FailNext with a Retry-After header given verbatim ("" for
// none), such as an HTTP date.
func (s *Server) FailNextWith(code int, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails = append(s.fails, fault{code: code, retryAfter: retryAfter})
}

// OnAccept makes fn run each time the server accepted a new webhook, after
// recording it and before writing the answer: the sender waits until fn
// returns (a slow receiver). fn runs without the server's lock, so it may
// call the server; requests run it concurrently. A nil fn removes the hook.
func (s *Server) OnAccept(fn func(Request)) { s.hooks.OnAccept("", fn) }

// HangUpNext makes the server take the next n new webhooks it accepts (a
// retry with the same webhook-id is then a duplicate) and reset the
// connection instead of answering, after any OnAccept hook: the receiver
// has the webhook, and the sender cannot know.
func (s *Server) HangUpNext(n int) { s.hooks.HangUpNext("", n) }

// Requests returns every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Accepted returns the requests taken as new webhooks, in order.
func (s *Server) Accepted() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Accepted() {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, s.maxBody.Load()+1))
	tooBig := int64(len(body)) > s.maxBody.Load()
	if tooBig {
		_, _ = io.Copy(io.Discard, req.Body)
	}
	rec := Request{
		Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: body,
		ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
		At: time.Now(),
	}
	if sigs := req.Header.Get("webhook-signature"); sigs != "" {
		rec.Signatures = splitSpaces(sigs)
	}
	var unreadable string
	if !tooBig {
		rec.Payload, rec.Files, unreadable = decode(req.Header.Get("Content-Type"), body)
	}

	s.mu.Lock()
	code, problem, injected := s.judgeLocked(&rec, req, tooBig, unreadable)
	rec.Status, rec.Problem = code, problem
	var hook func(Request)
	if rec.Accepted() {
		hook, rec.HungUp = s.hooks.Accepted("")
	}
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()
	if hook != nil {
		hook(rec)
	}
	switch {
	case rec.HungUp:
		delivertest.HangUp(w)
	case injected != nil:
		if injected.retryAfter != "" {
			w.Header().Set("Retry-After", injected.retryAfter)
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "injected %d\n", code)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if problem != "" {
			_ = json.NewEncoder(w).Encode(map[string]string{"error": problem})
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
	}
}

// judgeLocked decides the answer to a request, marking rec Verified and
// Duplicate, and takes an accepted webhook's id as seen: the status, the
// reason for a refusal, and the fault when one was injected. unreadable is
// what is wrong with a body that did not decode.
func (s *Server) judgeLocked(rec *Request, req *http.Request, tooBig bool, unreadable string) (int, string, *fault) {
	if len(s.fails) > 0 {
		f := s.fails[0]
		s.fails = s.fails[1:]
		return f.code, "", &f
	}
	if req.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "webhooks are POSTed", nil
	}
	if tooBig {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes", s.maxBody.Load()), nil
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || (mt != "application/json" && mt != "multipart/form-data") {
		return http.StatusUnsupportedMediaType, "Content-Type must be application/json or multipart/form-data", nil
	}
	if err := Verify(s.secret, rec.ID, rec.Timestamp, rec.Body, req.Header.Get("webhook-signature"), s.now()); err != nil {
		return http.StatusUnauthorized, err.Error(), nil
	}
	rec.Verified = true
	if unreadable != "" {
		return http.StatusBadRequest, unreadable, nil
	}
	hash := sha256.Sum256(rec.Body)
	if prev, ok := s.seen[rec.ID]; ok {
		if prev != hash {
			return http.StatusConflict, "webhook-id " + rec.ID + " was received before with another body", nil
		}
		rec.Duplicate = true
		return http.StatusOK, "", nil
	}
	s.seen[rec.ID] = hash
	return http.StatusOK, "", nil
}

func splitSpaces(s string) []string {
	var out []string
	for _, f := range bytes.Fields([]byte(s)) {
		out = append(out, string(f))
	}
	return out
}
