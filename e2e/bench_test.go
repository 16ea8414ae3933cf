package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/ledger"
	"github.com/heraldhq/herald/pkg/route"
	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/switchboard"
)

const (
	benchMessages      = 5000
	benchWindowDefault = 64 // requests in flight at once, for both runs
)

// benchWindow can be changed with BENCH_WINDOW=N.
var benchWindow = func() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_WINDOW")); err == nil && n > 0 {
		return n
	}
	return benchWindowDefault
}()

// BenchmarkPipeline measures, in one process and one run, (a) the raw
// baseline: 1 KB messages through two JetStream work-queue hops whose
// consumers only ack and answer, and (b) the notify pipeline: route.v1 from
// publish to the delivered answer, through switchboard and messenger, with a
// provider that answers at once. It prints throughput and p50/p99 latency of
// both and the ratio b/a.
func BenchmarkPipeline(b *testing.B) {
	payload := strings.Repeat("x", 1024)
	for range b.N {
		raw := benchRaw(b, payload)
		pipe := benchPipeline(b, payload)
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(w, "\n%d messages of 1 KB, %d in flight\t msgs/s\t p50\t p99\t\n", benchMessages, benchWindow)
		fmt.Fprintf(w, "(a) raw: 2 JetStream work-queue hops\t %.0f\t %s\t %s\t\n", raw.rate(), raw.p(50), raw.p(99))
		fmt.Fprintf(w, "(b) notify pipeline\t %.0f\t %s\t %s\t\n", pipe.rate(), pipe.p(50), pipe.p(99))
		fmt.Fprintf(w, "ratio b/a\t %.2f\t %.2f\t %.2f\t\n", pipe.rate()/raw.rate(), ratio(pipe.p(50), raw.p(50)), ratio(pipe.p(99), raw.p(99)))
		_ = w.Flush()
		b.ReportMetric(raw.rate(), "raw_msgs/s")
		b.ReportMetric(pipe.rate(), "notify_msgs/s")
		b.ReportMetric(float64(pipe.p(50).Microseconds()), "notify_p50_µs")
		b.ReportMetric(float64(pipe.p(99).Microseconds()), "notify_p99_µs")
	}
}

type result struct {
	elapsed time.Duration
	lat     []time.Duration
}

func (r result) rate() float64 { return float64(len(r.lat)) / r.elapsed.Seconds() }

func (r result) p(q int) time.Duration {
	s := slices.Clone(r.lat)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*q/100)].Round(time.Microsecond)
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// drive runs n requests, window at a time, and times each.
func drive(b *testing.B, n, window int, do func(i int) error) result {
	b.Helper()
	lat := make([]time.Duration, n)
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, window)
	start := time.Now()
	for range window {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				if err := do(i); err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return result{elapsed: elapsed, lat: lat}
}

func benchRaw(b *testing.B, payload string) result {
	srv := bustest.RunServer(b)
	nc, js := srv.Connect()
	ctx := context.Background()
	for _, hop := range []string{"A", "B"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_" + hop, Subjects: []string{"bench." + hop + ".>"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage}); err != nil {
			b.Fatal(err)
		}
	}
	consume := func(stream string, handle func(m jetstream.Msg)) {
		c, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: benchWindow * 4})
		if err != nil {
			b.Fatal(err)
		}
		cc, err := c.Consume(handle)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cc.Stop)
	}
	// Hop 1 acks and forwards; hop 2 acks and answers.
	// Hop 1 forwards asynchronously and acks once the forward is stored, so
	// the baseline is not held to one publish round trip at a time.
	consume("BENCH_A", func(m jetstream.Msg) {
		h := nats.Header{"Reply": m.Headers()["Reply"]}
		f, err := js.PublishMsgAsync(&nats.Msg{Subject: "bench.B.x", Data: m.Data(), Header: h})
		if err != nil {
			return
		}
		go func() {
			select {
			case <-f.Ok():
				_ = m.Ack()
			case <-f.Err():
			}
		}()
	})
	consume("BENCH_B", func(m jetstream.Msg) {
		_ = m.Ack()
		_ = nc.Publish(m.Headers().Get("Reply"), []byte("ok"))
	})
	return drive(b, benchMessages, benchWindow, func(i int) error {
		reply := nats.NewInbox()
		sub, err := nc.SubscribeSync(reply)
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "bench.A.x", Data: []byte(payload), Header: nats.Header{"Reply": {reply}, nats.MsgIdHdr: {fmt.Sprint(i)}}}); err != nil {
			return err
		}
		_, err = sub.NextMsg(30 * time.Second)
		return err
	})
}

// instant is a provider that accepts every message at once.
type instant struct{}

func (instant) Deliver(_ context.Context, d deliver.Delivery) (deliver.Receipt, error) {
	return deliver.Receipt{MessageIDs: []string{"1"}}, nil
}

func benchPipeline(b *testing.B, payload string) result {
	srv := bustest.RunServer(b)
	nc, js := srv.Connect()
	cfg, err := config.Parse([]byte("butlers: [{name: health, default_channel: log}]"))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := switchboard.Run(ctx, switchboard.Options{Config: cfg, NC: nc, Log: quiet()}); err != nil {
			b.Error(err)
		}
	}()
	go func() {
		defer wg.Done()
		err := messenger.Run(ctx, messenger.Options{Config: cfg, NC: nc, Log: quiet(), Channels: map[string]deliver.Factory{
			"log": func(config.Integration, deliver.Env) (deliver.Sender, error) { return instant{}, nil },
		}})
		if err != nil {
			b.Error(err)
		}
	}()
	led, err := ledger.Open(ctx, js)
	if err != nil {
		b.Fatal(err)
	}
	rc := &route.Client{NC: nc, JS: js, Ledger: led, Timeout: 30 * time.Second}
	// Warm up: both services consuming.
	for {
		r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "warm up"}, nil))
		if _, err := rc.Send(ctx, r); err == nil {
			break
		} else if !errors.Is(err, route.ErrQueued) {
			b.Fatal(err)
		}
	}
	return drive(b, benchMessages, benchWindow, func(i int) error {
		r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: payload}, nil))
		resp, err := rc.Send(ctx, r)
		if err != nil {
			return err
		}
		if resp.Status != envelope.StatusOK {
			return fmt.Errorf("notify %d: %+v", i, resp.Error)
		}
		return nil
	})
}
