package discordtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Gateway opcodes.
const (
	OpDispatch       = 0
	OpHeartbeat      = 1
	OpIdentify       = 2
	OpPresenceUpdate = 3
	OpVoiceState     = 4
	OpResume         = 6
	OpReconnect      = 7
	OpRequestMembers = 8
	OpInvalidSession = 9
	OpHello          = 10
	OpHeartbeatACK   = 11
)

// Intents the fake filters events by.
const (
	intentGuilds                 = 1 << 0
	intentGuildMessages          = 1 << 9
	intentGuildMessageReactions  = 1 << 10
	intentDirectMessages         = 1 << 12
	intentDirectMessageReactions = 1 << 13
	intentMessageContent         = 1 << 15
	// allIntents are the intents Discord defines (bits 0 to 25).
	allIntents = 1<<26 - 1
)

// DefaultHeartbeatInterval is the heartbeat_interval Hello names, Discord's.
const DefaultHeartbeatInterval = 41250 * time.Millisecond

// Identify is an Identify a client sent.
type Identify struct {
	Token      string `json:"token"`
	Intents    int    `json:"intents"`
	Properties struct {
		OS      string `json:"os"`
		Browser string `json:"browser"`
		Device  string `json:"device"`
	} `json:"properties"`
	Compress bool `json:"compress"`
}

// Resume is a Resume a client sent.
type Resume struct {
	Token     string `json:"token"`
	SessionID string `json:"session_id"`
	Seq       int64  `json:"seq"`
}

// Connection is a gateway connection the fake took: its path ("/gateway",
// or "/resume" for READY's resume_gateway_url) and query.
type Connection struct {
	Path, Query string
	// Close is the close code it ended with (the fake's or the client's),
	// 0 while open, -1 for a connection dropped without a close frame.
	Close int
}

// frame is a gateway payload as the fake writes it.
type frame struct {
	Op int     `json:"op"`
	D  any     `json:"d"`
	S  *int64  `json:"s"`
	T  *string `json:"t"`
}

// gwSession is a gateway session: it outlives its connections, and keeps
// every dispatch for a resume to replay.
type gwSession struct {
	id      string
	intents int
	seq     int64
	events  []gwEvent
	conn    *gwConn
	valid   bool
	live    bool // READY or RESUMED sent on conn
}

type gwEvent struct {
	seq int64
	raw []byte
}

// gwConn is one websocket connection of the gateway.
type gwConn struct {
	ws      *websocket.Conn
	out     chan []byte
	done    chan struct{}
	once    sync.Once
	session *gwSession
	info    int // index in gatewayState.conns
}

// gatewayState is the gateway's side of the Server, guarded by Server.mu.
type gatewayState struct {
	interval     time.Duration
	ack          bool
	refuse       websocket.StatusCode
	allowContent bool
	startsLeft   int
	startsReset  time.Duration

	sessions map[string]*gwSession
	current  *gwSession
	// open are the connections not yet ended; openMu guards it (also taken
	// without Server.mu, by Close).
	openMu     sync.Mutex
	open       map[*gwConn]bool
	conns      []Connection
	identifies []Identify
	resumes    []Resume
}

func (g *gatewayState) init() {
	g.interval = DefaultHeartbeatInterval
	g.ack = true
	g.allowContent = true
	g.startsLeft = 1000
	g.startsReset = 24 * time.Hour
	g.sessions = map[string]*gwSession{}
	g.open = map[*gwConn]bool{}
}

// closeAll ends every connection; it takes no Server.mu, since ending a
// connection does.
func (g *gatewayState) closeAll() {
	for c := range g.snapshotOpen() {
		_ = c.ws.CloseNow()
	}
}

func (g *gatewayState) snapshotOpen() map[*gwConn]bool {
	g.openMu.Lock()
	defer g.openMu.Unlock()
	out := make(map[*gwConn]bool, len(g.open))
	for c := range g.open {
		out[c] = true
	}
	return out
}

// SetHeartbeat sets the heartbeat_interval Hello names and whether
// heartbeats are acknowledged (op 11); without ACKs a client should take
// the connection for dead.
func (s *Server) SetHeartbeat(interval time.Duration, ack bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.interval, s.gw.ack = interval, ack
}

// RefuseIdentify makes every Identify end the connection with code (4014
// disallowed intents, 4011 sharding required, ...); 0 stops it.
func (s *Server) RefuseIdentify(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.refuse = websocket.StatusCode(code)
}

