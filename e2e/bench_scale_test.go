package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/telegram/telegramtest"
)

// benchActiveChats is how many conversations the inbound row spreads its
// messages over, each a person's private chat bound to its own butler, whose
// model is connected (an MCP session with its GET stream open); the other
// butlers sit idle, as most of a large fleet does.
const benchActiveChats = 100

// benchScaleRows measure herald dev with many butlers (issue 10, item 4):
//
//	(h) (i) herald dev with 100 and with 1,000 butlers on a fresh store:
//	        time from exec until the banner (every butler listening), and
//	        resident set once settled; (m) the 1,000 again on the same store,
//	        as a second `make run` starts.
//	(j)     resident set per idle butler: (RSS₁₀₀₀ − RSS₁₀₀) / 900.
//	(k) (l) 10,000 inbound messages a minute, published on HERALD_INGRESS as
//	        a receiver does, through the gates, bindings and threads to 100
//	        butlers of the 1,000: latency from when each was due to be
//	        published to when it is on the butler's inbox (k), and to when
//	        the channel notification reaches the model's MCP session (l).
func benchScaleRows(b *testing.B, t *table) {
	tg := telegramtest.NewServer(b)
	type fleet struct {
		n   int
		rss uint64
	}
	var sizes []fleet
	for i, n := range benchButlers {
		dev, rss := benchFleet(b, t, tg, n, i > 0)
		sizes = append(sizes, fleet{n, rss})
		if i < len(benchButlers)-1 {
			dev.stop()
			continue
		}
		if len(sizes) >= 2 {
			small, big := sizes[0], sizes[len(sizes)-1]
			per := (float64(big.rss) - float64(small.rss)) / float64(big.n-small.n)
			t.add(row{name: fmt.Sprintf("(j) RSS per idle butler: (RSS%d − RSS%d) / %d", big.n, small.n, big.n-small.n),
				figure: fmt.Sprintf("%.0f KB/butler", per/1024), goal: "< 150 KB", met: metIf(true, per < 150<<10)})
		}
		benchInbound(b, t, dev, n)
		dev.restart(t, 10*time.Second)
		_, peak := dev.memory()
		dev.waitStartProfile()
		t.add(row{name: fmt.Sprintf("(m) herald dev, %s butlers again: restart on the same store", thousands(float64(n))),
			figure: fmt.Sprintf("up in %.2fs (peak RSS %s)", dev.upIn.Seconds(), mb(peak)), goal: "up in < 2s", met: metIf(true, dev.upIn < 2*time.Second)})
		dev.stop()
	}
}

// benchFleet starts herald dev with n butlers and reports how long it took
// to come up and its resident set once settled.
func benchFleet(b *testing.B, t *table, tg *telegramtest.Server, n int, last bool) (*devProc, uint64) {
	var y strings.Builder
	fmt.Fprintf(&y, "nats: { listen: \"127.0.0.1:0\" }\nhttp_listen: \"127.0.0.1:0\"\ndefault_butler: %s\nbutlers:\n", butlerName(0))
	for i := range n {
		fmt.Fprintf(&y, "  - { name: %s, default_channel: log, mcp_http: \"127.0.0.1:0\" }\n", butlerName(i))
	}
	chats := activeChats(n)
	senders := make([]string, len(chats))
	for i, c := range chats {
		senders[i] = strconv.Quote(c.chat)
	}
	fmt.Fprintf(&y, `integrations:
  - id: tg
    type: telegram
    token_env: BENCH_TG_TOKEN
    api_url: %q
    default_chat: "12345"
    grants: all
    rate_limit_out: { disabled: true }
    inbound: { dm_policy: allowlist, allow_from: [%s] }
bindings:
`, tg.URL(), strings.Join(senders, ", "))
	for _, c := range chats {
		fmt.Fprintf(&y, "  - { integration: tg, chat: %q, butler: %s }\n", c.chat, c.butler)
	}
	dev := startDev(b, t, fmt.Sprintf("%dbutlers", n), y.String(), 10*time.Second, "BENCH_TG_TOKEN="+tg.Token())
	up := dev.upIn
	// Settled: the butlers' first work done, a garbage collection or two run.
	time.Sleep(3 * time.Second)
	rss, peak := dev.memory()
	dev.heapProfile(t, "idle")
	dev.waitStartProfile()
	goal, met := "", (*bool)(nil)
	if last {
		goal, met = "up in < 2s", metIf(true, up < 2*time.Second)
	}
	letter := "(h)"
	if last {
		letter = "(i)"
	}
	t.add(row{name: fmt.Sprintf("%s herald dev, %s butlers, fresh store: up in; RSS settled", letter, thousands(float64(n))),
		figure: fmt.Sprintf("up in %.2fs (peak RSS %s)", up.Seconds(), mb(peak)), rss: rss, goal: goal, met: met})
	return dev, rss
}

