package explain

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/herald-lb/herald/announce/bgp/desired"
	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/nodeaddr"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/speaker/inputs"
	"github.com/herald-lb/herald/speaker/plan"
)

// Condition is one of Herald's conditions on a Service, as written.
type Condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// ServiceReport is why a Service is or is not served.
type ServiceReport struct {
	Service string `json:"service"`
	// OK is true when every address is announced and, for BGP, reaches
	// at least one router over an established session.
	OK bool `json:"ok"`
	// Cause is the first thing an operator should read: what is wrong
	// (the first problem found), or how the Service is served.
	Cause                 string          `json:"cause"`
	ExternalTrafficPolicy string          `json:"externalTrafficPolicy,omitempty"`
	Allocated             *Condition      `json:"allocated,omitempty"`
	Announced             *Condition      `json:"announced,omitempty"`
	Addresses             []AddressReport `json:"addresses,omitempty"`
	// ReadySpeakers are the nodes whose speaker pod is Ready: the
	// candidates the plan was run with.
	ReadySpeakers []string    `json:"readySpeakers,omitempty"`
	Warnings      []EventLine `json:"warnings,omitempty"`
}

// AddressReport is how one address is announced, or why it is not.
type AddressReport struct {
	Address string `json:"address"`
	Pool    string `json:"pool,omitempty"`
	// Mode is L2, BGP, L2+BGP, ServiceLB, or none (no advertisement
	// applies).
	Mode      string `json:"mode"`
	Announced bool   `json:"announced"`
	// Reason is the planner's reason when the address is not announced
	// (NoL2Advertisement, NoEndpoints, NoEligibleNode, NoBGPPeer,
	// NoAdvertisement), and Why says it in words.
	Reason string `json:"reason,omitempty"`
	Why    string `json:"why,omitempty"`
	// L2Node is the node answering ARP/NDP, Interfaces where (from its
	// ServiceL2Status).
	L2Node     string   `json:"l2Node,omitempty"`
	Interfaces []string `json:"interfaces,omitempty"`
	// BGPNodes are the nodes advertising the address.
	BGPNodes []string `json:"bgpNodes,omitempty"`
	// ServiceLBNodes are the nodes whose own address it is (node-address
	// pools).
	ServiceLBNodes []string     `json:"serviceLBNodes,omitempty"`
	Nodes          []NodeReport `json:"nodes,omitempty"`
}

// NodeReport is one node's part for an address.
type NodeReport struct {
	Node string `json:"node"`
	// L2 is "announces", "candidate" (eligible, not elected) or "no";
	// empty when layer 2 does not apply to the address.
	L2 string `json:"l2,omitempty"`
	// BGP is "advertises" or "no"; empty when BGP does not apply.
	BGP string `json:"bgp,omitempty"`
	// Why the node does not announce (or lost the election).
	Why string `json:"why,omitempty"`
	// Sessions are the node's BGP sessions (advertising nodes only).
	Sessions []SessionReport `json:"sessions,omitempty"`
}

// SessionReport is one BGP session of a node, as its speaker reports it.
type SessionReport struct {
	Peer    string `json:"peer"`
	Address string `json:"address"`
	// State is the session's state from the node's SpeakerStatus
	// ("unknown" when the node has none or does not list the session).
	State       string `json:"state"`
	Established bool   `json:"established"`
	Prefixes    int    `json:"prefixes"`
	BFD         string `json:"bfd,omitempty"`
	// Password is true when the BGPPeer sets a TCP MD5 password.
	Password bool `json:"password,omitempty"`
	// Carries is true when a route of the address goes to this peer.
	Carries bool `json:"carries"`
}

// EventLine is a recent Warning event of the Service.
type EventLine struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	Last    time.Time `json:"last"`
	From    string    `json:"from,omitempty"`
}

// maxWarnings is how many recent Warning events a report shows.
const maxWarnings = 5