// AllowMessageContent says whether the bot may have the privileged
// MESSAGE_CONTENT intent (default true); false, an Identify asking for it
// is closed with 4014, as when it is off in the Developer Portal.
func (s *Server) AllowMessageContent(allow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.allowContent = allow
}

// SetSessionStartLimit sets what GET /gateway/bot says of the sessions the
// bot may still start today.
func (s *Server) SetSessionStartLimit(remaining int, resetAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.startsLeft, s.gw.startsReset = remaining, resetAfter
}

// Identifies are the Identify payloads received, in order.
func (s *Server) Identifies() []Identify {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Identify(nil), s.gw.identifies...)
}

// Resumes are the Resume payloads received, in order.
func (s *Server) Resumes() []Resume {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Resume(nil), s.gw.resumes...)
}

// Connections are the gateway connections taken, in order.
func (s *Server) Connections() []Connection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Connection(nil), s.gw.conns...)
}

// SessionID is the current session's id ("" for none).
func (s *Server) SessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gw.current == nil {
		return ""
	}
	return s.gw.current.id
}

// WaitLive waits until a session has a connection that got its READY or
// RESUMED, and returns the session's id.
func (s *Server) WaitLive(t testing.TB, timeout time.Duration) string {
	t.Helper()
	id := ""
	s.wait(t, timeout, "live gateway session", func() bool {
		if c := s.gw.current; c != nil && c.valid && c.live && c.conn != nil {
			id = c.id
			return true
		}
		return false
	})
	return id
}

// WaitConnections waits until n gateway connections were taken.
func (s *Server) WaitConnections(t testing.TB, n int, timeout time.Duration) []Connection {
	t.Helper()
	s.wait(t, timeout, "gateway connections", func() bool { return len(s.gw.conns) >= n })
	return s.Connections()
}

// WaitClosed waits until gateway connection i (0-based, in Connections'
// order) ended, and returns its close code.
func (s *Server) WaitClosed(t testing.TB, i int, timeout time.Duration) int {
	t.Helper()
	code := 0
	s.wait(t, timeout, "gateway connection to end", func() bool {
		if i < len(s.gw.conns) && s.gw.conns[i].Close != 0 {
			code = s.gw.conns[i].Close
			return true
		}
		return false
	})
	return code
}

// RequestReconnect sends Reconnect (op 7) on the live connection: the
// client should close it and resume.
func (s *Server) RequestReconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.gw.current; c != nil && c.conn != nil {
		c.conn.send(frame{Op: OpReconnect})
	}
}

// InvalidateSession sends Invalid Session (op 9) with d resumable on the
// live connection; unless resumable, the session is gone.
func (s *Server) InvalidateSession(resumable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.gw.current; c != nil && c.conn != nil {
		if !resumable {
			c.valid = false
		}
		c.conn.send(frame{Op: OpInvalidSession, D: resumable})
	}
}

// CloseGateway closes the live connection with code and reason, as Discord
// does; 4007 and 4009 (and 4004, 4010 to 4014) also end the session.
func (s *Server) CloseGateway(code int, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.gw.current
	if c == nil || c.conn == nil {
		return
	}
	switch code {
	case 4004, 4007, 4009, 4010, 4011, 4012, 4013, 4014:
		c.valid = false
	}
	c.conn.closeWith(websocket.StatusCode(code), reason)
}

// DropGateway ends the live connection without a close frame, as a network
// failure does; the session stays resumable.
func (s *Server) DropGateway() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.gw.current; c != nil && c.conn != nil {
		_ = c.conn.ws.CloseNow()
	}
}

// dispatchLocked sends event t with data to the current session (buffered
// for a resume while it has no connection), if it has intent need (0: any);
// it returns the event's sequence number, 0 if nobody gets it.
func (g *gatewayState) dispatchLocked(s *Server, t string, data any, need int) int64 {
	c := g.current
	if c == nil || !c.valid || (need != 0 && c.intents&need == 0) {
		return 0
	}
	c.seq++
	seq := c.seq
	raw, err := json.Marshal(frame{Op: OpDispatch, D: data, S: &seq, T: &t})
	if err != nil {
		s.t.Errorf("discordtest: %s not encodable: %v", t, err)
		return 0
	}
	c.events = append(c.events, gwEvent{seq: seq, raw: raw})
	if c.conn != nil {
		c.conn.sendRaw(raw)
	}
	s.changed.Notify()
	return seq
}

