package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/ratelimit"
)

// Every messenger replica makes the same Limiter for a bot on the shared
// bucket; each send waits its turn, and a 429 pauses the whole bot on every
// replica.
func ExampleLimiter_Wait() {
	ctx := context.Background()
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
	kv, err := js.KeyValue(ctx, "herald_limits")
	if err != nil {
		fmt.Println(err)
		return
	}
	lim := ratelimit.New(kv, "telegram.123456", ratelimit.TelegramDefaults())

	const chat, group = "-1001234567890", true
	err = lim.Wait(ctx, chat, group)
	if errors.Is(err, ratelimit.ErrNotShared) {
		fmt.Println("sending on this replica's limits only:", err)
	} else if err != nil {
		fmt.Println(err)
		return
	}

	// send the message; if Telegram answers 429 with retry_after 5:
	retryAfter := 5 * time.Second
	if err := lim.Pause(ctx, "", time.Now().Add(retryAfter)); err != nil {
		fmt.Println(err)
	}
}
