package web

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// TestFanoutNeverWaitsForAStream: a stream nobody reads fills its buffer and
// is dropped; every entry still reaches the stream that reads, in order, and
// handing them out never waits.
func TestFanoutNeverWaitsForAStream(t *testing.T) {
	f := newFanout(slog.New(slog.NewTextHandler(t.Output(), nil)))
	f.setLive(true)
	stalled, err := f.subscribe(t.Context(), "aaaaaaaaaaaaaaaaaaaaaaaa")
	if err != nil {
		t.Fatal(err)
	}
	reading, err := f.subscribe(t.Context(), "aaaaaaaaaaaaaaaaaaaaaaaa")
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.subscribe(t.Context(), "bbbbbbbbbbbbbbbbbbbbbbbb")
	if err != nil {
		t.Fatal(err)
	}
	const n = 3 * streamBuffer
	for i := uint64(1); i <= n; i++ {
		f.dispatch(stored{seq: i, subject: Subject("home", "aaaaaaaaaaaaaaaaaaaaaaaa"), entry: entry{ID: "x", Kind: kindVisitor, Text: "hi"}})
		if fr := <-reading.events; fr.seq != i {
			t.Fatalf("the reading stream got %d, want %d", fr.seq, i)
		}
	}
	select {
	case <-stalled.gone:
	default:
		t.Fatal("the stream nobody read was not dropped")
	}
	if len(stalled.events) != streamBuffer {
		t.Fatalf("the dropped stream holds %d events, want its buffer full (%d)", len(stalled.events), streamBuffer)
	}
	select {
	case fr := <-other.events:
		t.Fatalf("another visitor's stream got event %d", fr.seq)
	case <-other.gone:
		t.Fatal("another visitor's stream was dropped")
	default:
	}

	// A broadcast reaches every stream still listening.
	f.dispatch(stored{seq: n + 1, subject: Subject("home", Broadcast), entry: entry{ID: "y", Kind: kindButler, Text: "*all*"}})
	for _, l := range []*listener{reading, other} {
		if fr := <-l.events; fr.seq != n+1 || !strings.Contains(string(fr.data), `"html":"\u003cp\u003e\u003cem\u003eall`) {
			t.Fatalf("broadcast arrived as %d %s", fr.seq, fr.data)
		}
	}
	if got := f.count(); got != 2 {
		t.Fatalf("%d streams listen, want the 2 not dropped", got)
	}

	// When the feed stops, every stream ends so its page catches up anew.
	f.setLive(false)
	for _, l := range []*listener{reading, other} {
		select {
		case <-l.gone:
		default:
			t.Fatal("a stream outlived its feed")
		}
	}
	if got := f.count(); got != 0 {
		t.Fatalf("%d streams listen after the feed stopped", got)
	}
}

// TestEventStreamOutlivesServerTimeouts: the server's read and write
// timeouts bound requests, not an event stream, which stays open and live
// well past them.
func TestEventStreamOutlivesServerTimeouts(t *testing.T) {
	_, js := bustest.RunServer(t).Connect()
	s, err := New(config.Integration{ID: "home", Type: "web", Settings: &Config{Listen: "127.0.0.1:0"}}, deliver.Env{JS: js, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := s.(*Channel)
	const short = 100 * time.Millisecond
	c.timeouts = serverTimeouts{readHeader: short, read: short, write: short, idle: short}
	sk := &statusSink{running: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- c.Receive(ctx, sk) }()
	t.Cleanup(func() { cancel(); <-stopped })
	<-sk.running

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.URL()+"api/events", nil)
	req.AddCookie(&http.Cookie{Name: cookieName, Value: strings.Repeat("ab", 32)})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/events: %s", resp.Status)
	}
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || line != "retry: 2000\n" {
		t.Fatalf("stream starts with %q (%v)", line, err)
	}
	// Idle for several times the server's timeouts, as a page mostly is.
	time.Sleep(10 * short)
	if _, err := c.Deliver(t.Context(), deliver.Delivery{Intent: envelope.IntentSend, Butler: "health", Message: "still here"}); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after the server's timeouts: %v", err)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, "still here") {
			return
		}
	}
}

// statusSink is a deliver.Sink that only tells when the page is served.
type statusSink struct {
	running chan struct{}
}

func (s *statusSink) Ingress(context.Context, *envelope.Ingress) error   { return nil }
func (s *statusSink) Dropped(context.Context, *envelope.Ingress, string) {}
func (s *statusSink) Status(st deliver.Status) {
	if st.State == deliver.StateRunning {
		close(s.running)
	}
}

// count is how many streams listen.
func (f *fanout) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, set := range f.listeners {
		n += len(set)
	}
	return n
}
