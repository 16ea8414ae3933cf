//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// The inbound way (issue 38): what people write to the bot reaching the
// model. Two reusable pieces drive it, here and in any other scenario that
// needs inbound load: people, a person writing to the bot through the
// Telegram fake's getUpdates at a steady rate, and model, the butler's MCP
// client as Claude Code connects it, which records every channel
// notification and opens a new session when the butler's process is gone.
// Their tally (inboundTally) says, per stretch of time, what reached the
// model once, twice or never, the longest time with nothing arriving, and
// the slowest message from its send to the model.

// person is who writes to the bot in the inbound scenarios: allow_from
// names them (withInbound), and their chat is the notes' chat.
var person = telegramtest.User{ID: 12345, FirstName: "Alice", Username: "alice"}

// people writes to the bot of token, as person, in person's own chat with
// it: each message is queued for the messenger's getUpdates on the fake,
// tagged so the model's copy can be matched back, and when it was sent is
// kept.
type people struct {
	tg       *telegramtest.Server
	token    string
	scenario string

	mu   sync.Mutex
	sent []time.Time // by index
}

func newPeople(tg *telegramtest.Server, token, scenario string) *people {
	return &people{tg: tg, token: token, scenario: scenario}
}

// tag is message i's text, unique across the run.
func (p *people) tag(i int) string { return fmt.Sprintf("inbound %s #%05d", p.scenario, i) }

var peopleTag = regexp.MustCompile(`inbound (\S+) #(\d{5})`)

// index is the message a text carries, or -1.
func (p *people) index(text string) int {
	m := peopleTag.FindStringSubmatch(text)
	if m == nil || m[1] != p.scenario {
		return -1
	}
	i, err := strconv.Atoi(m[2])
	if err != nil {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.sent) {
		return -1
	}
	return i
}

// send writes the next message and returns its index.
func (p *people) send() int {
	p.mu.Lock()
	i := len(p.sent)
	p.sent = append(p.sent, time.Now())
	p.mu.Unlock()
	from := person
	p.tg.SendUserMessage(p.token, telegramtest.Message{Chat: telegramtest.Chat{ID: person.ID}, From: &from, Text: p.tag(i)})
	return i
}

// run writes perSecond messages a second until stop is closed.
func (p *people) run(perSecond int, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			p.send()
		}
	}
}

// sentTimes is when each message was sent, by index.
func (p *people) sentTimes() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sent)
}

// model is the butler's MCP client as Claude Code connects it: streamable
// HTTP with its GET stream open. It records every channel notification
// (notifications/claude/channel) with when it came and on which session,
// pings the butler every 250 ms, and when the session is gone (the butler's
// process was killed: refused, or 404 from the restarted one) closes it and
// opens a new one, as a client reconnecting does.
type model struct {
	url, token string
	log        *slog.Logger

	mu       sync.Mutex
	c        *client.Client
	sessions int // opened so far; a heard's session is its number
	got      []heard
	reopened []time.Time // when a new session replaced a gone one
	stop     chan struct{}
	done     chan struct{}
}

// heard is one channel notification the model got.
type heard struct {
	at      time.Time
	session int
	content string
	meta    map[string]string
}

// connectModel opens the model's first session on the butler at url,
// within 15 s, and starts watching it; close ends it.
func connectModel(url, token string, logTo io.Writer) (*model, error) {
	m := &model{url: url, token: token, log: slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn})),
		stop: make(chan struct{}), done: make(chan struct{})}
	c, err := m.reopen(15 * time.Second)
	if err != nil {
		return nil, err
	}
	m.c = c
	go m.watch()
	return m, nil
}

