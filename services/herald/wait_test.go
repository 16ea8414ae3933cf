package herald_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/bus/embedded"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/services/herald"
)

// TestServicesWaitForNATS: a service started before NATS says where it waits,
// and comes up once NATS and JetStream answer, instead of quitting.
func TestServicesWaitForNATS(t *testing.T) {
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	path := filepath.Join(t.TempDir(), "herald.yaml")
	writeFile(t, path, "nats: { url: "+url+", wait: 1m }\n")
	for _, service := range []string{"switchboard", "messenger"} {
		t.Run(service, func(t *testing.T) {
			var logs testkit.Buffer
			ctx, cancel := context.WithCancel(t.Context())
			exit := make(chan int, 1)
			go func() {
				exit <- herald.RunService(ctx, service, []string{"--config", path, "--http-listen", "127.0.0.1:0"}, herald.IO{Getenv: func(string) string { return "" }, Stdout: &logs, Stderr: &logs})
			}()
			waitLog(t, &logs, "waiting for NATS and JetStream")
			if !strings.Contains(logs.String(), url) {
				t.Fatalf("the wait does not name %s:\n%s", url, logs.String())
			}
			srv, err := embedded.RunServer(embedded.Options{Port: port, StoreDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown()
			waitLog(t, &logs, service+" running")
			cancel()
			if code := <-exit; code != 0 {
				t.Fatalf("exit %d:\n%s", code, logs.String())
			}
		})
	}
}

// TestServicesGiveUpNamingTheURL: if NATS never comes, the error names it.
func TestServicesGiveUpNamingTheURL(t *testing.T) {
	url := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	path := filepath.Join(t.TempDir(), "herald.yaml")
	writeFile(t, path, "nats: { url: "+url+", wait: 1s }\n")
	var logs testkit.Buffer
	code := herald.RunService(t.Context(), "switchboard", []string{"--config", path, "--http-listen", "127.0.0.1:0"}, herald.IO{Getenv: func(string) string { return "" }, Stdout: &logs, Stderr: &logs})
	if code != 1 || !strings.Contains(logs.String(), "NATS at "+url+" did not answer") {
		t.Fatalf("exit %d:\n%s", code, logs.String())
	}
}

func waitLog(t *testing.T, logs *testkit.Buffer, want string) {
	t.Helper()
	if !testkit.Poll(30*time.Second, testkit.Interval, func() bool { return strings.Contains(logs.String(), want) }) {
		t.Fatalf("no %q in the log:\n%s", want, logs.String())
	}
}

// freePort is a port nothing listens on.
func freePort(t *testing.T) int {
	_, port, _ := net.SplitHostPort(testkit.FreeAddr(t))
	n, _ := strconv.Atoi(port)
	return n
}