// ExplainService explains the Service key ("namespace/name") in w.
func ExplainService(w *World, key string) (ServiceReport, error) {
	svc := w.service(key)
	if svc == nil {
		return ServiceReport{}, fmt.Errorf("service %s not found", key)
	}
	rep := ServiceReport{Service: key, ExternalTrafficPolicy: string(svc.Spec.ExternalTrafficPolicy)}
	rep.Allocated = condition(svc, svcstatus.ConditionType)
	rep.Announced = condition(svc, svcstatus.ConditionAnnounced)
	rep.Warnings = warnings(w.Events, svc)
	switch {
	case svc.Spec.Type != corev1.ServiceTypeLoadBalancer:
		rep.Cause = fmt.Sprintf("not a LoadBalancer Service (type %s): Herald serves only type LoadBalancer", svc.Spec.Type)
		return rep, nil
	case !svc.DeletionTimestamp.IsZero():
		rep.Cause = "being deleted"
		return rep, nil
	case !svcstatus.Handles(svc, w.OnlyClass):
		cls := "none"
		if svc.Spec.LoadBalancerClass != nil {
			cls = *svc.Spec.LoadBalancerClass
		}
		rep.Cause = fmt.Sprintf("not Herald's: loadBalancerClass %s (Herald's is %s)", cls, svcstatus.ClassName)
		return rep, nil
	}
	resolved := config.ParseKeepingLastValid(w.Config)
	cfg := resolved.Config
	addrs := svcstatus.Addrs(svc)
	if np := cfg.Pool(svcstatus.NodePool(svc)); np != nil && np.NodeAddresses != nil {
		rep.OK = len(addrs) > 0
		rep.Addresses = serviceLB(w, addrs, np.Name)
		rep.Cause = fmt.Sprintf("served by ServiceLB from node-address pool %s: %s", np.Name, serviceLBCause(rep.Addresses))
		if len(addrs) == 0 {
			rep.Cause = fmt.Sprintf("placed in node-address pool %s, but no node serves it yet: %s", np.Name, allocText(rep.Allocated))
		}
		return rep, nil
	}
	if len(addrs) == 0 {
		rep.Cause = "no address: " + allocText(rep.Allocated)
		return rep, nil
	}

	alive := w.readySpeakers()
	rep.ReadySpeakers = alive
	in := inputs.Build(inputs.Snapshot{Config: cfg, Services: w.Services, Slices: w.Slices, Nodes: w.Nodes, Alive: alive, OnlyClass: w.OnlyClass})
	res := plan.Compute(in)
	x := explainer{w: w, cfg: cfg, in: in, res: res, key: key, alive: alive}
	for _, a := range addrs {
		rep.Addresses = append(rep.Addresses, x.address(a))
	}
	rep.Cause, rep.OK = cause(rep.Addresses)
	return rep, nil
}

// explainer holds what every address of one Service is explained with.
type explainer struct {
	w     *World
	cfg   *config.Config
	in    plan.Inputs
	res   plan.Result
	key   string
	alive []string
}

