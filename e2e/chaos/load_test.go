//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

const (
	// sessions is how many MCP clients send at once, as a fleet of models would.
	sessions        = 16
	protocolVersion = "2025-06-18"
	channelMethod   = "notifications/claude/channel"
)

// Kinds of tool answers.
const (
	answerSent   = "sent"
	answerQueued = "queued"
	answerError  = "error"
	// answerUnconfirmed: the bus did not confirm storing the route within
	// notify_timeout (isError, class timeout, "Notification not
	// confirmed"): it may still be delivered, at most once.
	answerUnconfirmed = "unconfirmed"
	// answerNone: the MCP call itself failed; Herald answered nothing.
	answerNone = "none"
	// answerOther: an answer the harness cannot read.
	answerOther = "other"
)

// answer is what the notify tool said about one notify.
type answer struct {
	kind       string
	class      string // error.class of an error answer
	uncertain  bool   // delivery.outcome == "uncertain"
	requestID  string
	deliveryID string
	text       string
	// issuedAt and answeredAt are when the call was made and answered; for
	// a retry, issuedAt is the first call's.
	issuedAt, answeredAt time.Time
	// firstTry is the call that failed at the MCP level when this answer
	// is its retry (same message, same idempotency_key, a new session),
	// made at retriedAt.
	firstTry  *answer
	retriedAt time.Time
}

// report is a channel notification telling the butler the late outcome of a
// notify: meta.kind delivery_failed or delivery_uncertain.
type report struct {
	kind      string
	requestID string
	channel   string
	reason    string
	content   string
}

// reportKinds are the notifications that tell a butler a notify's fate.
var reportKinds = map[string]bool{"delivery_failed": true, "delivery_uncertain": true}

// load is the traffic of one scenario: distinct notifies, each tagged so the
// fake's messages can be matched back, sent through the butler's real MCP
// tool by concurrent sessions, and every outcome notification they receive.
type load struct {
	scenario string
	// url and token are the butler's MCP endpoint and bearer token: a
	// session found dead is replaced by a new one there.
	url, token string
	// clientLog takes the MCP clients' warnings (a GET stream cut by a
	// butler restart, say): evidence, not output.
	clientLog *slog.Logger
	// keys: every notify carries an idempotency_key; retry: a call that
	// failed at the MCP level is made once more, on a new session.
	keys, retry bool
	answers     []answer
	issued      atomic.Int64 // notifies handed to a session
	done        atomic.Int64 // notifies answered (or failed at the MCP level)

	mu         sync.Mutex
	acceptedAt []time.Time // by index, when the fake last took it
	reports    []report
	seen       map[string]bool         // kind + request_id, as every session gets a copy
	changed    atomic.Int64            // bumped by every new report
	clients    map[*client.Client]bool // sessions open, until drop or close
	// inbound, if set, gets every other channel notification a session
	// receives (what people sent, pushed to the model): the soak counts them.
	inbound func(c *client.Client, content string, meta map[string]any)
}

func newLoad(sc *scenario, url, token string, clientLog io.Writer) *load {
	return &load{
		scenario:   sc.name,
		url:        url,
		token:      token,
		clientLog:  slog.New(slog.NewTextHandler(clientLog, &slog.HandlerOptions{Level: slog.LevelWarn})),
		keys:       sc.retry,
		retry:      sc.retry,
		answers:    make([]answer, sc.notifies),
		acceptedAt: make([]time.Time, sc.notifies),
		seen:       map[string]bool{},
		clients:    map[*client.Client]bool{},
	}
}

// tag is notify i's message, unique across the run.
func (l *load) tag(i int) string { return fmt.Sprintf("chaos %s #%04d", l.scenario, i) }

// key is notify i's idempotency_key.
func (l *load) key(i int) string { return fmt.Sprintf("chaos-%s-%04d", l.scenario, i) }

// args are notify i's tool arguments, the same on a retry.
func (l *load) args(i int) map[string]any {
	args := map[string]any{"message": l.tag(i)}
	if l.keys {
		args["idempotency_key"] = l.key(i)
	}
	return args
}

var tagPattern = regexp.MustCompile(`chaos (\S+) #(\d{4,})`)