// Seq is the current session's last sequence number.
func (s *Server) Seq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gw.current == nil {
		return 0
	}
	return s.gw.current.seq
}

func (c *gwConn) send(f frame) {
	raw, err := json.Marshal(f)
	if err == nil {
		c.sendRaw(raw)
	}
}

// sendRaw queues raw for the connection's writer; a client too slow to
// take 4096 messages is dropped, as Discord drops one.
func (c *gwConn) sendRaw(raw []byte) {
	select {
	case c.out <- raw:
	case <-c.done:
	default:
		c.closeWith(4008, "Rate limited.")
	}
}

// closeWith ends the connection with a close frame of code, once.
func (c *gwConn) closeWith(code websocket.StatusCode, reason string) {
	c.once.Do(func() {
		close(c.done)
		go func() { _ = c.ws.Close(code, reason) }()
	})
}

// writeLoop writes the queued messages in order.
func (c *gwConn) writeLoop() {
	for {
		select {
		case raw := <-c.out:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := c.ws.Write(ctx, websocket.MessageText, raw)
			cancel()
			if err != nil {
				return
			}
		case <-c.done:
			return
		}
	}
}

func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// serveGateway runs one gateway connection.
func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(1 << 20)
	c := &gwConn{ws: ws, out: make(chan []byte, 4096), done: make(chan struct{})}
	s.mu.Lock()
	c.info = len(s.gw.conns)
	s.gw.conns = append(s.gw.conns, Connection{Path: r.URL.Path, Query: r.URL.RawQuery})
	s.gw.openMu.Lock()
	s.gw.open[c] = true
	s.gw.openMu.Unlock()
	interval := s.gw.interval
	s.changed.Notify()
	s.mu.Unlock()
	go c.writeLoop()

	code := websocket.StatusCode(-1)
	defer func() {
		s.mu.Lock()
		if sess := c.session; sess != nil && sess.conn == c {
			sess.conn, sess.live = nil, false
		}
		if s.gw.conns[c.info].Close == 0 {
			s.gw.conns[c.info].Close = int(code)
		}
		s.gw.openMu.Lock()
		delete(s.gw.open, c)
		s.gw.openMu.Unlock()
		s.changed.Notify()
		s.mu.Unlock()
		c.once.Do(func() { close(c.done) })
		_ = ws.CloseNow()
	}()

	// A connection the fake ends is closed with a close frame and then read
	// until the client answers it, so that the frame goes out before the
	// connection does.
	ended := websocket.StatusCode(0)
	end := func(e websocket.StatusCode, reason string) {
		ended, code = e, e
		c.closeWith(e, reason)
		s.record(c, e)
	}
	q := r.URL.Query()
	switch {
	case q.Get("v") != "10":
		end(4012, "Invalid API version")
	case q.Get("encoding") != "json":
		end(4002, "Error while decoding payload.")
	default:
		c.send(frame{Op: OpHello, D: map[string]int64{"heartbeat_interval": interval.Milliseconds()}})
	}
	for {
		typ, data, err := ws.Read(context.Background())
		if err != nil {
			if cs := websocket.CloseStatus(err); cs >= 0 && ended == 0 {
				code = cs
			}
			return
		}
		if ended != 0 {
			continue
		}
		var p struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if typ != websocket.MessageText || json.Unmarshal(data, &p) != nil {
			end(4002, "Error while decoding payload.")
			continue
		}
		if e := s.handle(c, p.Op, p.D); e != 0 {
			ended, code = e, e
			s.record(c, e)
		}
	}
}

// record notes how connection c ended, as the fake closed it.
func (s *Server) record(c *gwConn, code websocket.StatusCode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gw.conns[c.info].Close = int(code)
	s.changed.Notify()
}

// handle answers one payload from the client; a non-zero result is the
// close code the connection was ended with.
func (s *Server) handle(c *gwConn, op int, d json.RawMessage) websocket.StatusCode {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &s.gw
	switch op {
	case OpHeartbeat:
		s.changed.Notify()
		if g.ack {
			c.send(frame{Op: OpHeartbeatACK})
		}
		return 0
	case OpIdentify:
		return s.identifyLocked(c, d)
	case OpResume:
		return s.resumeLocked(c, d)
	case OpPresenceUpdate, OpVoiceState, OpRequestMembers:
		if c.session == nil {
			c.closeWith(4003, "Not authenticated.")
			return 4003
		}
		return 0
	}
	c.closeWith(4001, "Unknown opcode.")
	return 4001
}

