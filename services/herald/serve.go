package herald

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
)

// process is what one Herald process shows an operator (design §9): its
// metrics, its readiness, and the HTTP listener serving them at /healthz,
// /readyz and /metrics, shared by every service the process runs.
type process struct {
	Metrics *obs.Metrics
	Health  *obs.Health
	Server  *obs.Server
}

// newProcess is a process listening on listen, ready while nc is connected
// and JetStream answers, and while each service's own checks pass.
func newProcess(nc *nats.Conn, listen string, log *slog.Logger) *process {
	m, h := obs.NewMetrics(), obs.NewHealth()
	h.Add("nats", obs.NATSCheck(nc))
	return &process{Metrics: m, Health: h, Server: obs.NewServer(listen, h, m, log)}
}

// listen opens the listener; a taken address fails at start, saying how to
// give each process its own.
func (p *process) listen() error {
	if err := p.Server.Listen(); err != nil {
		return fmt.Errorf("%w (each process needs its own: --http-listen or HERALD_HTTP_LISTEN)", err)
	}
	return nil
}

// run runs service with the listener beside it. The listener opens first
// and closes only once service has returned, so /readyz answers (503) while
// the service drains at stop; if serving fails, service is stopped.
func (p *process) run(ctx context.Context, service func(context.Context) error) error {
	if err := p.listen(); err != nil {
		return err
	}
	ctx, stopService := context.WithCancelCause(ctx)
	defer stopService(nil)
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() {
		err := p.Server.Serve(srvCtx)
		if err != nil {
			stopService(err)
		}
		served <- err
	}()
	err := service(ctx)
	stopServer()
	if serr := <-served; serr != nil {
		return serr
	}
	return err
}

// messengerServesHTTP reports whether the messenger will serve http_listen
// itself: it does when a webhook or Slack integration receives, mounting
// their endpoints on a listener of its own.
//
// TODO(messenger.Options.HTTP): the messenger is to mount its /hooks/ and
// /slack/ endpoints (deliver.HTTP, wrapped in http.MaxBytesHandler as its
// serveHTTP does) on the process's obs.Server through an option instead of
// listening itself (design §9: one listener per process). Until then a
// process whose messenger listens does not serve /healthz, /readyz and
// /metrics on the same address, so the two do not clash; once the option
// exists, delete this function and its two uses (runService, Dev).
func messengerServesHTTP(cfg *config.Config) bool {
	for _, in := range cfg.Integrations {
		if !in.Disabled && in.Inbound.Enabled && (in.Type == "webhook" || in.Type == "slack") {
			return true
		}
	}
	return false
}