// index finds the notify a text carries, or -1.
func (l *load) index(text string) int {
	for _, m := range tagPattern.FindAllStringSubmatch(text, -1) {
		if m[1] != l.scenario {
			continue
		}
		if i, err := strconv.Atoi(m[2]); err == nil && i < len(l.answers) {
			return i
		}
	}
	return -1
}

// connect opens one MCP session with the GET stream open, as Claude Code
// does, recording outcome notifications; close ends every session opened.
func (l *load) connect(ctx context.Context) (*client.Client, error) {
	c, err := client.NewStreamableHttpClient(l.url, transport.WithContinuousListening(), transport.WithHTTPLogger(l.clientLog),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + l.token}))
	if err != nil {
		return nil, err
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != channelMethod {
			return
		}
		meta, _ := n.Params.AdditionalFields["meta"].(map[string]any)
		kind, _ := meta["kind"].(string)
		if !reportKinds[kind] {
			if l.inbound != nil {
				l.inbound(c, str(n.Params.AdditionalFields["content"]), meta)
			}
			return
		}
		r := report{kind: kind, requestID: str(meta["request_id"]), channel: str(meta["channel"]), reason: str(meta["reason"]), content: str(n.Params.AdditionalFields["content"])}
		l.mu.Lock()
		defer l.mu.Unlock()
		key := r.kind + " " + r.requestID + " " + r.content
		if !l.seen[key] {
			l.seen[key] = true
			l.reports = append(l.reports, r)
			l.changed.Add(1)
		}
	})
	// The GET stream lives as long as the session, not as long as ctx: it
	// ends with Close.
	if err := c.Start(context.Background()); err != nil {
		return nil, fmt.Errorf("starting MCP session: %w", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	init.Params.ClientInfo = mcp.Implementation{Name: "herald-chaos", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if res.ProtocolVersion != protocolVersion {
		_ = c.Close()
		return nil, fmt.Errorf("negotiated protocol %s, want %s", res.ProtocolVersion, protocolVersion)
	}
	l.mu.Lock()
	l.clients[c] = true
	l.mu.Unlock()
	return c, nil
}

// sessions opens n MCP sessions of the load, failing the run without one.
func (l *load) sessions(f *fleet, n int) []*client.Client {
	var clients []*client.Client
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		c, err := l.connect(ctx)
		cancel()
		if err != nil {
			f.fatalf("MCP session: %v", err)
		}
		clients = append(clients, c)
	}
	return clients
}

// drop closes a session the load no longer uses.
func (l *load) drop(c *client.Client) {
	l.mu.Lock()
	open := l.clients[c]
	delete(l.clients, c)
	l.mu.Unlock()
	if open {
		_ = c.Close()
	}
}

// close ends every session still open.
func (l *load) close() {
	l.mu.Lock()
	open := slices.Collect(maps.Keys(l.clients))
	clear(l.clients)
	l.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
}

// reconnectFor bounds how long a worker tries to open a new session after
// its call failed at the MCP level (a butler restart takes seconds).
const reconnectFor = 60 * time.Second

// reconnect replaces a session whose call failed at the MCP level: after a
// butler restart the old session is gone with the process, and a session
// that merely timed out costs nothing to replace. It tries until the
// butler serves again or reconnectFor passes.
func (l *load) reconnect(old *client.Client) (*client.Client, error) {
	l.drop(old)
	deadline := time.Now().Add(reconnectFor)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := l.connect(ctx)
		cancel()
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no new MCP session within %s: %w", reconnectFor, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// run sends every notify through the sessions, sessions at a time, until all
// are answered or stopAt passes (then the rest are not sent at all). A
// session whose call failed at the MCP level is replaced; a worker that
// cannot get a new one stops.
func (l *load) run(clients []*client.Client, stopAt time.Time) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			for c != nil {
				i := int(next.Add(1) - 1)
				if i >= len(l.answers) || time.Now().After(stopAt) {
					return
				}
				l.issued.Add(1)
				l.answers[i], c = l.send(c, i)
				l.done.Add(1)
			}
		})
	}
	wg.Wait()
}

