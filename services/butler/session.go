package butler

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
)

// ErrSessionNotFound is a session id the butler does not know: never given
// out, or ended (idle past session_idle_timeout, closed to make room under
// max_sessions, or deleted by its client).
var ErrSessionNotFound = errors.New("MCP session not found")

// codeTooManySessions is the JSON-RPC error code of a refused initialize
// (-32000 to -32019 are the implementation's to define).
const codeTooManySessions = -32000

// refusedRetryAfter is the Retry-After of a refused initialize: a session
// becomes idle, and so can make room, as soon as its client stops using it.
const refusedRetryAfter = "10"

// sessions bounds the butler's MCP sessions over streamable HTTP (design
// §11: max_sessions, session_idle_timeout). Every initialize opens a session
// that the transport keeps until its client deletes it, and clients often
// never do, so without a bound a butler grows with every initialize it is
// sent.
//
// A session is busy while a request of it is being served or its GET stream
// is open (a connected Claude Code keeps one open for the whole session), and
// idle otherwise; it has been idle since its last request or stream ended. A
// session idle for session_idle_timeout is ended. At max_sessions, a new
// initialize ends the session idle longest to make room; when every session
// is busy the initialize is refused with 503 and a JSON-RPC error saying so.
// A client whose session ended gets 404 for it, which tells an MCP client to
// initialize again. stdio has one session and none of this.
//
// sessions is the transport's session id manager, so the ids it knows are
// exactly the sessions the transport serves; it ends one as the client's
// DELETE does, which drops the transport's state and the MCP server's.
type sessions struct {
	butler    string
	max       int
	idleAfter time.Duration
	log       *slog.Logger
	// transport is the streamable HTTP server whose sessions these are.
	transport http.Handler

	mu      sync.Mutex
	live    map[string]*session
	idle    list.List   // of *session, idle longest first
	reap    *time.Timer // armed while a session is idle
	armed   bool
	stopped bool

	// One log line a minute for each: anyone with a token can cause them
	// at will.
	reaped, evicted, refused obs.Throttle
}

// session is one MCP session over HTTP.
type session struct {
	id string
	// busy counts the session's requests being served and GET streams open.
	busy int
	// since is when the session became idle, while busy is 0.
	since time.Time
	// inIdle is its place in sessions.idle while busy is 0.
	inIdle *list.Element
	// given says the transport gave the id to a client: the initialize
	// that reserved it became a session.
	given bool
}

func newSessions(name string, bc *config.Butler, log *slog.Logger) *sessions {
	s := &sessions{butler: name, max: bc.MaxSessions, idleAfter: time.Duration(bc.SessionIdleTimeout), log: log, live: map[string]*session{}}
	if s.max <= 0 {
		s.max = config.DefaultMaxSessions
	}
	if s.idleAfter <= 0 {
		s.idleAfter = config.DefaultSessionIdleTimeout
	}
	return s
}

// initializing is the context key of the session an initialize reserved.
type initializing struct{}

// wrap bounds the sessions of the transport next leads to. It goes after the
// access guard, so that only a caller with a token can open a session and
// with it end another's idle one.
func (s *sessions) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(server.HeaderKeySessionID)
		switch {
		case mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)),
			r.Method != http.MethodPost && r.Method != http.MethodGet:
			// 2026-07-28 has no sessions (and the transport refuses it); a
			// DELETE ends its session through Terminate.
			next.ServeHTTP(w, r)
			return
		case r.Method == http.MethodPost:
			if reqID, ok := initializeRequest(r); ok {
				s.serveInitialize(w, r, next, reqID)
				return
			}
			if id == "" {
				next.ServeHTTP(w, r) // the transport says what is wrong with it
				return
			}
		case id == "":
			// The transport would open a session for this GET stream alone,
			// one max_sessions does not count.
			http.Error(w, "a GET stream needs the Mcp-Session-Id header the initialize answer gave", http.StatusBadRequest)
			return
		}
		if !s.begin(id) {
			http.Error(w, ErrSessionNotFound.Error()+": it ended (idle too long, or closed to make room for a newer one); initialize a new session", http.StatusNotFound)
			return
		}
		defer s.end(id)
		next.ServeHTTP(w, r)
	})
}

