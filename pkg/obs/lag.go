package obs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Consumer names a durable consumer of a stream.
type Consumer struct {
	Stream  string
	Durable string
}

func (c Consumer) String() string { return c.Stream + "/" + c.Durable }

// infoTimeout bounds one round of consumer info requests (a scrape, a
// status, a readiness check): NATS answers in microseconds, or is not there.
const infoTimeout = 2 * time.Second

// ConsumerState is one consumer's lag, as a service's status reports it.
type ConsumerState struct {
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	// Pending is what waits: not yet delivered plus delivered and not acked.
	Pending uint64 `json:"pending"`
	Error   string `json:"error,omitempty"`
}

// Lag asks NATS for each consumer's lag, all at once, within a short timeout.
func Lag(ctx context.Context, js jetstream.JetStream, cs ...Consumer) []ConsumerState {
	out := make([]ConsumerState, len(cs))
	// Requests made while disconnected wait in the reconnect buffer until
	// they time out: say at once that NATS is not there.
	if st := js.Conn().Status(); st != nats.CONNECTED {
		for i, c := range cs {
			out[i] = ConsumerState{Stream: c.Stream, Consumer: c.Durable, Error: fmt.Sprintf("consumer %s: NATS is %s", c, strings.ToLower(st.String()))}
		}
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			out[i] = ConsumerState{Stream: c.Stream, Consumer: c.Durable}
			info, err := consumerInfo(ctx, js, c)
			if err != nil {
				out[i].Error = err.Error()
				return
			}
			out[i].Pending = info.NumPending + uint64(info.NumAckPending)
		})
	}
	wg.Wait()
	return out
}

func consumerInfo(ctx context.Context, js jetstream.JetStream, c Consumer) (*jetstream.ConsumerInfo, error) {
	cons, err := js.Consumer(ctx, c.Stream, c.Durable)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", c, err)
	}
	return cons.CachedInfo(), nil
}

// ConsumerCheck is a readiness check that each consumer answers an info
// request: it exists and JetStream serves it.
func ConsumerCheck(js jetstream.JetStream, cs ...Consumer) Check {
	return func(ctx context.Context) error {
		for _, st := range Lag(ctx, js, cs...) {
			if st.Error != "" {
				return fmt.Errorf("%s", st.Error)
			}
		}
		return nil
	}
}

// WatchConsumers has each scrape report the consumers' lag as
// herald_consumer_pending{stream,consumer}, asked of NATS at scrape time (a
// consumer NATS does not answer for is left out of that scrape). The
// returned func stops watching them.
func (m *Metrics) WatchConsumers(js jetstream.JetStream, cs ...Consumer) (stop func()) {
	if m == nil {
		return func() {}
	}
	return m.lag.add(js, cs)
}

type lagSource struct {
	js jetstream.JetStream
	cs []Consumer
}

// lagCollector is herald_consumer_pending: one collector per registry (a
// descriptor may be registered once), fed by every service of the process.
type lagCollector struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	sources []*lagSource
}

func newLagCollector() *lagCollector {
	return &lagCollector{desc: prometheus.NewDesc("herald_consumer_pending",
		"Messages waiting for a durable consumer: not yet delivered plus delivered and not yet acked.",
		[]string{"stream", "consumer"}, nil)}
}

func (l *lagCollector) add(js jetstream.JetStream, cs []Consumer) func() {
	src := &lagSource{js: js, cs: slices.Clone(cs)}
	l.mu.Lock()
	l.sources = append(l.sources, src)
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		l.sources = slices.DeleteFunc(l.sources, func(s *lagSource) bool { return s == src })
		l.mu.Unlock()
	}
}

func (l *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc }

func (l *lagCollector) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	sources := slices.Clone(l.sources)
	l.mu.Unlock()
	// One deadline for the whole scrape, however many services watch.
	ctx, cancel := context.WithTimeout(context.Background(), infoTimeout)
	defer cancel()
	states := make([][]ConsumerState, len(sources))
	var wg sync.WaitGroup
	for i, src := range sources {
		wg.Go(func() { states[i] = Lag(ctx, src.js, src.cs...) })
	}
	wg.Wait()
	seen := map[Consumer]bool{}
	for _, sts := range states {
		for _, st := range sts {
			c := Consumer{st.Stream, st.Consumer}
			// Two services of one process may watch one consumer; a
			// series is reported once.
			if st.Error != "" || seen[c] {
				continue
			}
			seen[c] = true
			ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, float64(st.Pending), st.Stream, st.Consumer)
		}
	}
}