func (s *Server) identifyLocked(c *gwConn, d json.RawMessage) websocket.StatusCode {
	g := &s.gw
	var id Identify
	if err := json.Unmarshal(d, &id); err != nil {
		c.closeWith(4002, "Error while decoding payload.")
		return 4002
	}
	g.identifies = append(g.identifies, id)
	s.changed.Notify()
	switch {
	case c.session != nil:
		c.closeWith(4005, "Already authenticated.")
		return 4005
	case id.Token != s.token:
		c.closeWith(4004, "Authentication failed.")
		return 4004
	case g.refuse != 0:
		c.closeWith(g.refuse, "Refused by the test.")
		return g.refuse
	case id.Intents&^allIntents != 0:
		c.closeWith(4013, "Invalid intent(s).")
		return 4013
	case id.Intents&intentMessageContent != 0 && !g.allowContent:
		c.closeWith(4014, "Disallowed intent(s).")
		return 4014
	}
	g.startsLeft--
	if old := g.current; old != nil && old.conn != nil && old.conn != c {
		// One session per bot here: a new one replaces the old.
		old.valid = false
	}
	sess := &gwSession{id: newSessionID(), intents: id.Intents, conn: c, valid: true}
	g.sessions[sess.id] = sess
	g.current = sess
	c.session = sess
	bot := *s.users[BotID]
	g.dispatchLocked(s, "READY", map[string]any{
		"v": 10, "user": bot, "guilds": []map[string]any{{"id": GuildID, "unavailable": true}},
		"session_id": sess.id, "session_type": "normal", "resume_gateway_url": s.ResumeURL(),
		"shard": []int{0, 1}, "application": map[string]any{"id": BotID, "flags": 0},
		"private_channels": []any{}, "relationships": []any{}, "user_settings": map[string]any{},
	}, 0)
	sess.live = true
	g.dispatchLocked(s, "GUILD_CREATE", s.guildLocked(), intentGuilds)
	return 0
}

// guildLocked is GUILD_CREATE's data: the server with its channels and
// active threads.
func (s *Server) guildLocked() map[string]any {
	var channels, threads []map[string]any
	for _, ch := range s.channels {
		switch {
		case ch.GuildID != GuildID:
		case ch.Type == TypePublicThread:
			threads = append(threads, map[string]any{"id": ch.ID, "type": ch.Type, "guild_id": GuildID, "name": ch.Name, "parent_id": ch.ParentID})
		default:
			channels = append(channels, map[string]any{"id": ch.ID, "type": ch.Type, "name": ch.Name, "position": 0})
		}
	}
	return map[string]any{
		"id": GuildID, "name": "Herald test", "unavailable": false, "member_count": 3, "large": false,
		"channels": channels, "threads": threads, "members": []any{}, "roles": []any{}, "joined_at": now(),
	}
}

func (s *Server) resumeLocked(c *gwConn, d json.RawMessage) websocket.StatusCode {
	g := &s.gw
	var rs Resume
	if err := json.Unmarshal(d, &rs); err != nil {
		c.closeWith(4002, "Error while decoding payload.")
		return 4002
	}
	g.resumes = append(g.resumes, rs)
	s.changed.Notify()
	if rs.Token != s.token {
		c.closeWith(4004, "Authentication failed.")
		return 4004
	}
	sess := g.sessions[rs.SessionID]
	if sess == nil || !sess.valid {
		c.send(frame{Op: OpInvalidSession, D: false})
		return 0
	}
	if rs.Seq > sess.seq || rs.Seq < 0 {
		sess.valid = false
		c.closeWith(4007, "Invalid seq.")
		return 4007
	}
	if old := sess.conn; old != nil && old != c {
		old.closeWith(4000, "Session resumed elsewhere.")
	}
	sess.conn, c.session = c, sess
	g.current = sess
	for _, ev := range sess.events {
		if ev.seq > rs.Seq {
			c.sendRaw(ev.raw)
		}
	}
	g.dispatchLocked(s, "RESUMED", map[string]any{"_trace": []string{"discordtest"}}, 0)
	sess.live = true
	return 0
}

// WaitResumes waits until n Resumes were received, and returns them.
func (s *Server) WaitResumes(t testing.TB, n int, timeout time.Duration) []Resume {
	t.Helper()
	s.wait(t, timeout, "resumes", func() bool { return len(s.gw.resumes) >= n })
	return s.Resumes()
}
