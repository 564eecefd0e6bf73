package speaker

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/announce/bgp"
)

// BFDStatus reports the BFD sessions that run beside the BGP sessions
// (BGPPeer.spec.bfdProfile). The real one is the *bfd.Manager the embedded
// GoBGP's hook uses (bgp.Options.BFD).
type BFDStatus interface {
	// Sessions is a snapshot of every BFD session.
	Sessions() []bfd.SessionStatus
	// Watch reports every state change until cancel.
	Watch() (events <-chan bfd.PeerEvent, cancel func())
}

var _ BFDStatus = (*bfd.Manager)(nil)

// Events on the speaker's Node.
const (
	EventBFDSessionUp   = "BFDSessionUp"
	EventBFDSessionDown = "BFDSessionDown"
)

// peerName names a session's router for events: "<BGPPeer> (<address>)",
// or the address alone when the BGPPeer is not known.
func (a *Agent) peerName(addr netip.Addr) (string, bgpPeerInfo) {
	if p := a.bgpNames.Load(); p != nil && (*p)[addr].name != "" {
		info := (*p)[addr]
		return info.name + " (" + addr.String() + ")", info
	}
	return addr.String(), bgpPeerInfo{}
}

// watchBFD turns BFD state changes into events on this speaker's Node: a
// Warning when a session leaves Up (with the diagnostic, and whether the
// BGP session is reset for it), a Normal one when it comes Up.
func (a *Agent) watchBFD(ctx context.Context) error {
	events, cancel := a.bfd.Watch()
	defer cancel()
	node := &corev1.Node{}
	node.Name = a.o.NodeName
	node.UID = types.UID(a.o.NodeName)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			a.pokeSpeakerStatus() // the SpeakerStatus shows every BFD session's state
			if ev.Removed {
				continue
			}
			name, info := a.peerName(ev.Peer)
			switch {
			case ev.New == bfd.StateUp && ev.Old != bfd.StateUp:
				var tx, detect time.Duration
				for _, s := range a.bfd.Sessions() {
					if s.Peer == ev.Peer {
						tx, detect = s.TxInterval, s.DetectionTime
					}
				}
				a.log.Info("BFD session up", "peer", name, "profile", info.bfdProfile, "tx", tx, "detection_time", detect)
				a.recorder.Eventf(node, a.peerObject(info), corev1.EventTypeNormal, EventBFDSessionUp, "Peer",
					"BFD session with %s is up (profile %s; transmit interval %v, detection time %v)", name, info.bfdProfile, tx, detect)
			case ev.Old == bfd.StateUp:
				reason := bfdDownReason(ev.Event)
				a.log.Warn("BFD session down", "peer", name, "reason", reason, "hold_down", ev.HoldDown)
				a.recorder.Eventf(node, a.peerObject(info), corev1.EventTypeWarning, EventBFDSessionDown, "Peer",
					"BFD session with %s went down: %s", name, reason)
			}
		}
	}
}

// bfdDownReason explains why a BFD session left Up and what it did to the
// BGP session.
func bfdDownReason(ev bfd.Event) string {
	reason := bgp.BFDDownReason(ev)
	switch {
	case ev.Failure:
		reason += "; the BGP session is reset"
	default:
		reason += "; not a path failure, the BGP session is kept"
	}
	if ev.HoldDown > 0 {
		reason += fmt.Sprintf("; flapping: held down for %v", ev.HoldDown)
	}
	return reason
}

// bfdCollector reads the BFD sessions at scrape time.
type bfdCollector struct {
	status                    BFDStatus
	names                     func() map[netip.Addr]bgpPeerInfo
	up, changes, tx, detected *prometheus.Desc
}

func newBFDCollector(status BFDStatus, names func() map[netip.Addr]bgpPeerInfo) *bfdCollector {
	l := []string{"peer", "address"}
	return &bfdCollector{status: status, names: names,
		up: prometheus.NewDesc("herald_bfd_session_up",
			"1 while the BFD session with the BGP peer is Up, 0 otherwise.", l, nil),
		changes: prometheus.NewDesc("herald_bfd_state_changes_total",
			"Times the BFD session with the BGP peer came Up or went Down, since it was configured.", l, nil),
		tx: prometheus.NewDesc("herald_bfd_tx_interval_seconds",
			"Negotiated BFD transmit interval (before jitter): the slower of our transmit and the peer's receive interval; 0 while not sending.", l, nil),
		detected: prometheus.NewDesc("herald_bfd_detect_time_seconds",
			"BFD detection time: the peer's multiplier times the slower of our receive and the peer's transmit interval; 0 until a packet arrived.", l, nil),
	}
}

func (c *bfdCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.changes
	ch <- c.tx
	ch <- c.detected
}

func (c *bfdCollector) Collect(ch chan<- prometheus.Metric) {
	if c.status == nil {
		return
	}
	names := c.names()
	for _, s := range c.status.Sessions() {
		name, addr := names[s.Peer].name, s.Peer.String()
		up := 0.0
		if s.State == bfd.StateUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, name, addr)
		ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(s.Ups+s.Downs), name, addr)
		ch <- prometheus.MustNewConstMetric(c.tx, prometheus.GaugeValue, s.TxInterval.Seconds(), name, addr)
		ch <- prometheus.MustNewConstMetric(c.detected, prometheus.GaugeValue, s.DetectionTime.Seconds(), name, addr)
	}
}

// bgpPeerNames is the BGPPeer of each session, by router address.
func (a *Agent) bgpPeerNames() map[netip.Addr]bgpPeerInfo {
	if p := a.bgpNames.Load(); p != nil {
		return *p
	}
	return nil
}