// initializeRequest reports whether r is an initialize the transport opens
// a session for (a session revision's, sent as JSON), and its JSON-RPC id.
func initializeRequest(r *http.Request) (mcp.RequestId, bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return mcp.RequestId{}, false
	}
	body, err := readBody(r)
	if err != nil || !bytes.Contains(body, []byte(mcp.MethodInitialize)) {
		return mcp.RequestId{}, false
	}
	var msg struct {
		ID     mcp.RequestId `json:"id"`
		Method string        `json:"method"`
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != string(mcp.MethodInitialize) {
		return mcp.RequestId{}, false
	}
	version, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return msg.ID, !mcp.IsModernProtocol(version)
}

// readBody returns r's body and leaves it to be read again. The access
// guard has read it into memory already.
func readBody(r *http.Request) ([]byte, error) {
	if b, ok := r.Body.(*bufferedBody); ok {
		return b.data, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(r.Body)
	r.Body = newBufferedBody(data)
	return data, err
}

// serveInitialize makes room for the session an initialize opens, or
// refuses it.
func (s *sessions) serveInitialize(w http.ResponseWriter, r *http.Request, next http.Handler, reqID mcp.RequestId) {
	ns, victim, ok := s.admit()
	if victim != nil {
		s.close(r.Context(), victim.id)
		s.evicted.Log(r.Context(), s.log, slog.LevelInfo, "closed the MCP session idle longest to make room for a new one (max_sessions)",
			"session", victim.id, "idle_for", time.Since(victim.since).Round(time.Millisecond).String(), "max_sessions", s.max)
	}
	if !ok {
		s.refuse(w, r, reqID)
		return
	}
	defer s.initialized(ns)
	next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), initializing{}, ns)))
}

// admit reserves a session for an initialize. At max_sessions it takes the
// session idle longest out (victim, for the caller to close), or, with none
// idle, refuses.
func (s *sessions) admit() (ns, victim *session, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.live) >= s.max {
		oldest := s.idle.Front()
		if oldest == nil {
			return nil, nil, false
		}
		victim = oldest.Value.(*session)
		s.forgetLocked(victim)
	}
	ns = &session{id: "mcp-session-" + rand.Text(), busy: 1}
	s.live[ns.id] = ns
	return ns, victim, true
}

// initialized ends the initialize of ns; if the transport did not open the
// session after all, its reservation is dropped.
func (s *sessions) initialized(ns *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ns.given {
		if s.live[ns.id] == ns {
			delete(s.live, ns.id)
		}
		return
	}
	s.releaseLocked(ns, time.Now())
}

// refuse answers an initialize that found every session busy.
func (s *sessions) refuse(w http.ResponseWriter, r *http.Request, reqID mcp.RequestId) {
	s.refused.Log(r.Context(), s.log, slog.LevelWarn, "refused a new MCP session: max_sessions sessions are open and none is idle",
		"max_sessions", s.max, "remote", r.RemoteAddr)
	msg := fmt.Sprintf("butler %s has %d MCP sessions open, its max_sessions, and every one is in use (a request running or a GET stream open), "+
		"so none can be closed to make room; close a client you no longer use, or raise max_sessions for butler %s in herald.yaml",
		s.butler, s.max, s.butler)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", refusedRetryAfter)
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(mcp.NewJSONRPCError(reqID, codeTooManySessions, msg, nil))
}

// begin marks a request or GET stream of session id; false if there is no
// such session.
func (s *sessions) begin(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.live[id]
	if ss == nil {
		return false
	}
	if ss.inIdle != nil {
		s.idle.Remove(ss.inIdle)
		ss.inIdle = nil
	}
	ss.busy++
	return true
}

