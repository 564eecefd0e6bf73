package speaker

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herald-lb/herald/announce/l2"
	"github.com/herald-lb/herald/internal/utf8text"
	"github.com/herald-lb/herald/speaker/members"
	"github.com/herald-lb/herald/speaker/plan"
)

type metrics struct {
	announced   *prometheus.GaugeVec
	unannounced *prometheus.GaugeVec
	plans       prometheus.Counter
	// statusWrite and statusFailures: the passes of the status writer.
	statusWrite    prometheus.Histogram
	statusFailures prometheus.Counter
	// writes counts the writes to the API server, by object.
	writes *prometheus.CounterVec
	// speakerStatusWrites and speakerStatusFailures: the writes of the
	// node's SpeakerStatus.
	speakerStatusWrites   prometheus.Counter
	speakerStatusFailures prometheus.Counter
}

// newMetrics registers the speaker's metrics: the announced addresses, the
// addresses nobody announces, the responders' counters and the size of the default interface set (read
// from the announcer at scrape time) and the memberlist view.
func newMetrics(reg prometheus.Registerer, ann Announcer, ml *members.Members, sessions func() []bgpSession) *metrics {
	m := &metrics{
		announced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_l2_announced",
			Help: "1 for each address this node answers ARP/NDP for, by Service and node.",
		}, []string{"service", "address", "node"}),
		unannounced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "herald_address_unannounced",
			Help: "1 for each address of a Service that no node announces (neither layer 2 nor BGP; addresses of node-address pools left out), by Service and reason (NoEndpoints, NoEligibleNode, NoL2Advertisement, NoBGPPeer, NoAdvertisement). Reported by one speaker: the ready one whose node name sorts first in its memberlist view.",
		}, []string{"service", "address", "reason"}),
		plans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_speaker_plans_total",
			Help: "Plans this speaker computed and applied from its whole cached state (input changes arriving during a plan are coalesced into the next one).",
		}),
		statusWrite: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "herald_speaker_status_write_seconds",
			Help:    "Time to bring this node's ServiceL2Status and ServiceBGPStatus objects in line with the newest plan, one pass each. Written apart from the announcements, which never wait for it; long passes (thousands of objects at the client's rate limit, a slow API server) only delay the reports.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900},
		}),
		statusFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_speaker_status_write_failures_total",
			Help: "Passes of the status writer that left some ServiceL2Status or ServiceBGPStatus object unwritten (the error is logged; retried a second later).",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_speaker_writes_total",
			Help: "Writes this speaker sent to the API server, by what was written: service-condition (a patch of a Service's herald.dev/Announced condition, by the reporter, only when the condition changes).",
		}, []string{"object"}),
		speakerStatusWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_speaker_speakerstatus_writes_total",
			Help: "Writes (creates and updates) of this node's SpeakerStatus: a state change is written within a second, a change of counts alone at most every 30 s, nothing while nothing changes.",
		}),
		speakerStatusFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "herald_speaker_speakerstatus_write_failures_total",
			Help: "Reads and writes of this node's SpeakerStatus that failed (the error is logged; retried after 1 s, doubled with each failure in a row up to a minute).",
		}),
	}
	reg.MustRegister(m.announced, m.unannounced, m.plans, m.statusWrite, m.statusFailures, m.writes, m.speakerStatusWrites, m.speakerStatusFailures, &bgpCollector{sessions: sessions,
		up: prometheus.NewDesc("herald_bgp_session_up",
			"1 while the BGP session with the peer is established, 0 otherwise.", []string{"peer", "address"}, nil),
		prefixes: prometheus.NewDesc("herald_bgp_prefixes_advertised",
			"Prefixes this node advertises to the peer (sent while the session is established).", []string{"peer", "address"}, nil),
		updates: prometheus.NewDesc("herald_bgp_updates_total",
			"BGP UPDATE messages exchanged with the peer, by direction (sent, received), since the session was configured.", []string{"peer", "address", "direction"}, nil),
		notifications: prometheus.NewDesc("herald_bgp_notifications_total",
			"BGP NOTIFICATION messages exchanged with the peer, by direction (sent, received), since the session was configured.", []string{"peer", "address", "direction"}, nil),
	},
		&l2Collector{ann: ann,
			answered: prometheus.NewDesc("herald_l2_requests_answered_total",
				"ARP requests and neighbour solicitations answered, by interface.", []string{"interface"}, nil),
			gratuitous: prometheus.NewDesc("herald_l2_gratuitous_sent_total",
				"Gratuitous ARP rounds and unsolicited neighbour advertisements sent, by interface.", []string{"interface"}, nil),
		},
		l2Interfaces(ann),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herald_memberlist_members_alive",
			Help: "Speakers alive in this speaker's memberlist view, itself included.",
		}, func() float64 { return float64(ml.Stats().Alive) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herald_memberlist_members_ready",
			Help: "Speakers alive in this speaker's memberlist view that are ready to serve (their cache synced and first plan applied), itself included when it is: the speakers elections choose from.",
		}, func() float64 { return float64(ml.Stats().Ready) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "herald_memberlist_departures_total",
			Help: "Speakers this speaker saw leave or declared dead. On a quiet cluster it grows only when a node or speaker stops; growth without that is a false positive (tune the profile).",
		}, func() float64 { return float64(ml.Stats().Departures) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "herald_memberlist_arrivals_total",
			Help: "Speakers this speaker saw join (again).",
		}, func() float64 { return float64(ml.Stats().Arrivals) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "herald_memberlist_rejoins_total",
			Help: "Joins of known speakers missing from this speaker's view (the periodic re-join that heals partitions).",
		}, func() float64 { return float64(ml.Stats().Rejoins) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "herald_memberlist_key_syncs_total",
			Help: "State syncs with speakers that held a gossip key rotation for a while (their metadata update lost, or the key not yet given to them). Growth after a rotation that completed is harmless; growth that does not stop names a speaker that cannot follow (see the log: gossip key rotation held).",
		}, func() float64 { return float64(ml.Stats().KeySyncs) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herald_memberlist_strangers",
			Help: "Members alive in this speaker's memberlist view that no Node is (a name no Node has, or a Node's name from another address): they hold the gossip key without being a speaker Kubernetes knows. Key rotation does not wait for them; anything above 0 for longer than a node's join takes means a leaked key: rotate it.",
		}, func() float64 { return float64(ml.Stats().Strangers) }),
		&keysCollector{ml: ml, desc: prometheus.NewDesc("herald_memberlist_gossip_keys",
			"Gossip keys in this speaker's keyring (2 or more while a new key is rotated in), labelled with the fingerprint (first 8 bytes of SHA-256) of the one it encrypts with.",
			[]string{"primary"}, nil)},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "herald_memberlist_health_score",
			Help: "memberlist's awareness health score: 0 is healthy; higher means this speaker itself misses probes (overloaded or losing packets).",
		}, func() float64 { return float64(ml.Stats().HealthScore) }),
	)
	return m
}

