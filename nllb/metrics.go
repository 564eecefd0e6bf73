package nllb

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the balancer's Prometheus metrics, labelled by upstream
// ("ip:port"). One Metrics serves every Balancer of a process (the API
// server and konnectivity upstreams differ by port).
type Metrics struct {
	healthy     *prometheus.GaugeVec
	active      *prometheus.GaugeVec
	total       *prometheus.CounterVec
	dialErrors  *prometheus.CounterVec
	checkTiming prometheus.Histogram
}

// NewMetrics creates the metrics and registers them with reg (when not nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		healthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_nllb_upstream_healthy",
			Help: "1 when the upstream passes its health checks, 0 when it does not or has not been checked yet.",
		}, []string{"upstream"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_nllb_connections_active",
			Help: "Connections currently forwarded to the upstream.",
		}, []string{"upstream"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_nllb_connections_total",
			Help: "Connections forwarded to the upstream (successful dials).",
		}, []string{"upstream"}),
		dialErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_nllb_dial_errors_total",
			Help: "Failed dials to the upstream (the client connection was then tried on another upstream).",
		}, []string{"upstream"}),
		checkTiming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_nllb_health_check_seconds",
			Help:    "Duration of the upstream health checks, successful or not.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.healthy, m.active, m.total, m.dialErrors, m.checkTiming} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// forget drops an upstream's series when it leaves the set.
func (m *Metrics) forget(upstream string) {
	if m == nil {
		return
	}
	m.healthy.DeleteLabelValues(upstream)
	m.active.DeleteLabelValues(upstream)
	m.total.DeleteLabelValues(upstream)
	m.dialErrors.DeleteLabelValues(upstream)
}