// open is one new session with its GET stream open.
func (m *model) open(ctx context.Context) (*client.Client, error) {
	//lint:ignore SA1019 a client of the session-oriented revisions, as Claude Code is
	c, err := client.NewStreamableHttpClient(m.url, transport.WithContinuousListening(), transport.WithHTTPLogger(m.log),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + m.token}))
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.sessions++
	session := m.sessions
	m.mu.Unlock()
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != channelMethod {
			return
		}
		h := heard{at: time.Now(), session: session, content: str(n.Params.AdditionalFields["content"]), meta: map[string]string{}}
		if meta, ok := n.Params.AdditionalFields["meta"].(map[string]any); ok {
			for k, v := range meta {
				h.meta[k] = fmt.Sprint(v)
			}
		}
		m.mu.Lock()
		m.got = append(m.got, h)
		m.mu.Unlock()
	})
	if err := c.Start(context.Background()); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocolVersion
	init.Params.ClientInfo = mcp.Implementation{Name: "herald-chaos-model", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// reopen tries to open a session until one opens or within passes.
func (m *model) reopen(within time.Duration) (*client.Client, error) {
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := m.open(ctx)
		cancel()
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no MCP session within %s: %w", within, err)
		}
		select {
		case <-m.stop:
			return nil, errors.New("stopped")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watch pings the session every 250 ms and replaces it when it is gone.
// A ping that only times out three times in a row counts as gone too: a
// live session is never closed for a slow moment, which would cut its
// stream under a notification.
func (m *model) watch() {
	defer close(m.done)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	slow := 0
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		m.mu.Lock()
		c := m.c
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.Ping(ctx)
		cancel()
		if err == nil {
			slow = 0
			continue
		}
		if errors.Is(err, context.DeadlineExceeded) {
			if slow++; slow < 3 {
				continue
			}
		}
		slow = 0
		_ = c.Close()
		nc, err := m.reopen(time.Minute)
		if err != nil {
			m.log.Warn("the model has no session", "err", err)
			return
		}
		m.mu.Lock()
		m.c = nc
		m.reopened = append(m.reopened, time.Now())
		m.mu.Unlock()
	}
}

// client is the current session.
func (m *model) client() *client.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c
}

// heardSoFar is a copy of every channel notification so far, in order.
func (m *model) heardSoFar() []heard {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

// reopenedAt is when new sessions replaced gone ones.
func (m *model) reopenedAt() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reopened)
}

// close stops watching and ends the session.
func (m *model) close() {
	select {
	case <-m.stop:
		return
	default:
	}
	close(m.stop)
	<-m.done
	if c := m.client(); c != nil {
		_ = c.Close()
	}
}

// stretch is a span of the inbound load: the messages sent in [from, to),
// and the fault that struck at at (zero for none).
type stretch struct {
	name, fault string
	from, to    time.Time
	at          time.Time
}

// inboundTally is what became of the messages of each stretch: copies at
// the model (once, doubled, never), the slowest from send to the model,
// and, for a stretch with a fault, the longest time with nothing arriving
// from the fault until the stretch's end (its recovery). doubled describes
// each message heard more than once.
type inboundTally struct {
	sent, once, doubles, lost int
	slowest, recovery         time.Duration
	doubled, missing          []string
}

// tallyInbound counts the messages of people p sent in s, against what the
// model heard (hs), up to end.
func tallyInbound(p *people, hs []heard, s stretch, end time.Time) inboundTally {
	sent := p.sentTimes()
	copies := make([][]heard, len(sent))
	var arrivals []time.Time // first copies of every message, any stretch
	for _, h := range hs {
		if i := p.index(h.content); i >= 0 {
			if len(copies[i]) == 0 {
				arrivals = append(arrivals, h.at)
			}
			copies[i] = append(copies[i], h)
		}
	}
	slices.SortFunc(arrivals, time.Time.Compare)
	var t inboundTally
	for i, at := range sent {
		if at.Before(s.from) || !at.Before(s.to) {
			continue
		}
		t.sent++
		switch n := len(copies[i]); {
		case n == 0:
			t.lost++
			t.missing = append(t.missing, fmt.Sprintf("#%05d sent %s", i, at.Format("15:04:05.000")))
			continue
		case n == 1:
			t.once++
		default:
			t.doubles += n - 1
			var d string
			for _, h := range copies[i] {
				d += fmt.Sprintf("; %s on session %d, request_id %s", h.at.Format("15:04:05.000"), h.session, h.meta["request_id"])
			}
			t.doubled = append(t.doubled, fmt.Sprintf("#%05d sent %s%s", i, at.Format("15:04:05.000"), d))
		}
		t.slowest = max(t.slowest, copies[i][0].at.Sub(at))
	}
	if !s.at.IsZero() {
		last := s.at
		for _, a := range arrivals {
			if a.Before(s.at) {
				continue
			}
			if a.After(end) {
				break
			}
			t.recovery, last = max(t.recovery, a.Sub(last)), a
		}
		t.recovery = max(t.recovery, end.Sub(last))
	}
	return t
}

