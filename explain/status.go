package explain

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/speaker/inputs"
	"github.com/herald-lb/herald/speaker/plan"
)

// StatusReport is the state of the whole install.
type StatusReport struct {
	Pools []PoolReport `json:"pools"`
	// Waiting are the Services without an address, by the controller's
	// reason.
	Waiting []WaitingReport `json:"waiting,omitempty"`
	// Unannounced are the addresses no node announces (the plan's view
	// with the Ready speakers).
	Unannounced []UnannouncedReport `json:"unannounced,omitempty"`
	Speakers    []SpeakerReport     `json:"speakers"`
	// Configuration lists the configuration objects that are not served
	// as written, or served with warnings.
	Configuration []ConfigReport `json:"configuration,omitempty"`
}

// PoolReport is one pool's use, as the controller counts it in the pool's
// status.
type PoolReport struct {
	Name string `json:"name"`
	// Kind is "addresses" or "node-addresses".
	Kind string `json:"kind"`
	// Serving is current, last-valid (invalid as written; its last valid
	// spec is used) or none.
	Serving       string `json:"serving"`
	AssignedIPv4  int64  `json:"assignedIPv4"`
	AvailableIPv4 int64  `json:"availableIPv4"`
	AssignedIPv6  int64  `json:"assignedIPv6"`
	AvailableIPv6 int64  `json:"availableIPv6"`
	// Services is the number of Services holding addresses of the pool
	// (or placed in it, for node-address pools).
	Services int `json:"services"`
}

// WaitingReport groups the Services that wait for an address by reason.
type WaitingReport struct {
	Reason   string   `json:"reason"`
	Count    int      `json:"count"`
	Services []string `json:"services"` // the first maxListed, sorted
	// Message is the condition's message of the first one.
	Message string `json:"message"`
}

// UnannouncedReport is an address no node announces.
type UnannouncedReport struct {
	Address  string   `json:"address"`
	Services []string `json:"services"`
	Reason   string   `json:"reason"`
}

// SpeakerReport is one node's speaker.
type SpeakerReport struct {
	Node  string `json:"node"`
	Pod   string `json:"pod,omitempty"`
	Ready bool   `json:"ready"`
	// Reported is false when the node has no SpeakerStatus: the fields
	// below are then unknown.
	Reported bool `json:"reported"`
	// Members is how many speakers the node's memberlist sees alive
	// (itself included), of ReadySpeakers Ready speaker pods.
	Members       int             `json:"members"`
	ReadySpeakers int             `json:"readySpeakers"`
	L2Addresses   int             `json:"l2Addresses"`
	Sessions      []SessionReport `json:"sessions,omitempty"`
}

// ConfigReport is a configuration object with problems.
type ConfigReport struct {
	Kind     string   `json:"kind"`
	Name     string   `json:"name"`
	Serving  string   `json:"serving"`
	Problems []string `json:"problems"`
}

// maxListed is how many Services a waiting or unannounced line names.
const maxListed = 10

// Status reports the pools, the waiting Services, the unannounced
// addresses, the speakers and the configuration's problems in w.
func Status(w *World) StatusReport {
	resolved := config.ParseKeepingLastValid(w.Config)
	cfg := resolved.Config
	var rep StatusReport

	holders := map[string]int{}
	var waiting []*corev1.Service
	for i := range w.Services {
		svc := &w.Services[i]
		if !svcstatus.Handles(svc, w.OnlyClass) {
			continue
		}
		if np := svcstatus.NodePool(svc); np != "" {
			holders[np]++
			continue
		}
		addrs := svcstatus.Addrs(svc)
		if len(addrs) == 0 {
			if c := svcstatus.Condition(svc); c != nil && c.Status == metav1.ConditionFalse {
				waiting = append(waiting, svc)
			}
			continue
		}
		if p := poolOf(cfg, addrs[0]); p != "" {
			holders[p]++
		}
	}
	for _, p := range w.Config.Pools {
		st := resolved.States[config.ObjectRef{Kind: config.KindIPAddressPool, Name: p.Name}]
		kind := "addresses"
		if p.Spec.NodeAddresses != nil {
			kind = "node-addresses"
		}
		rep.Pools = append(rep.Pools, PoolReport{Name: p.Name, Kind: kind, Serving: st.Serving.String(),
			AssignedIPv4: p.Status.AssignedIPv4, AvailableIPv4: p.Status.AvailableIPv4,
			AssignedIPv6: p.Status.AssignedIPv6, AvailableIPv6: p.Status.AvailableIPv6,
			Services: holders[p.Name]})
	}
	slices.SortFunc(rep.Pools, func(a, b PoolReport) int { return strings.Compare(a.Name, b.Name) })
	rep.Waiting = groupWaiting(waiting)

	alive := w.readySpeakers()
	in := inputs.Build(inputs.Snapshot{Config: cfg, Services: w.Services, Slices: w.Slices, Nodes: w.Nodes, Alive: alive, OnlyClass: w.OnlyClass})
	res := plan.Compute(in)
	for _, u := range res.Unannounced() {
		rep.Unannounced = append(rep.Unannounced, UnannouncedReport{Address: u.Addr.String(), Services: u.Services, Reason: string(u.Reason)})
	}
	rep.Speakers = speakers(w, res, alive)

	for ref, st := range resolved.States {
		if st.Serving == config.ServingCurrent && len(st.Problems) == 0 {
			continue
		}
		cr := ConfigReport{Kind: ref.Kind, Name: ref.Name, Serving: st.Serving.String()}
		for _, p := range st.Problems {
			cr.Problems = append(cr.Problems, p.Severity.String()+": "+fieldMessage(p))
		}
		rep.Configuration = append(rep.Configuration, cr)
	}
	slices.SortFunc(rep.Configuration, func(a, b ConfigReport) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return rep
}

func fieldMessage(p config.Problem) string {
	if p.Field == "" {
		return p.Message
	}
	return p.Field + ": " + p.Message
}

func groupWaiting(svcs []*corev1.Service) []WaitingReport {
	by := map[string]*WaitingReport{}
	var out []WaitingReport
	slices.SortFunc(svcs, func(a, b *corev1.Service) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, s := range svcs {
		c := svcstatus.Condition(s)
		g := by[c.Reason]
		if g == nil {
			g = &WaitingReport{Reason: c.Reason, Message: c.Message}
			by[c.Reason] = g
		}
		g.Count++
		if len(g.Services) < maxListed {
			g.Services = append(g.Services, s.Namespace+"/"+s.Name)
		}
	}
	for _, g := range by {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b WaitingReport) int { return strings.Compare(a.Reason, b.Reason) })
	return out
}

// speakers reports every node: its speaker pod, and what its SpeakerStatus
// says.
func speakers(w *World, res plan.Result, alive []string) []SpeakerReport {
	var out []SpeakerReport
	for i := range w.Nodes {
		n := w.Nodes[i].Name
		sr := SpeakerReport{Node: n, ReadySpeakers: len(alive), Ready: slices.Contains(alive, n)}
		if p := w.speakerPod(n); p != nil {
			sr.Pod = p.Name
		}
		if st := w.speakerStatus(n); st != nil {
			sr.Reported = true
			sr.Members, sr.L2Addresses = st.Status.Members, st.Status.L2Addresses
			sr.Sessions = nodeSessions(w, n, res.BGPForAddress(n, netip.Addr{}).Sessions)
		}
		out = append(out, sr)
	}
	slices.SortFunc(out, func(a, b SpeakerReport) int { return strings.Compare(a.Node, b.Node) })
	return out
}
