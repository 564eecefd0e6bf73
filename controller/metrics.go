package controller

import (
	"math/big"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/ipam"
)

// metrics are the controller's Prometheus metrics.
type metrics struct {
	inUse        *prometheus.GaugeVec
	total        *prometheus.GaugeVec
	syncDuration prometheus.Histogram
	errors       *prometheus.CounterVec
	configProbs  *prometheus.GaugeVec
	services     prometheus.Gauge
	waiting      *prometheus.GaugeVec
	unassigned   *prometheus.GaugeVec
	writes       *prometheus.CounterVec
	// svclbDaemonSets counts Herald's DaemonSets in the ServiceLB namespace.
	svclbDaemonSets prometheus.Gauge
	// unreadable counts the configuration objects that cannot be read as
	// their type, by kind.
	unreadable *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		inUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_allocator_addresses_in_use",
			Help: "Addresses of the pool assigned to at least one Service.",
		}, []string{"pool"}),
		total: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_allocator_addresses",
			Help: "Addresses the pool can give out (IPv6 pools may be very large; float precision).",
		}, []string{"pool"}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_controller_sync_duration_seconds",
			Help:    "Time to sync one Service (allocation and API writes).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_controller_allocation_errors_total",
			Help: "Times a Service came to be refused what it asks for, by reason: counted once per change of reason, not per retry.",
		}, []string{"reason"}),
		configProbs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_config_problems",
			Help: "Problems in the configuration objects, by kind and severity.",
		}, []string{"kind", "severity"}),
		services: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_controller_services_assigned",
			Help: "LoadBalancer Services that hold an assignment.",
		}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_controller_services_waiting",
			Help: "LoadBalancer Services refused what they ask for (waiting, or keeping an older assignment), by reason.",
		}, []string{"reason"}),
		unassigned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_controller_service_unassigned",
			Help: "1 for each LoadBalancer Service Herald serves that holds no address, by Service and the reason it was refused one.",
		}, []string{"service", "reason"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_controller_writes_total",
			Help: "Writes the controller made to the API server, by what was written (service-status, service-annotation, config-status, pool-counters, svclb-daemonset-create, svclb-daemonset-update, svclb-daemonset-delete).",
		}, []string{"object"}),
		svclbDaemonSets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "herald_svclb_daemonsets",
			Help: "Herald's svclb DaemonSets in the ServiceLB namespace (one per Service placed in a node-address pool).",
		}),
	}
	m.unreadable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_config_unreadable_objects",
		Help: "Configuration objects whose spec cannot be read as its type (stored under an older or looser schema), by kind: each is left out (its last valid spec, if any, is served) with an Invalid condition.",
	}, []string{"kind"})
	reg.MustRegister(m.inUse, m.total, m.syncDuration, m.errors, m.configProbs, m.services, m.waiting, m.unassigned, m.writes, m.svclbDaemonSets, m.unreadable)
	return m
}

// setUnreadable sets the unreadable-object gauge of every configuration
// kind (0 included, so an alert can compare).
func (m *metrics) setUnreadable(u map[config.ObjectRef]config.Unreadable) {
	count := map[string]float64{}
	for ref := range u {
		count[ref.Kind]++
	}
	for _, k := range config.Kinds {
		m.unreadable.WithLabelValues(k).Set(count[k])
	}
}

func (m *metrics) setPools(stats []ipam.Stats, known map[string]bool) {
	seen := map[string]bool{}
	for _, s := range stats {
		seen[s.Pool] = true
		m.inUse.WithLabelValues(s.Pool).Set(float64(s.IPv4.Assigned + s.IPv6.Assigned))
		t := new(big.Int)
		for _, f := range []ipam.FamilyStats{s.IPv4, s.IPv6} {
			if f.Total != nil {
				t.Add(t, f.Total)
			}
		}
		v, _ := new(big.Float).SetInt(t).Float64()
		m.total.WithLabelValues(s.Pool).Set(v)
	}
	for p := range known {
		if !seen[p] {
			m.inUse.DeleteLabelValues(p)
			m.total.DeleteLabelValues(p)
		}
	}
}