// l2Interfaces is herald_l2_interfaces, read from the announcer.
func l2Interfaces(ann Announcer) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "herald_l2_interfaces",
		Help: "Interfaces in this node's default eligible set, which answer for the addresses whose L2Advertisement names no interfaces.",
	}, func() float64 { return float64(len(ann.DefaultInterfaces())) })
}

func (m *metrics) setAnnounced(node string, l2 []plan.L2Announcement) {
	m.announced.Reset()
	for _, a := range l2 {
		for _, s := range a.Services {
			m.announced.WithLabelValues(s, a.Addr.String(), node).Set(1)
		}
	}
}

// setUnannounced reports the addresses no node announces when this speaker
// is the reporter (the plan's view is every speaker's; one reports it, so
// that the series do not grow with the nodes), and nothing otherwise.
func (m *metrics) setUnannounced(reporter bool, us []plan.Unannounced) {
	m.unannounced.Reset()
	if !reporter {
		return
	}
	for _, u := range us {
		for _, s := range u.Services {
			m.unannounced.WithLabelValues(s, u.Addr.String(), string(u.Reason)).Set(1)
		}
	}
}

// reporter says whether node reports for the cluster: its name sorts first
// among the ready speakers alive in its memberlist view.
func reporter(node string, alive []string) bool {
	return len(alive) > 0 && slices.Min(alive) == node
}

type l2Collector struct {
	ann                  Announcer
	answered, gratuitous *prometheus.Desc
}

func (c *l2Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.answered
	ch <- c.gratuitous
}

// Collect reports the responders' counters by interface. Interface names
// are any bytes the kernel allows: they are escaped into valid UTF-8 (a
// label value must be), and names that escape alike are summed, so one odd
// interface never fails the scrape.
func (c *l2Collector) Collect(ch chan<- prometheus.Metric) {
	byLabel := map[string]l2.Counters{}
	for name, s := range c.ann.Stats() {
		l := utf8text.Escape(name)
		sum := byLabel[l]
		sum.Answered += s.Answered
		sum.Gratuitous += s.Gratuitous
		byLabel[l] = sum
	}
	for name, s := range byLabel {
		ch <- prometheus.MustNewConstMetric(c.answered, prometheus.CounterValue, float64(s.Answered), name)
		ch <- prometheus.MustNewConstMetric(c.gratuitous, prometheus.CounterValue, float64(s.Gratuitous), name)
	}
}

type bgpCollector struct {
	sessions                             func() []bgpSession
	up, prefixes, updates, notifications *prometheus.Desc
}

func (c *bgpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.prefixes
	ch <- c.updates
	ch <- c.notifications
}

func (c *bgpCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.sessions() {
		up := 0.0
		if s.established {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, s.name, s.addr.String())
		ch <- prometheus.MustNewConstMetric(c.prefixes, prometheus.GaugeValue, float64(s.prefixes), s.name, s.addr.String())
		if k := s.counters; k != nil {
			for _, m := range []struct {
				d         *prometheus.Desc
				n         uint64
				direction string
			}{{c.updates, k.UpdatesSent, "sent"}, {c.updates, k.UpdatesReceived, "received"},
				{c.notifications, k.NotificationsSent, "sent"}, {c.notifications, k.NotificationsReceived, "received"}} {
				ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.n), s.name, s.addr.String(), m.direction)
			}
		}
	}
}

// keysCollector reports the gossip keyring: how many keys, and which one
// encrypts (none without encryption).
type keysCollector struct {
	ml   interface{ Keys() []string }
	desc *prometheus.Desc
}

func (c *keysCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *keysCollector) Collect(ch chan<- prometheus.Metric) {
	keys := c.ml.Keys()
	if len(keys) == 0 {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(len(keys)), keys[0])
}
