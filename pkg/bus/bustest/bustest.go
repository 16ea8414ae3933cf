// Package bustest runs a real, embedded NATS server with JetStream for tests:
// a random port, a temp store, a ready check and cleanup, like httptest.
package bustest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/bus/embedded"
)

// Server is a running test server.
type Server struct {
	*server.Server
	dir string
	t   testing.TB
}

// RunServer starts a server with JetStream on a random port, stores in a temp
// dir, creates Herald's topology, and shuts down when the test ends.
func RunServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir(), t: t}
	s.start()
	t.Cleanup(s.stop)
	nc, js := s.Connect()
	defer nc.Close()
	if err := bus.EnsureTopology(context.Background(), js, bus.Topology{Replicas: 1}); err != nil {
		t.Fatalf("topology: %v", err)
	}
	return s
}

func (s *Server) start() {
	s.t.Helper()
	srv, err := embedded.RunServer(embedded.Options{Port: -1, StoreDir: s.dir})
	if err != nil {
		s.t.Fatal(err)
	}
	s.Server = srv
}

func (s *Server) stop() {
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
}

// URL is the client URL.
func (s *Server) URL() string { return s.Server.ClientURL() }

// Connect opens a connection closed at the end of the test.
func (s *Server) Connect() (*nats.Conn, jetstream.JetStream) {
	s.t.Helper()
	nc, err := nats.Connect(s.URL())
	if err != nil {
		s.t.Fatalf("connect: %v", err)
	}
	s.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	return nc, js
}

// Msgs is how many messages stream holds now.
func Msgs(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	return state(t, js, stream).Msgs
}

// Stored is how many messages stream ever stored (its last sequence
// number), taken or not.
func Stored(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	return state(t, js, stream).LastSeq
}

func state(t testing.TB, js jetstream.JetStream, stream string) jetstream.StreamState {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// Dropped reports whether the audit log holds a drop (kind dropped) for
// reason.
func Dropped(t testing.TB, js jetstream.JetStream, reason string) bool {
	t.Helper()
	s, err := js.Stream(context.Background(), bus.StreamAudit)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			return false
		}
		var rec struct{ Kind, Reason string }
		_ = json.Unmarshal(m.Data, &rec)
		if rec.Kind == "dropped" && rec.Reason == reason {
			return true
		}
	}
}

// Ping asks every NATS micro service reachable from nc for a ping
// ($SRV.PING, scatter-gather) and counts the answers by service name; it
// fails the test on an answer that is not a micro ping response.
func Ping(t testing.TB, nc *nats.Conn) map[string]int {
	t.Helper()
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$SRV.PING", inbox, nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for {
		m, err := sub.NextMsg(500 * time.Millisecond)
		if err != nil {
			return got
		}
		var p micro.Ping
		if err := json.Unmarshal(m.Data, &p); err != nil || p.Type != micro.PingResponseType {
			t.Fatalf("not a ping answer: %s (%v)", m.Data, err)
		}
		got[p.Name]++
	}
}
