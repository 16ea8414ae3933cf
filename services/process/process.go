// Package process is what every Herald binary shares: flags and help, the
// configuration, the NATS connection, the HTTP listener, and reloads.
//
//   - Spec, Main, Exec, Running: a service (switchboard, messenger, butler) as
//     a binary of its own; Main does the common part, then runs Spec.Serve.
//   - Process, New: /healthz, /readyz and /metrics, and the NATS store probe.
//   - Rerunner, StartReloads, ReloadOptions: reloads on SIGHUP, herald reload
//     or a changed file, the service restarted on the new configuration.
//   - IO, AnswerHelp, AsksHelp, IsUsageError, UsageFunc, ServiceUsage: command
//     lines, and a --help of one shape for every command and binary (help.go).
//   - LoadConfigFile, DurationFlag, FileHash, KnownOf: helpers of the above.
package process

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
	"github.com/heraldhq/herald/pkg/obs"
	"github.com/heraldhq/herald/services/console"
)

// Process is what one Herald process shows an operator (docs/operations.md): its
// metrics, its readiness, and the HTTP listener serving them at /healthz,
// /readyz and /metrics, and the fleet at a glance at / (console.Page), shared
// by every service the process runs.
type Process struct {
	Metrics *obs.Metrics
	Health  *obs.Health
	Server  *obs.Server
	// Store probes whether NATS can store; RunProbes runs it.
	Store *obs.StoreWatch
}

// New is a Process listening on listen, ready while nc is connected,
// JetStream answers and stores its probe record (key in herald_probe), and
// while each service's own checks pass.
func New(nc *nats.Conn, listen, probe string, log *slog.Logger) *Process {
	m, h := obs.NewMetrics(), obs.NewHealth()
	h.Add("nats", obs.NATSCheck(nc))
	m.Ready(h)
	srv := obs.NewServer(listen, h, m, log)
	srv.SetPage(console.Page(nc))
	return &Process{Metrics: m, Health: h, Server: srv, Store: obs.NewStoreWatch(nc, probe, m, h)}
}

// RunProbes runs the store's probes until ctx ends.
func (p *Process) RunProbes(ctx context.Context) { go p.Store.Run(ctx) }

// Listen opens the listener; a taken address fails at start, saying how to
// give each process its own.
func (p *Process) Listen() error {
	if err := p.Server.Listen(); err != nil {
		return fmt.Errorf("%w (each process needs its own: --http-listen or HERALD_HTTP_LISTEN)", err)
	}
	return nil
}

// Run runs service with the listener beside it. The listener opens first
// and closes only once service has returned, so /readyz answers (503) while
// the service drains at stop; if serving fails, service is stopped.
func (p *Process) Run(ctx context.Context, service func(context.Context) error) error {
	if err := p.Listen(); err != nil {
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

// KnownOf is what cfg names of the labels of the metrics that process
// counts (obs.Known): "switchboard", "messenger", "butler" (butler name's
// own), or "dev" (all of them, one process).
func KnownOf(cfg *config.Config, process, name string) obs.Known {
	routes := map[string][]string{}
	var butlers, receiving []string
	for _, b := range cfg.Butlers {
		butlers = append(butlers, b.Name)
		routes[b.Name] = []string{}
		for _, in := range cfg.Integrations {
			if !in.Disabled && in.Grants.Allows(b.Name) {
				routes[b.Name] = append(routes[b.Name], in.Channel())
			}
		}
	}
	for _, in := range cfg.Integrations {
		if !in.Disabled && in.Inbound.Enabled {
			receiving = append(receiving, in.Channel())
		}
	}
	switch process {
	case "switchboard":
		return obs.Known{Routed: routes, Receiving: receiving, Streams: []string{bus.StreamRoute, bus.StreamResult, bus.StreamIngress}}
	case "messenger":
		return obs.Known{Delivered: routes, Streams: []string{bus.StreamDeliver}}
	case "butler":
		return obs.Known{Butlers: []string{name}}
	}
	return obs.Known{Routed: routes, Delivered: routes, Butlers: butlers, Receiving: receiving,
		Streams: []string{bus.StreamRoute, bus.StreamResult, bus.StreamIngress, bus.StreamDeliver}}
}