// send is notify i through session c, and the session to use next: c, or
// a new one if the call failed at the MCP level (nil if none could be
// opened). With retry, such a call is made once more on the new session,
// with the same message and idempotency_key.
func (l *load) send(c *client.Client, i int) (answer, *client.Client) {
	at := time.Now()
	a := call(c, l.args(i))
	a.issuedAt, a.answeredAt = at, time.Now()
	if a.kind != answerNone {
		return a, c
	}
	c, err := l.reconnect(c)
	if err != nil {
		a.text += "; then " + err.Error()
		return a, nil
	}
	if !l.retry {
		return a, c
	}
	first := a
	retriedAt := time.Now()
	a = call(c, l.args(i))
	a.issuedAt, a.answeredAt = first.issuedAt, time.Now()
	a.firstTry, a.retriedAt = &first, retriedAt
	if a.kind == answerNone {
		// Not retried again; the next notify gets a new session.
		if c, err = l.reconnect(c); err != nil {
			a.text += "; then " + err.Error()
		}
	}
	return a, c
}

// accepted notes when the fake took the message of text (the last time, if
// it took it more than once).
func (l *load) accepted(text string) {
	i := l.index(text)
	if i < 0 {
		return
	}
	l.mu.Lock()
	l.acceptedAt[i] = time.Now()
	l.mu.Unlock()
}

// recovery is how long after at the last notify in flight at that moment
// (called, not yet answered) reached the provider (0 if none was in
// flight), and how many were in flight. Answers are no measure: a caller
// told "queued" has its answer before its message is out.
func (l *load) recovery(at time.Time) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var longest time.Duration
	n := 0
	for i, a := range l.answers {
		if a.issuedAt.IsZero() || !a.issuedAt.Before(at) || !a.answeredAt.After(at) {
			continue
		}
		n++
		if got := l.acceptedAt[i]; got.After(at) {
			longest = max(longest, got.Sub(at))
		}
	}
	return longest, n
}

// call is one notify through the tool. The butler answers within its
// notify_timeout; the bound here only keeps a hung call from hanging the run.
func call(c *client.Client, args map[string]any) answer {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout+25*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "notify"
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return answer{kind: answerNone, text: err.Error()}
	}
	return classify(res)
}

// classify reads a tool answer: its kind from the text, the rest from the
// structured content (notify_response.v1 for sent, route_response.v1 for
// queued, {status, error} for errors).
func classify(res *mcp.CallToolResult) answer {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	a := answer{text: strings.Join(parts, "\n")}
	var sc struct {
		RequestContext struct {
			RequestID string `json:"request_id"`
		} `json:"request_context"`
		Delivery *delivery `json:"delivery"`
		Result   *struct {
			NotifyResponse *struct {
				Delivery *delivery `json:"delivery"`
			} `json:"notify_response"`
		} `json:"result"`
		Error *struct {
			Class string `json:"class"`
		} `json:"error"`
	}
	if b, err := json.Marshal(res.StructuredContent); err == nil {
		_ = json.Unmarshal(b, &sc)
	}
	a.requestID = sc.RequestContext.RequestID
	d := sc.Delivery
	if d == nil && sc.Result != nil && sc.Result.NotifyResponse != nil {
		d = sc.Result.NotifyResponse.Delivery
	}
	if d != nil {
		a.deliveryID, a.uncertain = d.DeliveryID, d.Outcome == "uncertain"
	}
	if sc.Error != nil {
		a.class = sc.Error.Class
	}
	switch {
	case res.IsError && a.class == "timeout" && strings.HasPrefix(a.text, "Notification not confirmed"):
		a.kind = answerUnconfirmed
	case res.IsError:
		a.kind = answerError
	case strings.HasPrefix(a.text, "Notification sent"), strings.HasPrefix(a.text, "Notification may not have been delivered"):
		// The second is a sent answer whose outcome is uncertain.
		a.kind = answerSent
	case strings.HasPrefix(a.text, "Notification queued"):
		a.kind = answerQueued
	default:
		a.kind = answerOther
	}
	return a
}

type delivery struct {
	DeliveryID string `json:"delivery_id"`
	Outcome    string `json:"outcome"`
}

// reportsSoFar is a copy of the outcome notifications received.
func (l *load) reportsSoFar() []report {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]report(nil), l.reports...)
}

// acceptedTime is when the fake last took notify i's message (zero: never).
// acceptedTimes are the times the provider accepted each notify's message
// (its first copy), in order.
func (l *load) acceptedTimes() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for _, at := range l.acceptedAt {
		if !at.IsZero() {
			out = append(out, at)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

func (l *load) acceptedTime(i int) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acceptedAt[i]
}