// end marks the end of what begin marked.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.live[id]; ss != nil {
		s.releaseLocked(ss, time.Now())
	}
}

func (s *sessions) releaseLocked(ss *session, now time.Time) {
	if ss.busy--; ss.busy > 0 {
		return
	}
	ss.since = now
	ss.inIdle = s.idle.PushBack(ss)
	s.armLocked(now)
}

// forgetLocked takes ss out of the table; the transport may still hold it.
func (s *sessions) forgetLocked(ss *session) {
	delete(s.live, ss.id)
	if ss.inIdle != nil {
		s.idle.Remove(ss.inIdle)
		ss.inIdle = nil
	}
}

// armLocked sets the reaper for the session idle longest. Sessions become
// idle in time order, so the first of the list is always the next to time
// out; the timer may fire early (that session was used since), never late.
func (s *sessions) armLocked(now time.Time) {
	first := s.idle.Front()
	if s.armed || s.stopped || first == nil {
		return
	}
	wait := first.Value.(*session).since.Add(s.idleAfter).Sub(now)
	if s.reap == nil {
		s.reap = time.AfterFunc(wait, s.sweep)
	} else {
		s.reap.Reset(wait)
	}
	s.armed = true
}

// sweep ends the sessions idle for session_idle_timeout.
func (s *sessions) sweep() {
	now := time.Now()
	var expired []*session
	s.mu.Lock()
	s.armed = false
	for e := s.idle.Front(); e != nil; e = s.idle.Front() {
		ss := e.Value.(*session)
		if now.Sub(ss.since) < s.idleAfter {
			break
		}
		s.forgetLocked(ss)
		expired = append(expired, ss)
	}
	s.armLocked(now)
	s.mu.Unlock()
	ctx := context.Background()
	for _, ss := range expired {
		s.close(ctx, ss.id)
		s.reaped.Log(ctx, s.log, slog.LevelInfo, "ended an MCP session idle for session_idle_timeout",
			"session", ss.id, "session_idle_timeout", s.idleAfter.String())
	}
}

// stop stops the reaper: the server is going away.
func (s *sessions) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.reap != nil {
		s.reap.Stop()
	}
}

// close ends session id in the transport as its client's DELETE would: the
// MCP server unregisters it (the channel side forgets it too) and the
// transport drops its state.
func (s *sessions) close(ctx context.Context, id string) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodDelete, MCPPath, http.NoBody)
	if err != nil {
		return
	}
	req.Header.Set(server.HeaderKeySessionID, id)
	s.transport.ServeHTTP(discard{}, req)
}

// ResolveSessionIdManager gives the transport, for an initialize that
// reserved a session, the manager that hands out that session's id.
func (s *sessions) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r != nil {
		if ns, ok := r.Context().Value(initializing{}).(*session); ok {
			return reserved{s, ns}
		}
	}
	return s
}

// Generate is only called for a GET without a session id, which wrap
// refuses; the id it gives is no session's.
func (s *sessions) Generate() string { return "mcp-session-" + rand.Text() }

// Validate reports whether the session is open.
func (s *sessions) Validate(id string) (isTerminated bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[id] == nil {
		return false, fmt.Errorf("%w: %q", ErrSessionNotFound, id)
	}
	return false, nil
}

// Terminate forgets a session its client deleted (or close ended).
func (s *sessions) Terminate(id string) (isNotAllowed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.live[id]; ss != nil {
		s.forgetLocked(ss)
	}
	return false, nil
}

// reserved is the session id manager of an initialize that reserved ns.
type reserved struct {
	*sessions
	ns *session
}

// Generate hands out the reserved session's id.
func (r reserved) Generate() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ns.given = true
	return r.ns.id
}

// discard is the response to a DELETE the butler sends itself.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
