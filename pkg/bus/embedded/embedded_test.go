package embedded_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/embedded"
)

// TestEmbeddedPortTaken: an embedded NATS whose port another process holds
// fails at once, naming the address and what to do.
func TestEmbeddedPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	start := time.Now()
	_, err = embedded.RunServer(embedded.Options{Port: port, StoreDir: t.TempDir()})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:"+strconv.Itoa(port)) || !strings.Contains(err.Error(), "nats.listen") {
		t.Fatalf("RunServer on a taken port: %v, want an error naming the address and nats.listen", err)
	}
	t.Logf("refused in %s", took)
}
