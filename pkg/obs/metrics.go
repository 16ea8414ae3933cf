// Package obs is what an operator sees of a Herald process from outside:
// Prometheus metrics, liveness and readiness, the process's one HTTP
// listener (architecture.md §9: /healthz, /readyz, /metrics and the channels' hooks),
// and NATS micro services that make each part discoverable ($SRV.PING).
//
// Services take a *Metrics and a *Health in their Options. Both are nil-safe:
// a nil *Metrics records nothing and a nil *Health registers nothing, so a
// test passes neither. One process has one of each, shared by every service
// it runs (herald dev runs them all).
package obs

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Outcomes of a delivery (herald_deliveries_total's outcome label).
const (
	OutcomeDelivered = "delivered"
	OutcomeFailed    = "failed"
	OutcomeUncertain = "uncertain"
)

// Results of an inbound message (herald_inbound_total's result label) and of
// a butler's tool call (herald_notify_calls_total's).
const (
	InboundAccepted = "accepted"
	InboundDropped  = "dropped"

	CallOK    = "ok"
	CallError = "error"
)

// Metrics are a process's Prometheus metrics, on a registry of their own
// (with the Go runtime's and the process's). The names are a contract: a
// dashboard is built on them (docs/operations.md).
type Metrics struct {
	reg *prometheus.Registry

	routed            *prometheus.CounterVec
	refused           *prometheus.CounterVec
	deliveries        *prometheus.CounterVec
	deliverySeconds   *prometheus.HistogramVec
	providerSeconds   *prometheus.HistogramVec
	retries           *prometheus.CounterVec
	deadLetters       *prometheus.CounterVec
	inbound           *prometheus.CounterVec
	approvalsAsked    *prometheus.CounterVec
	approvalsAnswered *prometheus.CounterVec
	notifyCalls       *prometheus.CounterVec
	storeFailures     prometheus.Counter
	storeOK           prometheus.Gauge
	lag               *lagCollector

	up          *upCollector
	receivers   *receiverCollector
	readyOnce   sync.Once
	handlerOnce sync.Once
	handler     http.Handler
}

// NewMetrics registers Herald's metrics on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		m.reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		m.reg.MustRegister(h)
		return h
	}
	m.routed = counter("herald_notifies_routed_total", "Notifies the switchboard accepted and forwarded to the messenger.", "butler", "channel")
	m.refused = counter("herald_notifies_refused_total", "Routes the switchboard refused for good, by error class (validation, forbidden, ...).", "butler", "class")
	m.deliveries = counter("herald_deliveries_total", "Final delivery outcomes: delivered, failed or uncertain; class is the error class of a failure.", "butler", "channel", "outcome", "class")
	m.deliverySeconds = histogram("herald_delivery_seconds", "From a route's creation by the butler to its delivery's final outcome.",
		[]float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 6 * 3600, 24 * 3600}, "channel")
	m.providerSeconds = histogram("herald_provider_call_seconds", "One call to a provider's API (Telegram, SMTP, Slack, a webhook).",
		[]float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "channel")
	m.retries = counter("herald_delivery_retries_total", "Delivery attempts that failed and will be tried again.", "channel")
	m.deadLetters = counter("herald_dead_letters_total", "Messages given up on and dead-lettered, by the stream they came from.", "stream")
	m.inbound = counter("herald_inbound_total", "Inbound messages the switchboard accepted or dropped, with the drop's reason.", "channel", "result", "reason")
	m.approvalsAsked = counter("herald_approvals_asked_total", "Permission requests a butler opened and sent to its approvers.", "butler")
	m.approvalsAnswered = counter("herald_approvals_answered_total", "Permission requests answered by an approver, by verdict (allow, deny).", "butler", "verdict")
	m.notifyCalls = counter("herald_notify_calls_total", "Calls of a butler's sending tools (notify, reply, react), by result.", "butler", "result")
	m.storeFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "herald_bus_store_failures_total",
		Help: "Writes to JetStream that NATS did not store or did not confirm: this process's probe writes and its routes (StoreWatch)."})
	m.storeOK = prometheus.NewGauge(prometheus.GaugeOpts{Name: "herald_bus_store_ok",
		Help: "1 while this process's last probe write was stored, 0 while NATS cannot store (or is not connected)."})
	m.reg.MustRegister(m.storeFailures, m.storeOK)
	m.lag = newLagCollector()
	m.up = newUpCollector()
	m.receivers = newReceiverCollector()
	m.reg.MustRegister(m.lag, m.up, m.receivers,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Ready serves herald_ready from h: 1 while the process is ready (its
// /readyz would answer 200), 0 while it is not. A process calls it once.
func (m *Metrics) Ready(h *Health) {
	if m == nil {
		return
	}
	m.readyOnce.Do(func() {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "herald_ready",
			Help: "1 while this process is ready (every /readyz check passes), 0 while it is not."}, func() float64 {
			if h.Recent(context.Background()).Ready {
				return 1
			}
			return 0
		}))
	})
}

// Known are the label values a fleet's configuration names, as far as a
// process counts them: the series Init starts at 0, so a rate or an alert
// sees them before their first event.
type Known struct {
	// Routed (the switchboard's) and Delivered (the messenger's) are each
	// butler's integrations ("type:id") it is granted.
	Routed, Delivered map[string][]string
	// Butlers are the butlers whose tool calls and prompts it counts.
	Butlers []string
	// Receiving are the integrations whose inbound messages it counts.
	Receiving []string
	// Streams are the streams whose dead letters it counts.
	Streams []string
}

