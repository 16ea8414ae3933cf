package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// GatewayVersion is the gateway (and REST) API version Herald speaks.
const GatewayVersion = "10"

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opReconnect      = 7
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatACK   = 11
)

// Intents Herald identifies with: servers' channels and threads (GUILDS),
// messages in servers and in direct messages, and their text
// (MESSAGE_CONTENT, a privileged intent to switch on in the Developer
// Portal), and reactions in both (which acknowledge a note that must be
// seen).
const (
	intentGuilds                 = 1 << 0
	intentGuildMessages          = 1 << 9
	intentGuildMessageReactions  = 1 << 10
	intentDirectMessages         = 1 << 12
	intentDirectMessageReactions = 1 << 13
	intentMessageContent         = 1 << 15

	Intents = intentGuilds | intentGuildMessages | intentGuildMessageReactions | intentDirectMessages | intentDirectMessageReactions | intentMessageContent
)

// closeStop is the close code Herald ends a connection with when it stops
// or reconnects: anything but 1000 and 1001 keeps the session resumable,
// so a successor (or this receiver, reconnecting) resumes it and Discord
// replays what it sent meanwhile.
const closeStop websocket.StatusCode = 4900

// maxFrame bounds one gateway message: a large server's GUILD_CREATE runs
// to megabytes.
const maxFrame = 64 << 20

// payload is a gateway message as received.
type payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  string          `json:"t"`
}

// outgoing is a gateway message as sent.
type outgoing struct {
	Op int `json:"op"`
	D  any `json:"d"`
}

type identifyData struct {
	Token      string             `json:"token"`
	Intents    int                `json:"intents"`
	Properties identifyProperties `json:"properties"`
}

type identifyProperties struct {
	OS      string `json:"os"`
	Browser string `json:"browser"`
	Device  string `json:"device"`
}

type resumeData struct {
	Token     string `json:"token"`
	SessionID string `json:"session_id"`
	Seq       int64  `json:"seq"`
}

type helloData struct {
	HeartbeatInterval int64 `json:"heartbeat_interval"`
}

// readyData is the part of READY Herald keeps.
type readyData struct {
	SessionID        string `json:"session_id"`
	ResumeGatewayURL string `json:"resume_gateway_url"`
	User             struct {
		ID       string `json:"id"`
		Username string `json:"username"`
	} `json:"user"`
}

// closeKind is what a close code asks of the client.
type closeKind int

const (
	closeResume closeKind = iota // reconnect and resume
	closeFresh                   // reconnect with a new session
	closeFatal                   // stop: reconnecting cannot help
)

// closeInfo says what Discord's close code means and what to do. Codes not
// listed (1000, 1006, a proxy's) are reconnected and resumed.
func closeInfo(code websocket.StatusCode) (closeKind, string) {
	switch code {
	case 4000:
		return closeResume, "4000 unknown error"
	case 4001:
		return closeResume, "4001 unknown opcode"
	case 4002:
		return closeResume, "4002 decode error"
	case 4003:
		return closeResume, "4003 not authenticated"
	case 4004:
		return closeFatal, "4004 authentication failed"
	case 4005:
		return closeResume, "4005 already authenticated"
	case 4007:
		return closeFresh, "4007 invalid seq"
	case 4008:
		return closeResume, "4008 rate limited"
	case 4009:
		return closeFresh, "4009 session timed out"
	case 4010:
		return closeFatal, "4010 invalid shard"
	case 4011:
		return closeFatal, "4011 sharding required"
	case 4012:
		return closeFatal, "4012 invalid API version"
	case 4013:
		return closeFatal, "4013 invalid intents"
	case 4014:
		return closeFatal, "4014 disallowed intents"
	}
	if code < 0 {
		return closeResume, "the connection dropped"
	}
	return closeResume, fmt.Sprintf("close %d", int(code))
}

// osName is the identify's "os" property.
func osName() string { return runtime.GOOS }

// gatewayURL is u with the version and encoding Herald speaks.
func gatewayURL(u string) (string, error) {
	p, err := url.Parse(strings.TrimSpace(u))
	if err != nil || (p.Scheme != "ws" && p.Scheme != "wss") || p.Host == "" {
		return "", fmt.Errorf("%q is not a ws(s) URL", u)
	}
	q := p.Query()
	q.Set("v", GatewayVersion)
	q.Set("encoding", "json")
	p.RawQuery = q.Encode()
	if p.Path == "" {
		p.Path = "/"
	}
	return p.String(), nil
}

