package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/bustest"
	"github.com/heraldhq/herald/pkg/testkit"
)

// benchCluster is BENCH_CLUSTER (make bench CLUSTER=3): when above 1, the
// rows that use NATS (raw, route, mcp) run against a cluster of that many
// nats-server processes, every stream and bucket with that many replicas.
var benchCluster = envInt("BENCH_CLUSTER", 1)

// benchBus is the NATS a row runs on: one embedded server (the default), or
// a cluster of nats-server processes.
type benchBus interface {
	// Connect opens a connection, closed when the benchmark ends.
	Connect() (*nats.Conn, jetstream.JetStream)
	// URL is a client URL of the bus.
	URL() string
	// Replicas is how many copies of each stream the row asks for.
	Replicas() int
}

// oneServer is one server in the benchmark's process, Herald's topology made.
type oneServer struct{ *bustest.Server }

func (oneServer) Replicas() int { return 1 }

// newBenchBus starts the bus of one row: a fresh embedded server, or a fresh
// cluster with Herald's topology at its replicas.
func newBenchBus(b *testing.B) benchBus {
	if benchCluster <= 1 {
		return oneServer{bustest.RunServer(b)}
	}
	c := startCluster(b, benchCluster)
	nc, js := c.Connect()
	defer nc.Close()
	if err := bus.EnsureTopology(context.Background(), js, bus.Topology{Replicas: c.Replicas()}); err != nil {
		b.Fatalf("Herald's topology on the cluster: %v", err)
	}
	return c
}

// natsBin builds nats-server from its Go module once (never downloaded).
var natsBin = sync.OnceValues(func() (string, error) {
	return goBuildAs("github.com/nats-io/nats-server/v2", "nats-server")
})

// cluster is n nats-server processes on loopback, each with its own store,
// routed to each other: a real cluster, except that here its nodes share
// the machine's cores with everything else the benchmark runs.
type cluster struct {
	b    *testing.B
	urls []string
}

// startCluster starts an n-node cluster and waits until JetStream answers
// with every node in it (a meta leader elected, n peers).
func startCluster(b *testing.B, n int) *cluster {
	b.Helper()
	bin, err := natsBin()
	if err != nil {
		b.Fatal(err)
	}
	c := &cluster{b: b}
	var logs []*testkit.Buffer // each node's output, for when it does not come up
	routes := make([]string, n)
	clients := make([]string, n)
	for i := range n {
		routes[i] = "nats://" + testkit.FreeAddr(b)
		clients[i] = testkit.FreeAddr(b)
		c.urls = append(c.urls, "nats://"+clients[i])
	}
	for i := range n {
		dir := b.TempDir()
		conf := fmt.Sprintf(`server_name: bench-%d
listen: %q
jetstream { store_dir: %q }
cluster {
  name: herald-bench
  listen: %q
  routes: [%s]
}
`, i+1, clients[i], filepath.Join(dir, "store"), strings.TrimPrefix(routes[i], "nats://"), strings.Join(routes, ", "))
		file := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", file)
		cmd.Env = shellEnv()
		log := &testkit.Buffer{}
		logs = append(logs, log)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	if err := c.ready(30 * time.Second); err != nil {
		var out strings.Builder
		for i, l := range logs {
			lines := l.Lines()
			fmt.Fprintf(&out, "\nnode %d's last lines:\n%s", i+1, strings.Join(lines[max(0, len(lines)-10):], "\n"))
		}
		b.Fatalf("a %d-node NATS cluster did not come up: %v%s", n, err, out.String())
	}
	return c
}

// ready waits until JetStream has a meta leader and every node as a peer.
func (c *cluster) ready(within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		last = c.peers()
		if last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

// peers is nil once a JetStream request answers and the meta group has
// every node.
func (c *cluster) peers() error {
	nc, err := nats.Connect(c.urls[0], nats.Name("herald-bench"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	// A stream of n replicas can be placed only once every node is a peer.
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "BENCH_READY", Subjects: []string{"bench.ready"}, Replicas: len(c.urls), Storage: jetstream.MemoryStorage}); err != nil {
		return fmt.Errorf("a stream of %d replicas: %w", len(c.urls), err)
	}
	if err := js.DeleteStream(ctx, "BENCH_READY"); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	return nil
}

func (c *cluster) URL() string   { return c.urls[0] }
func (c *cluster) Replicas() int { return len(c.urls) }

func (c *cluster) Connect() (*nats.Conn, jetstream.JetStream) {
	c.b.Helper()
	nc, err := nats.Connect(strings.Join(c.urls, ","), nats.Name("herald-bench"))
	if err != nil {
		c.b.Fatalf("connect to the cluster: %v", err)
	}
	c.b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.b.Fatal(err)
	}
	return nc, js
}