func (x *explainer) address(a netip.Addr) AddressReport {
	ar := AddressReport{Address: a.String(), Pool: poolOf(x.cfg, a)}
	st := x.res.AddressState(a)
	win, l2 := x.res.L2Winner(a)
	ar.BGPNodes = x.res.BGPNodes(a)
	switch {
	case st.L2Applies && st.BGPApplies:
		ar.Mode = "L2+BGP"
	case st.L2Applies:
		ar.Mode = "L2"
	case st.BGPApplies:
		ar.Mode = "BGP"
	default:
		ar.Mode = "none"
	}
	ar.Announced = st.L2 || st.BGP
	if l2 {
		ar.L2Node = win.Node
		ar.Interfaces = x.interfaces(win)
	}
	ar.Reason, ar.Why = string(st.Reason), st.Sentence
	// Per-node lines only where a node's part decides: a reason about
	// the configuration or the endpoints as a whole needs none.
	l2Nodes := st.L2Applies && (st.L2 || st.Reason == plan.NoEligibleNode)
	bgpNodes := st.BGPApplies && (st.BGP || st.Reason == plan.NoEligibleNode || st.Reason == plan.NoBGPPeer)
	if !l2Nodes && !bgpNodes {
		return ar
	}
	holders := holding(x.in.Services, a)
	for _, n := range sortedNodes(x.in.Nodes) {
		nr := NodeReport{Node: n.Name}
		if l2Nodes {
			nr.L2, nr.Why = x.l2Node(a, n, holders, win.Node, ar.Pool)
		}
		if bgpNodes {
			var why string
			nr.BGP, why, nr.Sessions = x.bgpNode(a, n, holders, ar.BGPNodes, ar.Pool)
			if nr.Why == "" || (nr.L2 != "announces" && nr.BGP == "advertises") {
				nr.Why = why
			}
		}
		ar.Nodes = append(ar.Nodes, nr)
	}
	return ar
}

// interfaces returns the interfaces the elected node answers on: its
// ServiceL2Status's, else the advertisement's.
func (x *explainer) interfaces(win plan.L2Announcement) []string {
	for _, st := range x.w.L2Statuses {
		if st.Status.Node == win.Node {
			return st.Status.Interfaces
		}
	}
	return win.Interfaces
}

// l2Node says whether node n announces a over layer 2, or why not. The
// planner decides whether the node is a candidate (it is run with the
// Services holding a and n as the only node, alive: n is a candidate when
// it is then elected); the node's own facts name the reason when it is
// not.
func (x *explainer) l2Node(a netip.Addr, n plan.Node, holders []plan.Service, winner, pool string) (string, string) {
	if n.Name == winner {
		return "announces", ""
	}
	sub := x.in
	sub.Services, sub.Nodes, sub.Alive = holders, []plan.Node{n}, []string{n.Name}
	if w, ok := plan.Compute(sub).L2Winner(a); !ok || w.Node != n.Name {
		return "no", notCandidate(n, holders, fmt.Sprintf("no L2Advertisement of pool %s selects the node (nodeSelectors)", pool))
	}
	if !slices.Contains(x.alive, n.Name) {
		return "no", x.noSpeaker(n.Name)
	}
	if winner == "" {
		return "candidate", "eligible"
	}
	return "candidate", "eligible; the election chose " + winner
}

// bgpNode says whether node n advertises a, or why not, and lists its
// sessions.
func (x *explainer) bgpNode(a netip.Addr, n plan.Node, holders []plan.Service, advertising []string, pool string) (string, string, []SessionReport) {
	d := x.res.BGPForAddress(n.Name, a)
	if slices.Contains(advertising, n.Name) {
		return "advertises", "", x.sessions(n.Name, a, d)
	}
	if len(d.Sessions) == 0 {
		return "no", notCandidate(n, holders, "no BGPPeer selects the node (nodeSelectors)"), nil
	}
	return "no", notCandidate(n, holders, fmt.Sprintf("no BGPAdvertisement of pool %s selects the node for its peers (nodeSelectors, peers)", pool)), nil
}

// notCandidate names why node n may not announce an address held by
// holders: its own state, the endpoints of a Local Service, or else.
func notCandidate(n plan.Node, holders []plan.Service, otherwise string) string {
	if why := eligible.Reason(n.Excluded, n.NetworkUnavailable); why != "" {
		if n.Excluded {
			return "excluded: " + why
		}
		return why
	}
	for _, s := range holders {
		if s.Local && !slices.Contains(s.EndpointNodes, n.Name) {
			return "externalTrafficPolicy Local, and no ready endpoint of " + s.Key + " on the node"
		}
	}
	return otherwise
}

