package bus_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
)

// BenchmarkRetained measures the memory an embedded nats-server keeps for
// each notify after it is done, on Herald's own topology: the id JetStream
// remembers for its duplicate window (bus.DuplicateWindow) on each of
// HERALD_ROUTE and HERALD_DELIVER, and the per-key state of a ledger record in
// herald_deliveries, kept as long as the record (30 days). It reports heap
// bytes per id and per record, as the slope between n/2 and n of them, so
// fixed costs (block buffers) drop out. Run with
//
//	go test ./bus/ -run '^$' -bench Retained -benchtime 1x
//
// (docs/performance.md says what the figures mean for herald dev's memory).
func BenchmarkRetained(b *testing.B) {
	const n = 40_000
	msg := []byte(strings.Repeat("x", 600))
	key := func(i int) string {
		var s [8]byte
		binary.BigEndian.PutUint64(s[:], uint64(i))
		sum := sha256.Sum256(s[:])
		return hex.EncodeToString(sum[:]) // as an idempotency key is
	}
	measure := func(b *testing.B, write func(ctx context.Context, js jetstream.JetStream, from, to int)) float64 {
		srv := bustest.RunServer(b)
		_, js := srv.Connect()
		ctx := b.Context()
		write(ctx, js, 0, n/2)
		half := liveHeap()
		write(ctx, js, n/2, n)
		full := liveHeap()
		return float64(int64(full)-int64(half)) / float64(n/2)
	}
	b.Run("duplicate-window-id", func(b *testing.B) {
		for b.Loop() {
			per := measure(b, func(ctx context.Context, js jetstream.JetStream, from, to int) {
				publishAll(b, js, from, to, func(i int) *nats.Msg {
					m := nats.NewMsg(bus.RouteSubject("bench"))
					m.Data = msg
					m.Header.Set(nats.MsgIdHdr, key(i))
					return m
				})
				// The messages themselves leave the work queue when handled;
				// their ids stay for the duplicate window.
				s, err := js.Stream(ctx, bus.StreamRoute)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Purge(ctx); err != nil {
					b.Fatal(err)
				}
			})
			b.ReportMetric(per, "B/id")
		}
	})
	b.Run("ledger-record", func(b *testing.B) {
		for b.Loop() {
			per := measure(b, func(ctx context.Context, js jetstream.JetStream, from, to int) {
				publishAll(b, js, from, to, func(i int) *nats.Msg {
					m := nats.NewMsg("$KV." + bus.BucketDeliveries + ".bench." + key(i))
					m.Data = msg
					return m
				})
			})
			b.ReportMetric(per, "B/record")
		}
	})
}

// publishAll publishes the messages from to to, 256 at a time, and waits
// for JetStream to store them all.
func publishAll(b *testing.B, js jetstream.JetStream, from, to int, msg func(i int) *nats.Msg) {
	for i := from; i < to; i += 256 {
		var acks []jetstream.PubAckFuture
		for j := i; j < min(i+256, to); j++ {
			f, err := js.PublishMsgAsync(msg(j))
			if err != nil {
				b.Fatal(err)
			}
			acks = append(acks, f)
		}
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			case <-time.After(10 * time.Second):
				b.Fatal("no PubAck in 10s")
			}
		}
	}
}

// liveHeap is the heap in use after two collections.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
