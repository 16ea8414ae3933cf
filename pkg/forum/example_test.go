package forum_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/forum"
)

// A messenger finds the topic of butler health in a forum group before it
// sends there; the first time, createForumTopic makes it, once across every
// replica, and it is kept for the next start.
func ExampleRegistry_Topic() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, bus.BucketChannelState)
	if err != nil {
		fmt.Println(err)
		return
	}
	host, _ := os.Hostname()
	topics := forum.NewRegistry(kv, host)
	thread, err := topics.Topic(ctx, "tg_main", "-1001234567890", "health", "health", func(ctx context.Context) (int, error) {
		return 42, nil // the message_thread_id of createForumTopic's ForumTopic
	})
	fmt.Println(thread, err)
}

// The switchboard asks whose topic a message was written in.
func ExampleOwner() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	butler, err := forum.Owner(ctx, bus.NewDirectKV(js, bus.BucketChannelState), "tg_main", "-1001234567890", 42)
	fmt.Println(butler, err)
}
