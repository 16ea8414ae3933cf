package obs

import (
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/pkg/envelope"
)

// upCollector serves herald_integration_up: 1 for an integration that can
// work, 0 for one that cannot (its sender could not be set up, its receiver
// is in error), as its sources say at scrape time.
type upCollector struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	sources []*func() map[string]bool
}

func newUpCollector() *upCollector {
	return &upCollector{desc: prometheus.NewDesc("herald_integration_up",
		"1 while an integration can work (its sender set up, its receiver not in error), 0 while it cannot.",
		[]string{"integration"}, nil)}
}

// IntegrationsUp serves herald_integration_up from up (integration
// "type:id" to whether it can work) until the returned func is called: a
// messenger's run, which a reload may repeat.
func (m *Metrics) IntegrationsUp(up func() map[string]bool) (stop func()) {
	if m == nil {
		return func() {}
	}
	src := &up
	m.up.mu.Lock()
	m.up.sources = append(m.up.sources, src)
	m.up.mu.Unlock()
	return func() {
		m.up.mu.Lock()
		m.up.sources = slices.DeleteFunc(m.up.sources, func(s *func() map[string]bool) bool { return s == src })
		m.up.mu.Unlock()
	}
}

// ReceiverStates are the states herald_receiver_state has a series for.
var ReceiverStates = []string{envelope.ReceiverRunning, envelope.ReceiverStandby, envelope.ReceiverConflict, envelope.ReceiverError}

// receiverCollector serves herald_receiver_state: for each receiving
// integration, 1 on the series of its state, 0 on the others.
type receiverCollector struct {
	desc    *prometheus.Desc
	mu      sync.Mutex
	sources []*func() map[string]string
}

func newReceiverCollector() *receiverCollector {
	return &receiverCollector{desc: prometheus.NewDesc("herald_receiver_state",
		"1 on the state an integration's receiver is in (running, standby on a replica that waits, conflict: another process takes its messages, error), 0 on the others.",
		[]string{"integration", "state"}, nil)}
}

// Receivers serves herald_receiver_state from states (integration
// "type:id" to its receiver's state) until the returned func is called.
func (m *Metrics) Receivers(states func() map[string]string) (stop func()) {
	if m == nil {
		return func() {}
	}
	src := &states
	m.receivers.mu.Lock()
	m.receivers.sources = append(m.receivers.sources, src)
	m.receivers.mu.Unlock()
	return func() {
		m.receivers.mu.Lock()
		m.receivers.sources = slices.DeleteFunc(m.receivers.sources, func(s *func() map[string]string) bool { return s == src })
		m.receivers.mu.Unlock()
	}
}

func (r *receiverCollector) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r *receiverCollector) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	sources := slices.Clone(r.sources)
	r.mu.Unlock()
	all := map[string]string{}
	for _, src := range sources {
		maps.Copy(all, (*src)())
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		for _, state := range ReceiverStates {
			v := 0.0
			if all[id] == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, v, id, state)
		}
	}
}

func (u *upCollector) Describe(ch chan<- *prometheus.Desc) { ch <- u.desc }

func (u *upCollector) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	sources := slices.Clone(u.sources)
	u.mu.Unlock()
	all := map[string]bool{}
	for _, src := range sources {
		maps.Copy(all, (*src)())
	}
	for _, id := range slices.Sorted(maps.Keys(all)) {
		v := 0.0
		if all[id] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(u.desc, prometheus.GaugeValue, v, id)
	}
}