type chat struct{ chat, butler string }

// activeChats are the inbound row's conversations: chat i (a person's
// private chat, id = the person's) bound to a butler spread over the fleet.
func activeChats(n int) []chat {
	k := min(benchActiveChats, n)
	chats := make([]chat, k)
	for i := range k {
		chats[i] = chat{chat: strconv.Itoa(500000 + i), butler: butlerName(i * (n / k))}
	}
	return chats
}

func butlerName(i int) string { return fmt.Sprintf("b%04d", i) }

// benchInbound is rows (k) and (l): ingress published as the messenger's
// receiver does, at a fixed rate, timed to the butler's inbox and to the
// model's session.
func benchInbound(b *testing.B, t *table, dev *devProc, n int) {
	ctx := context.Background()
	chats := activeChats(n)
	rate := float64(benchInboundPerMin) / 60
	inbox, notified := newArrivals(), newArrivals()

	// The models: one session per active butler, its GET stream open.
	for _, c := range chats {
		mc := newMCPClient(dev.state.Butlers[c.butler], dev.token(c.butler))
		s, err := mc.open(ctx)
		if err != nil {
			b.Fatalf("MCP session with %s: %v\n%s", c.butler, err, dev.lastLines())
		}
		lctx, cancel := context.WithCancel(ctx)
		b.Cleanup(cancel)
		if err := s.listen(lctx, func(content string, at time.Time) { notified.note(content, at) }); err != nil {
			b.Fatal(err)
		}
	}
	// The inboxes, as JetStream stores them.
	sub, err := dev.nc.Subscribe(bus.InboxSubject(">"), func(m *nats.Msg) { inbox.note(string(m.Data), time.Now()) })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	// Warm up: a message to every active butler, until each has arrived.
	for i, c := range chats {
		if err := publishIngress(dev, c, marker("warm", i+1)); err != nil {
			b.Fatal(err)
		}
	}
	if got, _ := notified.wait("warm", len(chats), 30*time.Second); got < len(chats) {
		b.Fatalf("warm-up: %d of %d inbound messages reached their butler's session\n%s", got, len(chats), dev.lastLines())
	}

	wait := dev.profile(t, "inbound", benchInboundFor)
	var res *result
	w := countWrites(b, dev.js, func() {
		res = openLoop(rate, benchInboundFor, func(seq int) error {
			return publishIngress(dev, chats[seq%len(chats)], marker("in", seq))
		})
	})
	wait()
	res.writes = w
	_, peak := dev.memory()
	breakdown := w.perOp(max(res.ok, 1))
	for _, r := range []struct {
		name string
		a    *arrivals
	}{
		{fmt.Sprintf("(k) inbound %s/min → butler inbox (%d of %s butlers)", thousands(float64(benchInboundPerMin)), len(chats), thousands(float64(n))), inbox},
		{"(l) inbound → channel notification on the model's MCP session", notified},
	} {
		got, dup := r.a.wait("in", res.ok, 30*time.Second)
		lat := r.a.latencies("in", res.due)
		lr := &result{ok: res.ok, failed: res.failed, lat: lat}
		t.add(row{name: r.name, figure: fmt.Sprintf("%s msgs", thousands(float64(res.ok))), p50: lr.p(50), p99: lr.p(99), p999: lr.p(99.9),
			writes: float64(w.total()) / float64(max(res.ok, 1)), breakdown: breakdown, rss: peak,
			lost: lostDup(res, got, dup), goal: "p99 < 20ms", met: metIf(true, len(lat) > 0 && lr.p(99) < 20*time.Millisecond)})
		checkLostDup(b, r.name, res, got, dup)
		breakdown = ""
	}
}

// publishIngress publishes an inbound Telegram message from the person of c
// in their private chat, as the messenger's receiver does (ingress.v1 on
// herald.ingress.telegram, Nats-Msg-Id <integration>:<native id>).
func publishIngress(dev *devProc, c chat, text string) error {
	n := strconv.FormatInt(ingressSeq.Add(1), 10)
	meta := map[string]string{"chat_id": c.chat, "chat_type": "private", "message_id": n, "user_id": c.chat, "user": "person" + c.chat}
	in := envelope.NewIngress("tg", "telegram", "bot7000000001", c.chat, c.chat+":"+n, text, "7000000001:"+n, meta)
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	_, err = bus.Publish(context.Background(), dev.js, bus.IngressSubject("telegram"), data, "tg:"+in.NativeID, nil)
	return err
}

// ingressSeq numbers the Telegram messages people "send" (message_id and
// update id).
var ingressSeq atomic.Int64