// noSpeaker says why node's speaker does not count.
func (x *explainer) noSpeaker(node string) string {
	p := x.w.speakerPod(node)
	switch {
	case p == nil:
		return "no speaker pod on the node"
	case !p.DeletionTimestamp.IsZero():
		return "the speaker pod " + p.Name + " is terminating"
	default:
		return fmt.Sprintf("the speaker pod %s is not Ready (phase %s)", p.Name, p.Status.Phase)
	}
}

// sessions lists node's BGP sessions with their state, and whether a route
// of a goes to each.
func (x *explainer) sessions(node string, a netip.Addr, d plan.BGPDesired) []SessionReport {
	out := nodeSessions(x.w, node, d.Sessions)
	for i, s := range d.Sessions {
		out[i].Carries = slices.ContainsFunc(s.Peer.Routes, func(r desired.Route) bool { return r.Prefix.Contains(a) })
	}
	return out
}

// nodeSessions lists the sessions the plan gives node, with the state its
// SpeakerStatus reports ("unknown" for a session it does not list).
func nodeSessions(w *World, node string, sessions []plan.BGPSession) []SessionReport {
	st := w.speakerStatus(node)
	var out []SessionReport
	for i := range sessions {
		s := &sessions[i]
		sr := SessionReport{Peer: s.Name, Address: s.Peer.Address.String(), State: "unknown", Password: s.PasswordSecret != (plan.SecretRef{})}
		if st != nil {
			for _, bs := range st.Status.BGPSessions {
				if bs.Peer == s.Name && bs.Address == sr.Address {
					sr.State, sr.Established, sr.Prefixes, sr.BFD = bs.State, bs.Established, bs.Prefixes, bs.BFD
				}
			}
		}
		out = append(out, sr)
	}
	return out
}

// cause is the report's first line, and whether all is well.
func cause(addrs []AddressReport) (string, bool) {
	var served []string
	for _, a := range addrs {
		if !a.Announced {
			msg := a.Address + " is not announced: " + a.Why
			if g := groupWhy(a.Nodes); g != "" {
				msg = a.Address + " is not announced: no node may announce it: " + g
			}
			return msg, false
		}
		if len(a.BGPNodes) > 0 && a.L2Node == "" {
			if msg, ok := bgpReach(a); !ok {
				return msg, false
			}
		}
		served = append(served, servedText(a))
	}
	return "announced: " + strings.Join(served, "; "), true
}

// maxCauses is how many distinct reasons a cause line names.
const maxCauses = 3

// groupWhy says why the nodes do not announce, one reason with its nodes
// at a time, in the order the nodes first give them.
func groupWhy(nodes []NodeReport) string {
	var order []string
	by := map[string][]string{}
	for _, n := range nodes {
		if n.Why == "" {
			continue
		}
		if by[n.Why] == nil {
			order = append(order, n.Why)
		}
		by[n.Why] = append(by[n.Why], n.Node)
	}
	var parts []string
	for i, why := range order {
		if i == maxCauses {
			parts = append(parts, fmt.Sprintf("and %d more reasons below", len(order)-maxCauses))
			break
		}
		parts = append(parts, nodeList(by[why])+": "+why)
	}
	return strings.Join(parts, "; ")
}

// nodeList names up to five nodes and counts the rest.
func nodeList(nodes []string) string {
	if len(nodes) <= 5 {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:5], ", "), len(nodes)-5)
}

// bgpReach says whether a BGP address reaches a router: some session of
// an advertising node that carries it is established.
func bgpReach(a AddressReport) (string, bool) {
	type key struct{ peer, state string }
	var order []key
	by := map[key][]string{}
	password := map[string]bool{}
	known := false
	for _, n := range a.Nodes {
		for _, s := range n.Sessions {
			if !s.Carries {
				continue
			}
			if s.Established {
				return "", true
			}
			if s.State != "unknown" {
				known = true
			}
			k := key{s.Peer, s.State}
			if by[k] == nil {
				order = append(order, k)
			}
			by[k] = append(by[k], n.Node)
			password[s.Peer] = password[s.Peer] || s.Password
		}
	}
	if !known {
		return "", true // no speaker reports its sessions: nothing to say
	}
	var down []string
	for _, k := range order {
		d := fmt.Sprintf("peer %s is %s on %s", k.peer, k.state, nodeList(by[k]))
		if password[k.peer] {
			d += " (it has a TCP MD5 password: check that it matches the router's)"
		}
		down = append(down, d)
	}
	return fmt.Sprintf("%s is advertised by %s, but no session that carries it is established: %s", a.Address, countNodes(len(a.BGPNodes)), strings.Join(down, "; ")), false
}

