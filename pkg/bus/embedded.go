package bus

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerOptions configure the embedded NATS server of `herald dev` and tests.
type ServerOptions struct {
	Host     string // default 127.0.0.1
	Port     int    // -1 picks a free port
	StoreDir string // JetStream file store
	// SyncAlways fsyncs every write. Off, the server fsyncs on its interval
	// (2 min): a process crash loses nothing (the OS has the data); only a
	// power loss of this one machine could. See docs/decisions.md.
	SyncAlways bool
}

// RunServer starts an embedded NATS server with JetStream and waits until it
// accepts connections.
func RunServer(o ServerOptions) (*server.Server, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "herald-embedded",
		Host:       o.Host,
		Port:       o.Port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		SyncAlways: o.SyncAlways,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 4 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(15 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not become ready (store %s)", o.StoreDir)
	}
	return s, nil
}
