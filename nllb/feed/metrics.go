package feed

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Update sources (the label "source").
const (
	// SourceFeed: the speaker wrote a new set into the node's file.
	SourceFeed = "feed"
	// SourceFile: herald nllb applied a new set from the file.
	SourceFile = "file"
	// SourceWatch: herald nllb applied a new set from its own watch.
	SourceWatch = "watch"
)

// Metrics of the upstream set updates of one source.
type Metrics struct {
	updates prometheus.Counter
	last    prometheus.Gauge
	now     func() time.Time
}

// metricVecs are registered once per registry and shared by every source.
type metricVecs struct {
	updates *prometheus.CounterVec
	last    *prometheus.GaugeVec
}

func newVecs(reg prometheus.Registerer) (metricVecs, error) {
	v := metricVecs{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_nllb_upstream_set_updates_total",
			Help: "Upstream sets taken over from the cluster: written into the node's file (source feed, the speaker) or applied to the balancers (source file or watch, herald nllb).",
		}, []string{"source"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_nllb_upstream_set_last_update_timestamp_seconds",
			Help: "Unix time of the last upstream set update of the source (0: none since start).",
		}, []string{"source"}),
	}
	for _, c := range []prometheus.Collector{v.updates, v.last} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return metricVecs{}, err
			}
			switch existing := are.ExistingCollector.(type) {
			case *prometheus.CounterVec:
				v.updates = existing
			case *prometheus.GaugeVec:
				v.last = existing
			}
		}
	}
	return v, nil
}

// NewMetrics registers (or reuses) the update metrics in reg and returns
// the ones of source; the series exist from the start at 0.
func NewMetrics(reg prometheus.Registerer, source string) (*Metrics, error) {
	v, err := newVecs(reg)
	if err != nil {
		return nil, err
	}
	m := &Metrics{updates: v.updates.WithLabelValues(source), last: v.last.WithLabelValues(source), now: time.Now}
	return m, nil
}

// updated counts one update; a nil Metrics counts nothing.
func (m *Metrics) updated() {
	if m == nil {
		return
	}
	m.updates.Inc()
	m.last.Set(float64(m.now().UnixNano()) / 1e9)
}

// Updated counts one update of the source (for sources outside this
// package, such as herald nllb's own watch); a nil Metrics counts nothing.
func (m *Metrics) Updated() { m.updated() }