func servedText(a AddressReport) string {
	var parts []string
	if a.L2Node != "" {
		parts = append(parts, "by "+a.L2Node+" over layer 2")
	}
	if len(a.BGPNodes) > 0 {
		parts = append(parts, "by "+countNodes(len(a.BGPNodes))+" over BGP")
	}
	return a.Address + " " + strings.Join(parts, " and ")
}

func countNodes(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

func allocText(c *Condition) string {
	if c == nil {
		return "the controller has written no status (is it running?)"
	}
	return c.Reason + ": " + c.Message
}

// serviceLB reports the addresses of a Service in a node-address pool:
// each is a node's own.
func serviceLB(w *World, addrs []netip.Addr, pool string) []AddressReport {
	var out []AddressReport
	for _, a := range addrs {
		ar := AddressReport{Address: a.String(), Pool: pool, Mode: "ServiceLB", Announced: true}
		for i := range w.Nodes {
			if slices.Contains(nodeaddr.Of(&w.Nodes[i], corev1.NodeInternalIP), a) || slices.Contains(nodeaddr.Of(&w.Nodes[i], corev1.NodeExternalIP), a) {
				ar.ServiceLBNodes = append(ar.ServiceLBNodes, w.Nodes[i].Name)
			}
		}
		out = append(out, ar)
	}
	return out
}

func serviceLBCause(addrs []AddressReport) string {
	var parts []string
	for _, a := range addrs {
		parts = append(parts, a.Address+" on "+strings.Join(a.ServiceLBNodes, ", "))
	}
	return strings.Join(parts, "; ")
}

func condition(svc *corev1.Service, typ string) *Condition {
	c := meta.FindStatusCondition(svc.Status.Conditions, typ)
	if c == nil {
		return nil
	}
	return &Condition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
}

// warnings returns the Service's recent Warning events, newest first, one
// per reason.
func warnings(evs []corev1.Event, svc *corev1.Service) []EventLine {
	var out []EventLine
	seen := map[string]bool{}
	for _, e := range eventsOf(evs, svc.UID) {
		if e.Type != corev1.EventTypeWarning || seen[e.Reason] {
			continue
		}
		seen[e.Reason] = true
		n := e.Count
		if e.Series != nil {
			n = e.Series.Count
		}
		out = append(out, EventLine{Reason: e.Reason, Message: e.Message, Count: max(n, 1), Last: eventTime(e), From: eventSource(e)})
		if len(out) == maxWarnings {
			break
		}
	}
	return out
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func eventSource(e corev1.Event) string {
	if e.ReportingController != "" {
		return e.ReportingController
	}
	return e.Source.Component
}

// poolOf names the address pool holding a, "" when none does.
func poolOf(cfg *config.Config, a netip.Addr) string {
	for _, p := range cfg.Pools {
		for _, r := range p.Ranges {
			if r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0 {
				return p.Name
			}
		}
	}
	return ""
}

// holding returns the Services holding a.
func holding(svcs []plan.Service, a netip.Addr) []plan.Service {
	var out []plan.Service
	for _, s := range svcs {
		if slices.Contains(s.Addrs, a) {
			out = append(out, s)
		}
	}
	return out
}

func sortedNodes(nodes []plan.Node) []plan.Node {
	out := slices.Clone(nodes)
	slices.SortFunc(out, func(a, b plan.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}