// Init starts the series of k at 0: routed and delivered per butler and
// integration, retries per integration, notify calls (ok, error) and
// prompts asked per butler, accepted inbound messages per integration,
// dead letters per stream. Outcomes that carry an error class or a reason
// start at their first.
func (m *Metrics) Init(k Known) {
	if m == nil {
		return
	}
	for butler, channels := range k.Routed {
		for _, ch := range channels {
			m.routed.WithLabelValues(butler, ch)
		}
	}
	for butler, channels := range k.Delivered {
		for _, ch := range channels {
			m.deliveries.WithLabelValues(butler, ch, OutcomeDelivered, "")
			m.retries.WithLabelValues(ch)
		}
	}
	for _, butler := range k.Butlers {
		m.notifyCalls.WithLabelValues(butler, CallOK)
		m.notifyCalls.WithLabelValues(butler, CallError)
		m.approvalsAsked.WithLabelValues(butler)
	}
	for _, ch := range k.Receiving {
		m.inbound.WithLabelValues(ch, InboundAccepted, "")
	}
	for _, s := range k.Streams {
		m.deadLetters.WithLabelValues(s)
	}
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	m.handlerOnce.Do(func() {
		m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
	})
	return m.handler
}

// Registry is the registry the metrics are on, for a process's own extra
// collectors.
func (m *Metrics) Registry() *prometheus.Registry {
	if m == nil {
		return nil
	}
	return m.reg
}

// Routed counts a notify the switchboard forwarded to the messenger.
func (m *Metrics) Routed(butler, channel string) {
	if m != nil {
		m.routed.WithLabelValues(butler, channel).Inc()
	}
}

// Refused counts a route the switchboard refused for good; class is the
// error's class (envelope.ClassOf).
func (m *Metrics) Refused(butler, class string) {
	if m != nil {
		m.refused.WithLabelValues(butler, class).Inc()
	}
}

// Delivery records a delivery's final outcome (OutcomeDelivered,
// OutcomeFailed, OutcomeUncertain), class "" or the failure's error class,
// and the time since created, the route's creation (RequestIDTime of the
// route's request_id; zero: not observed).
// Call it once per delivery, when its outcome is final, not per attempt.
func (m *Metrics) Delivery(butler, channel, outcome, class string, created time.Time) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(butler, channel, outcome, class).Inc()
	// A time from the future (a butler's clock, or a made-up id) is no duration.
	if took := time.Since(created); !created.IsZero() && took >= 0 {
		m.deliverySeconds.WithLabelValues(channel).Observe(took.Seconds())
	}
}

// RequestIDTime is when a request id made by envelope.NewRequestID (a
// UUIDv7) was made: a route's creation by its butler, for Delivery. It is
// zero for an id of any other form.
func RequestIDTime(id string) time.Time {
	if len(id) != 36 || id[14] != '7' || id[8] != '-' || id[13] != '-' {
		return time.Time{}
	}
	ms, err := strconv.ParseUint(id[0:8]+id[9:13], 16, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms))
}

// ProviderCall records how long one call to a provider's API took.
func (m *Metrics) ProviderCall(channel string, took time.Duration) {
	if m != nil {
		m.providerSeconds.WithLabelValues(channel).Observe(took.Seconds())
	}
}

// Retry counts a delivery attempt that failed and will be tried again.
func (m *Metrics) Retry(channel string) {
	if m != nil {
		m.retries.WithLabelValues(channel).Inc()
	}
}

// DeadLetter counts a message of stream given up on.
func (m *Metrics) DeadLetter(stream string) {
	if m != nil {
		m.deadLetters.WithLabelValues(stream).Inc()
	}
}

// Inbound counts an inbound message: result InboundAccepted (reason "") or
// InboundDropped with the reason it was dropped.
func (m *Metrics) Inbound(channel, result, reason string) {
	if m != nil {
		m.inbound.WithLabelValues(channel, result, reason).Inc()
	}
}

// ApprovalAsked counts a permission request a butler sent to its approvers.
func (m *Metrics) ApprovalAsked(butler string) {
	if m != nil {
		m.approvalsAsked.WithLabelValues(butler).Inc()
	}
}

// ApprovalAnswered counts an approver's verdict ("allow", "deny").
func (m *Metrics) ApprovalAnswered(butler, verdict string) {
	if m != nil {
		m.approvalsAnswered.WithLabelValues(butler, verdict).Inc()
	}
}

// NotifyCall counts a call of a butler's sending tool: CallOK, or CallError
// when the tool answered with an error.
func (m *Metrics) NotifyCall(butler, result string) {
	if m != nil {
		m.notifyCalls.WithLabelValues(butler, result).Inc()
	}
}

// StoreFailed counts a write NATS did not store or did not confirm.
func (m *Metrics) StoreFailed() {
	if m != nil {
		m.storeFailures.Inc()
	}
}

// StoreOK sets whether NATS stores this process's writes now.
func (m *Metrics) StoreOK(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.storeOK.Set(1)
	} else {
		m.storeOK.Set(0)
	}
}
