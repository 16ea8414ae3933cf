package obs_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"time"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/obs"
)

// A service registers a State as its readiness check and sets it as its
// work starts and stops; /readyz reports every check by name.
func ExampleHealth() {
	health := obs.NewHealth()
	consumers := obs.NewState() // failing with "starting"
	health.Add("switchboard.consumers", consumers.Check)
	srv := obs.NewServer("127.0.0.1:8790", health, obs.NewMetrics(), nil)

	readyz := func() {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost/readyz", nil))
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	readyz()
	consumers.Set(nil) // the workers run
	readyz()
	// Output:
	// 503 {"ready":false,"checks":{"switchboard.consumers":"starting"}}
	// 200 {"ready":true,"checks":{"switchboard.consumers":"ok"}}
}

// The messenger records each provider call, each retry, each delivery once
// its outcome is final (with the route's creation time), each inbound
// message, and each message it gives up on.
func ExampleMetrics() {
	m := obs.NewMetrics()
	routeID := envelope.NewRequestID() // the route's request_context.request_id
	created := obs.RequestIDTime(routeID)
	m.ProviderCall("telegram:tg_main", 80*time.Millisecond)
	m.Retry("telegram:tg_main")
	m.ProviderCall("telegram:tg_main", 95*time.Millisecond)
	m.Delivery("health", "telegram:tg_main", obs.OutcomeDelivered, "", created)
	m.Inbound("telegram:tg_main", obs.InboundAccepted, "")
	m.DeadLetter("HERALD_DELIVER")

	var none *obs.Metrics // what a test passes: records nothing
	none.Routed("health", "log:log")
	// Output:
}

// A process has one listener: the health and metrics paths, and what its
// services mount (the messenger's /hooks/ and /slack/ endpoints).
func ExampleServer_Mount() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	srv := obs.NewServer("127.0.0.1:8790", obs.NewHealth(), obs.NewMetrics(), nil)
	hooks := http.NewServeMux() // deliver.HTTP, in the messenger
	hooks.Handle("POST /hooks/ci", http.NotFoundHandler())
	srv.Mount(http.MaxBytesHandler(hooks, 1<<20))
	if err := srv.Serve(ctx); err != nil {
		fmt.Println(err)
	}
}
