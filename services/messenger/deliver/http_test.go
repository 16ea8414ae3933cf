package deliver_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// TestTransportKeepsConnections: a messenger delivering 64 messages at once
// to one provider reuses its connections round after round instead of
// dialling new ones (net/http's default keeps two per host).
func TestTransportKeepsConnections(t *testing.T) {
	var dialled atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: deliver.NewTransport()}
	const rounds = 5
	for range rounds {
		var wg sync.WaitGroup
		for range deliver.ProviderConns {
			wg.Go(func() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			})
		}
		wg.Wait()
	}
	if n := dialled.Load(); n > deliver.ProviderConns+deliver.ProviderConns/2 {
		t.Fatalf("%d connections for %d rounds of %d calls; they should be kept and reused", n, rounds, deliver.ProviderConns)
	}
}