// conn is one gateway connection: it writes payloads one at a time and
// keeps the heartbeat.
type conn struct {
	ws *websocket.Conn
	// seq is the sequence number of the last dispatch handled, which a
	// heartbeat reports and a resume starts after; 0 for none.
	seq *atomic.Int64

	acked   atomic.Bool // the last heartbeat was acknowledged
	busy    atomic.Bool // the reader is handling a dispatch (storing it)
	wasBusy atomic.Bool // the reader was busy long since the last heartbeat
	// interval is Hello's heartbeat interval (0 until Hello).
	interval atomic.Int64
	zombie   atomic.Bool // a heartbeat went unacknowledged: the connection is dead
	writeMu  sync.Mutex

	closeOnce sync.Once
	closed    chan struct{} // closed when the close handshake is over
}

// dial opens a gateway connection to u (without version parameters).
func dial(ctx context.Context, u string, timeout time.Duration, seq *atomic.Int64) (*conn, error) {
	full, err := gatewayURL(u)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, full, &websocket.DialOptions{
		HTTPHeader: http.Header{"User-Agent": {userAgent}},
		// A gateway that points elsewhere is a configuration to fix, not
		// a hop to take with the token.
		HTTPClient: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(maxFrame)
	c := &conn{ws: ws, seq: seq, closed: make(chan struct{})}
	c.acked.Store(true)
	return c, nil
}

// read reads the next payload. It takes no context: a connection is ended
// by closing it (close), which makes read return.
func (c *conn) read() (*payload, error) {
	typ, data, err := c.ws.Read(context.Background())
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, errors.New("the gateway sent a binary message; Herald asks for JSON without compression")
	}
	var p payload
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("the gateway sent a message that is not JSON (%.80q)", data)
	}
	return &p, nil
}

// send writes one payload.
func (c *conn) send(ctx context.Context, op int, d any) error {
	b, err := json.Marshal(outgoing{Op: op, D: d})
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.ws.Write(wctx, websocket.MessageText, b)
}

// heartbeat sends the last handled sequence number (null before any).
func (c *conn) heartbeat(ctx context.Context) error {
	var d any
	if s := c.seq.Load(); s > 0 {
		d = s
	}
	return c.send(ctx, opHeartbeat, d)
}

// beat keeps the heartbeat until ctx is done: the first after a random
// part of interval (so that a fleet of clients does not beat in step), then
// every interval. A heartbeat not acknowledged by the next is a dead
// connection ("zombied"): it is closed resumably, so the reader returns and
// the receiver reconnects. While the reader is busy storing a message, the
// acknowledgement waits unread; that is not held against the connection.
func (c *conn) beat(ctx context.Context, interval time.Duration) {
	c.interval.Store(int64(interval))
	t := time.NewTimer(time.Duration(rand.Float64() * float64(interval)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.acked.Load() && !c.busy.Load() && !c.wasBusy.Load() {
			c.zombie.Store(true)
			c.close(closeStop, "no heartbeat ACK")
			return
		}
		c.acked.Store(false)
		c.wasBusy.Store(false)
		if err := c.heartbeat(ctx); err != nil {
			return // the reader sees the connection fail
		}
		t.Reset(interval)
	}
}

// handling runs handle as the reader's handling of a dispatch: the
// heartbeat does not judge the connection while it runs, nor after it ran
// for a good part of the interval (the ACK may then wait unread).
func (c *conn) handling(handle func() bool) bool {
	c.busy.Store(true)
	started := time.Now()
	ok := handle()
	if time.Since(started) >= time.Duration(c.interval.Load())/4 {
		c.wasBusy.Store(true)
	}
	c.busy.Store(false)
	return ok
}

// close starts ending the connection with code and reason (once); the
// reader then returns.
func (c *conn) close(code websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() {
		go func() {
			_ = c.ws.Close(code, reason)
			close(c.closed)
		}()
	})
}

// finish ends the connection for good: it lets a close handshake under way
// (or a resumable one it starts) write its frame, waiting at most two
// seconds for the other side.
func (c *conn) finish() {
	c.close(closeStop, "herald reconnecting")
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-c.closed:
	case <-t.C:
	}
	_ = c.ws.CloseNow()
}
