package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/testkit"
	"github.com/heraldhq/herald/schemas"
	"github.com/heraldhq/herald/services/messenger/deliver"
	"github.com/heraldhq/herald/services/messenger/deliver/delivertest"
	"github.com/heraldhq/herald/services/messenger/webhook"
)

const secretEnv = "HERALD_TEST_WEBHOOK_SECRET"

// env is a deliver.Env whose secret_env holds secret; its log lines go to
// logs, if given, else to the test's output.
func env(t *testing.T, secret string, logs *testkit.Buffer) deliver.Env {
	e := delivertest.Env(t, map[string]string{secretEnv: secret})
	if logs != nil {
		e.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return e
}

// newSender builds the channel as a messenger would from herald.yaml:
// recipients name → URL, "ops" the default if given.
func newSender(t *testing.T, secret string, recipients map[string]string, edit ...func(*config.Integration)) deliver.Sender {
	t.Helper()
	return newSenderTimeout(t, secret, recipients, 0, edit...)
}

// newSenderTimeout is newSender whose POSTs time out after timeout (0: the
// channel's own limit).
func newSenderTimeout(t *testing.T, secret string, recipients map[string]string, timeout time.Duration, edit ...func(*config.Integration)) deliver.Sender {
	t.Helper()
	in := config.Integration{ID: "ci", Type: "webhook", Settings: &webhook.Config{SecretEnv: secretEnv, Recipients: recipients}}
	if _, ok := recipients["ops"]; ok {
		in.Settings.(*webhook.Config).Default = "ops"
	}
	e := env(t, secret, nil)
	e.CallTimeout = timeout
	return delivertest.NewSender(t, webhook.New, in, e, edit...)
}

// recorder is a deliver.Sink that keeps what it is given, checking every
// ingress against ingress.v1 as the messenger does. failNext makes the next
// Ingress calls fail with err.
type recorder struct {
	t        *testing.T
	mu       sync.Mutex
	ingress  []*envelope.Ingress
	dropped  []string
	statuses []deliver.Status
	failNext int
	failWith error
	// hold, if set, keeps every Ingress waiting until it is closed;
	// entered counts the calls that began.
	hold    chan struct{}
	entered int
	changed testkit.Signal
}

func newRecorder(t *testing.T) *recorder { return &recorder{t: t} }

func (r *recorder) Ingress(ctx context.Context, in *envelope.Ingress) error {
	if err := envelope.Check(schemas.Ingress, in); err != nil {
		r.t.Errorf("the receiver made an invalid ingress.v1: %v", err)
	}
	r.mu.Lock()
	r.entered++
	hold := r.hold
	r.changed.Notify()
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failNext > 0 {
		r.failNext--
		return r.failWith
	}
	r.ingress = append(r.ingress, in)
	r.changed.Notify()
	return nil
}

func (r *recorder) Dropped(_ context.Context, _ *envelope.Ingress, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropped = append(r.dropped, reason)
	r.changed.Notify()
}

func (r *recorder) Status(s deliver.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses = append(r.statuses, s)
	r.changed.Notify()
}

func (r *recorder) fail(n int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failNext, r.failWith = n, err
}

func (r *recorder) got() (ingress []*envelope.Ingress, dropped []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*envelope.Ingress(nil), r.ingress...), append([]string(nil), r.dropped...)
}

// waitState waits until the receiver reports state.
func (r *recorder) waitState(t *testing.T, state string) deliver.Status {
	t.Helper()
	var last deliver.Status
	if !r.changed.Wait(10*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if n := len(r.statuses); n > 0 {
			last = r.statuses[n-1]
		}
		return last.State == state
	}) {
		t.Fatalf("receiver state %q after 10s, want %q", last.State, state)
	}
	return last
}

// inbound is a webhook receiver served as the messenger serves it (behind
// http.MaxBytesHandler at 1 MiB), with a recorder for a sink.
type testReceiver struct {
	url    string // of POST /hooks/ci
	secret string
	rec    *recorder
	r      deliver.Receiver
	logs   *testkit.Buffer
	stop   func() // stops Receive and waits for it
}

// newInbound builds the receiver of integration "ci" with secret; run
// starts Receive.
func newInbound(t *testing.T, secret string, run bool, edit ...func(*config.Integration)) *testReceiver {
	t.Helper()
	in := config.Integration{ID: "ci", Type: "webhook", Inbound: config.Inbound{Enabled: true}, Settings: &webhook.Config{SecretEnv: secretEnv}}
	for _, e := range edit {
		e(&in)
	}
	logs := &testkit.Buffer{}
	e := env(t, secret, logs)
	e.HTTP = deliver.NewHTTP()
	r, err := webhook.NewReceiver(in, e)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.MaxBytesHandler(e.HTTP, 1<<20))
	t.Cleanup(srv.Close)
	ib := &testReceiver{url: srv.URL + webhook.Path("ci"), secret: secret, rec: newRecorder(t), r: r, logs: logs, stop: func() {}}
	if run {
		ib.start(t)
	}
	return ib
}

func (ib *testReceiver) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ib.r.Receive(ctx, ib.rec) }()
	var once sync.Once
	ib.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Receive: %v", err)
			}
		})
	}
	t.Cleanup(ib.stop)
	ib.rec.waitState(t, deliver.StateRunning)
}

// blob is a JSON body of the fields given as name, value pairs.
func blob(kv ...string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv[i])
		v, _ := json.Marshal(kv[i+1])
		fmt.Fprintf(&b, "%s:%s", k, v)
	}
	b.WriteByte('}')
	return b.Bytes()
}
