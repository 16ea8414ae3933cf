// Package embedded is the NATS server herald dev runs in its own process,
// and tests beside them. Only herald dev and tests import it: the service
// binaries link no nats-server package (services/cmd/deps_test.go).
package embedded

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/heraldhq/herald/pkg/bus"
)

// Options configure the embedded NATS server of `herald dev` and tests.
type Options struct {
	Host     string // default 127.0.0.1
	Port     int    // -1 picks a free port
	StoreDir string // JetStream file store
	// SyncAlways fsyncs every write. Off, the server fsyncs on its interval
	// (2 min): a process crash loses nothing (the OS has the data); only a
	// power loss of this one machine could. See docs/decisions.md.
	SyncAlways bool
	// FilesMaxBytes is the topology's herald_files bound, where it is not
	// the default: the store grows by what it adds.
	FilesMaxBytes int64
}

// MaxStore is the embedded server's JetStream store limit: what
// Herald's topology reserves (bus.StoreReserved) and 1 GiB of room.
const MaxStore = bus.StoreReserved + 1<<30

// RunServer starts an embedded NATS server with JetStream and waits until it
// accepts connections.
func RunServer(o Options) (*server.Server, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port > 0 {
		// A port another process holds makes the server never ready: say
		// so at once, rather than after the wait below.
		addr := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("embedded NATS cannot listen on %s: %w (another herald dev or nats-server holds it? set nats.listen to another port, or 127.0.0.1:0 for any free one)", addr, err)
		}
		ln.Close()
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "herald-embedded",
		Host:       o.Host,
		Port:       o.Port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		// Herald's streams and buckets reserve bus.StoreReserved; left unset,
		// the store would be 75% of the disk's free space, and herald dev
		// on a disk with less than 9 GiB free could not make them. A disk
		// that really fills is answered as any full store is.
		JetStreamMaxStore: MaxStore + max(o.FilesMaxBytes-bus.FilesMaxBytes, 0),
		SyncAlways:        o.SyncAlways,
		NoSigs:            true,
		NoLog:             true,
		MaxPayload:        4 << 20,
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
