package config

import (
	"net/netip"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/herald-lb/herald/config/v1beta1"
)

// BGP timer defaults (RFC 4271 suggestions, as routers use them).
const (
	DefaultHoldTime    = 90 * time.Second
	DefaultConnectTime = 120 * time.Second
	DefaultBGPPort     = 179
)

// parsePeers validates each peer on its own, then drops a peer that
// duplicates an older one (same address and port) on nodes both may select.
func parsePeers(objs []v1beta1.BGPPeer, cfg *Config, brokenBFD map[string]bool, probs *Problems) []*Peer {
	sorted := append([]v1beta1.BGPPeer(nil), objs...)
	sort.SliceStable(sorted, func(i, j int) bool { return byAge(sorted[i].ObjectMeta, sorted[j].ObjectMeta) })
	var accepted []*Peer
	for i := range sorted {
		r := &reporter{kind: KindBGPPeer, name: sorted[i].Name, out: probs}
		p := parsePeer(&sorted[i].Spec, sorted[i].Name, sorted[i].Namespace, r)
		if p == nil {
			continue
		}
		if name := sorted[i].Spec.BFDProfile; name != "" {
			// Never BGP down because of BFD: a bad reference only costs BFD.
			switch {
			case cfg.BFDProfile(name) != nil:
				p.BFDProfile = name
			case brokenBFD[name]:
				r.warnf("spec.bfdProfile", "BFDProfile %q is invalid and not in use: the session runs without BFD", name)
			default:
				r.warnf("spec.bfdProfile", "BFDProfile %q does not exist: the session runs without BFD", name)
			}
		}
		if dup := duplicatePeer(accepted, p); dup != nil {
			r.errorf("spec.peerAddress", "duplicates BGPPeer %q (%s port %d) on nodes both select",
				dup.Name, p.Address, p.Port)
			continue
		}
		accepted = append(accepted, p)
	}
	sort.Slice(accepted, func(i, j int) bool { return accepted[i].Name < accepted[j].Name })
	return accepted
}

func duplicatePeer(accepted []*Peer, p *Peer) *Peer {
	for _, o := range accepted {
		if o.Address == p.Address && o.Port == p.Port && selectorListsOverlap(o.NodeSelectors, p.NodeSelectors) {
			return o
		}
	}
	return nil
}

func parsePeer(s *v1beta1.BGPPeerSpec, name, namespace string, r *reporter) *Peer {
	p := &Peer{
		Name:            name,
		MyASN:           s.MyASN,
		PeerASN:         s.PeerASN,
		Port:            s.PeerPort,
		EBGPMultiHop:    s.EBGPMultiHop,
		GracefulRestart: s.GracefulRestart || s.EnableGracefulRestart,
		HoldTime:        DefaultHoldTime,
		ConnectTime:     DefaultConnectTime,
	}
	unimplementedPeerFields(s, r)
	if p.MyASN == 0 {
		r.errorf("spec.myASN", "must be set (1-4294967295)")
	}
	if s.LocalASN != 0 {
		// MetalLB's local-as with no-prepend and replace-as: the router
		// sees only this AS, in the OPEN and in the AS path. Each session
		// runs its own BGP instance here, so it is the session's AS.
		p.MyASN = s.LocalASN
	}
	switch {
	case s.DynamicASN != "" && p.PeerASN != 0:
		r.errorf("spec.dynamicASN", "cannot be set together with spec.peerASN")
	case s.DynamicASN == "internal":
		// The router must be in our AS: that is peerASN.
		p.PeerASN = p.MyASN
	case s.DynamicASN == "":
		if p.PeerASN == 0 {
			r.errorf("spec.peerASN", "must be set (1-4294967295), or spec.dynamicASN")
		}
	}
	if p.Port == 0 {
		p.Port = DefaultBGPPort
	}
	if p.EBGPMultiHop && p.MyASN == p.PeerASN {
		r.errorf("spec.ebgpMultiHop", "applies to eBGP only, but myASN equals peerASN (%d)", p.MyASN)
	}
	var err error
	switch p.Address, err = netip.ParseAddr(s.PeerAddress); {
	case s.PeerAddress == "" && s.Interface != "":
		// unimplementedPeerFields reported the interface.
	case s.PeerAddress == "":
		r.errorf("spec.peerAddress", "must be set")
	case err != nil || p.Address.Zone() != "":
		r.errorf("spec.peerAddress", "%q is not an IP address", s.PeerAddress)
	}
	if s.SourceAddress != "" {
		if p.SourceAddress, err = netip.ParseAddr(s.SourceAddress); err != nil {
			r.errorf("spec.sourceAddress", "%q is not an IP address", s.SourceAddress)
		} else if p.Address.IsValid() && p.SourceAddress.Is4() != p.Address.Is4() {
			r.errorf("spec.sourceAddress", "%s is not of the family of peerAddress %s", p.SourceAddress, p.Address)
		}
	}
	if s.RouterID != "" {
		if p.RouterID, err = netip.ParseAddr(s.RouterID); err != nil || !p.RouterID.Is4() {
			r.errorf("spec.routerID", "%q is not an IPv4 address", s.RouterID)
		}
	}
	if s.HoldTime != nil {
		p.HoldTime = s.HoldTime.Duration
		switch {
		case p.HoldTime < 0:
			r.errorf("spec.holdTime", "%s is negative", p.HoldTime)
		case p.HoldTime%time.Second != 0:
			r.errorf("spec.holdTime", "%s is not a whole number of seconds", p.HoldTime)
		case p.HoldTime != 0 && p.HoldTime < 3*time.Second:
			r.errorf("spec.holdTime", "%s is below the BGP minimum of 3s (use 0 to disable keepalives)", p.HoldTime)
		}
	}
	p.KeepaliveTime = p.HoldTime / 3
	if s.KeepaliveTime != nil {
		p.KeepaliveTime = s.KeepaliveTime.Duration
		switch {
		case p.KeepaliveTime < 0:
			r.errorf("spec.keepaliveTime", "%s is negative", p.KeepaliveTime)
		case p.HoldTime != 0 && p.KeepaliveTime >= p.HoldTime:
			r.errorf("spec.keepaliveTime", "%s must be shorter than holdTime %s", p.KeepaliveTime, p.HoldTime)
		}
	}
	if s.ConnectTime != nil {
		p.ConnectTime = s.ConnectTime.Duration
		if p.ConnectTime < time.Second {
			r.errorf("spec.connectTime", "%s is shorter than 1s", p.ConnectTime)
		}
	}
	parsePassword(s, namespace, p, r)
	p.NodeSelectors = compileSelectors(r, "spec.nodeSelectors", s.NodeSelectors)
	if r.broken {
		return nil
	}
	return p
}