// inboundRate is how many messages a second people write in the inbound
// scenarios: the soak's rate (issue 38).
const inboundRate = 5

// inboundKill is one fault of the inbound scenario: the process killed,
// the subject whose next message kills it (empty: kill at once), and how
// long it stays down.
type inboundKill struct {
	target string // a service, or "nats" for HERALD_INBOX's leader
	on     string
	down   time.Duration
}

// inboundKills kill each process of the inbound way once, in turn, each in
// its own stretch of the load, at the moment that hurts most: the
// switchboard as it takes a message from HERALD_INGRESS, the messenger as it
// has stored one there and not yet confirmed its offset to Telegram, the
// butler as it takes one from its inbox (the model then opens a new
// session), and the NATS node that leads HERALD_INBOX (a 3-node cluster).
var inboundKills = []inboundKill{
	{"switchboard", bus.IngressSubject(">"), time.Second},
	{"messenger", bus.IngressSubject(">"), time.Second},
	{"butler", bus.InboxSubject(butlerName), time.Second},
	{"nats", "", 3 * time.Second},
}

// inboundEach is how long each stretch of the inbound scenario lasts: more
// than the slowest recovery a kill may need, so each stretch's figures are
// its own kill's.
const inboundEach = 12 * time.Second

// driveInbound is the inbound-kills scenario: a person writes to the bot 5
// times a second for the whole run while each process is SIGKILLed and
// restarted in turn; every message must reach the model exactly once.
// Each stretch prints its recovery (the longest time with nothing arriving
// after its kill) and its slowest message (send → model).
func driveInbound(f *fleet) {
	f.withInbound(false)
	f.startServices()
	f.noteAckWaits()
	m := f.connectModel()
	f.warmUp(m)
	p := newPeople(f.tg, f.tg.Token(), f.sc.name)

	stop := make(chan struct{})
	sending := make(chan struct{})
	go func() { defer close(sending); p.run(inboundRate, stop) }()
	start := time.Now()
	stretches := []stretch{{name: f.sc.name + " (no fault)", fault: fmt.Sprintf("%d messages/s, no fault", inboundRate), from: start}}
	time.Sleep(inboundEach / 2)
	for _, k := range inboundKills {
		s, err := f.killInbound(k)
		if err != nil {
			f.res.violate("the fault was not injected as designed: %v", err)
			break
		}
		// A message sent just before the kill was in flight at it.
		s.from = s.at.Add(-time.Second)
		stretches[len(stretches)-1].to = s.from
		stretches = append(stretches, s)
		time.Sleep(time.Until(s.at.Add(inboundEach)))
	}
	close(stop)
	<-sending
	end := time.Now()
	stretches[len(stretches)-1].to = end
	f.note("sent %d messages in %s", len(p.sentTimes()), secs(end.Sub(start)))

	// Settle: every message heard, or nothing new for 20 s, or 45 s.
	settled := time.Now()
	for last, lastAt := -1, time.Now(); time.Since(settled) < 45*time.Second; time.Sleep(250 * time.Millisecond) {
		hs := m.heardSoFar()
		if len(hs) != last {
			last, lastAt = len(hs), time.Now()
		}
		if t := tallyInbound(p, hs, stretch{from: start, to: end}, end); t.lost == 0 && time.Since(lastAt) > 2*time.Second || time.Since(lastAt) > 20*time.Second {
			break
		}
	}
	f.note("settled %s after the load; the model opened %d new sessions (at %s)", secs(time.Since(settled)), len(m.reopenedAt()), times(m.reopenedAt()))

	hs := m.heardSoFar()
	for i, s := range stretches {
		to := end
		if i+1 < len(stretches) {
			to = stretches[i+1].at
		}
		t := tallyInbound(p, hs, s, to)
		row := &wayRow{scenario: s.name, fault: s.fault, sent: t.sent, once: t.once, doubles: t.doubles, lost: t.lost, slowest: t.slowest, recovery: t.recovery, struck: !s.at.IsZero()}
		f.res.ways = append(f.res.ways, row)
		f.note("%s: sent %d, at the model once %d, doubles %d, lost %d; slowest %s%s", s.name, t.sent, t.once, t.doubles, t.lost, secs(t.slowest), row.recoveryNote())
		if t.lost > 0 {
			row.violate(f, "%d messages never reached the model (want 0): %v", t.lost, examples(t.missing, 5))
		}
		if t.doubles > 0 {
			row.violate(f, "%d messages reached the model twice (want 0; the butler marks no redelivery, so the model cannot tell): %v", t.doubles, examples(t.doubled, 5))
		}
	}
	f.noteWays()
}

