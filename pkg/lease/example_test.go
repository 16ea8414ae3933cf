package lease_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/lease"
)

// Every replica runs the same code; one of them polls, the others stand by
// and take over within the TTL if it dies (at once if it stops cleanly).
func ExampleLease_Run() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Println(err)
		return
	}
	kv, err := js.KeyValue(ctx, bus.BucketLeases)
	if err != nil {
		fmt.Println(err)
		return
	}
	host, _ := os.Hostname()
	l := &lease.Lease{
		KV:        kv,
		Key:       "telegram.123456",
		Holder:    host,
		TTL:       10 * time.Second,
		OnStandby: func(holder string) { fmt.Println("standing by:", holder, "polls") },
	}
	err = l.Run(ctx, func(ctx context.Context) error {
		// Poll until ctx ends: it ends when this replica stops or loses the
		// lease.
		<-ctx.Done()
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
}