// parsePassword reads spec.password and spec.passwordSecret. An empty
// passwordSecret ({}) is none, as MetalLB reads it. A Secret in another
// namespace than the peer's own (Herald's install namespace, the only one
// whose Secrets the controller reads) is refused: a session without its
// password is one the router silently refuses.
func parsePassword(s *v1beta1.BGPPeerSpec, namespace string, p *Peer, r *reporter) {
	ref := s.PasswordSecret
	if ref != nil && ref.Name == "" && ref.Namespace == "" {
		ref = nil
	}
	p.InlinePassword = s.Password != ""
	switch {
	case ref == nil:
	case p.InlinePassword:
		r.errorf("spec.passwordSecret", "cannot be set together with spec.password")
	case ref.Name == "":
		r.errorf("spec.passwordSecret.name", "must name a Secret")
	case ref.Namespace != "" && ref.Namespace != namespace:
		r.errorf("spec.passwordSecret.namespace", "%q is not the BGPPeer's namespace %q: Herald reads password Secrets only in its install namespace (copy the Secret there)", ref.Namespace, namespace)
	default:
		p.PasswordSecret = ref.Name
	}
}

// unimplementedPeerFields refuses MetalLB's BGPPeer fields Herald does not
// implement, naming each (docs/metallb.md), and warns about those whose
// meaning Herald's sessions already have or cannot have.
func unimplementedPeerFields(s *v1beta1.BGPPeerSpec, r *reporter) {
	const why = "is not implemented by Herald yet: the peer is refused rather than peered without it (docs/metallb.md)"
	if s.DynamicASN != "" && s.DynamicASN != "internal" {
		r.errorf("spec.dynamicASN", "%q %s; set peerASN", s.DynamicASN, why)
	}
	if s.Interface != "" {
		r.errorf("spec.interface", "%s; set peerAddress", why)
	}
	if s.VRF != "" {
		r.errorf("spec.vrf", "%s", why)
	}
	if s.DisableMP {
		r.warnf("spec.disableMP", "has no effect: Herald negotiates both unicast families on one session")
	}
}

// selectorListsOverlap reports whether some node could match both lists (an
// empty list selects every node). It answers from the selectors alone, so
// the webhook and the controller agree without looking at nodes: two
// selectors overlap unless one requirement of each contradicts the other.
func selectorListsOverlap(a, b []labels.Selector) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, sa := range a {
		for _, sb := range b {
			if !selectorsDisjoint(sa, sb) {
				return true
			}
		}
	}
	return false
}

func selectorsDisjoint(a, b labels.Selector) bool {
	ra, _ := a.Requirements()
	rb, _ := b.Requirements()
	for _, x := range ra {
		for _, y := range rb {
			if x.Key() == y.Key() && (requirementsContradict(x, y) || requirementsContradict(y, x)) {
				return true
			}
		}
	}
	return false
}

// requirementsContradict reports whether no label value can satisfy both x and
// y (checked in one direction; the caller tries both).
func requirementsContradict(x, y labels.Requirement) bool {
	inSet := func(r labels.Requirement) bool {
		op := r.Operator()
		return op == selection.In || op == selection.Equals || op == selection.DoubleEquals
	}
	notInSet := func(r labels.Requirement) bool {
		op := r.Operator()
		return op == selection.NotIn || op == selection.NotEquals
	}
	switch {
	case y.Operator() == selection.DoesNotExist:
		return inSet(x) || x.Operator() == selection.Exists
	case inSet(x) && inSet(y):
		return !x.Values().HasAny(y.Values().UnsortedList()...)
	case inSet(x) && notInSet(y):
		return y.Values().HasAll(x.Values().UnsortedList()...)
	}
	return false
}