// warmUp waits until a message reaches the model: on a cluster, the
// streams herald setup moved to 3 replicas elect their leaders some seconds
// after it, and the figures are of the kills, not of that.
func (f *fleet) warmUp(m *model) {
	p := newPeople(f.tg, f.tg.Token(), f.sc.name+"-warmup")
	start := time.Now()
	p.send()
	for time.Since(start) < 60*time.Second {
		for _, h := range m.heardSoFar() {
			if p.index(h.content) >= 0 {
				f.note("the inbound way works: a first message reached the model %s after it was sent", secs(h.at.Sub(start)))
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.fatalf("no message reached the model within 60 s of the fleet's start")
}

// killInbound kills one process of the inbound way and restarts it after
// k.down; the stretch it returns is the kill's.
func (f *fleet) killInbound(k inboundKill) (stretch, error) {
	p, name := f.svc[k.target], k.target
	how := "at once"
	if k.target == "nats" {
		leaders, err := f.leaders(bus.StreamIngress, bus.StreamInbox)
		if err != nil {
			return stretch{}, err
		}
		for _, n := range f.nodes {
			if n.serverName == leaders[bus.StreamInbox] {
				p, name = n.proc, n.name
			}
		}
		if p == nil {
			return stretch{}, fmt.Errorf("%s's leader %q is not a server of this cluster", bus.StreamInbox, leaders[bus.StreamInbox])
		}
		f.note("leaders: %s %s, %s %s; killing %s", bus.StreamIngress, leaders[bus.StreamIngress], bus.StreamInbox, leaders[bus.StreamInbox], name)
	}
	if p == nil {
		return stretch{}, fmt.Errorf("no process %q", k.target)
	}
	s := stretch{name: f.sc.name + " (" + k.target + ")"}
	if k.on == "" {
		if err := p.kill9(); err != nil {
			return stretch{}, err
		}
		s.at = time.Now()
	} else {
		trigger, err := f.armKill(p, k.on, nil)
		if err != nil {
			return stretch{}, err
		}
		at, seen, err := trigger.wait(5 * time.Second)
		if err != nil {
			return stretch{}, err
		}
		s.at, how = at, "the moment a message was on "+k.on
		if !seen {
			how = "after 5 s with no message on " + k.on
		}
	}
	f.note("kill -9 %s at %s, %s", name, s.at.Format("15:04:05.000"), how)
	s.fault = fmt.Sprintf("%s kill -9 as it takes a message, restarted after %s", name, secs(k.down))
	switch k.target {
	case "messenger":
		s.fault = fmt.Sprintf("messenger kill -9 once it stored a message, before it confirmed the update; restarted after %s", secs(k.down))
	case "nats":
		s.fault = fmt.Sprintf("HERALD_INBOX's leader (%s) kill -9, back after %s", name, secs(k.down))
	}
	time.Sleep(k.down)
	var err error
	if k.target == "nats" {
		err = p.start(20 * time.Second)
	} else {
		err = f.restart(p)
	}
	if err != nil {
		return s, err
	}
	f.note("%s restarted %s after the kill", name, secs(time.Since(s.at)))
	return s, nil
}

// times lists instants as clock times.
func times(ts []time.Time) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Format("15:04:05.000"))
	}
	if len(out) == 0 {
		return "none"
	}
	return fmt.Sprint(out)
}
