package obs

import (
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
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
