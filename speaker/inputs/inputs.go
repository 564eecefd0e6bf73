// Package inputs turns the API objects a speaker watches into the planner's
// inputs: which Services are announced, with which addresses and endpoint
// nodes, and what the planner needs of each Node. It is pure, and it is the
// one definition the speakers and `kubectl herald` (package explain) plan
// from.
package inputs

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/endpoints"
	"github.com/herald-lb/herald/config/nodeaddr"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/speaker/plan"
)

// Snapshot is what the speaker's cache holds at one moment: the raw objects
// the plan depends on. Build turns it into plan.Inputs.
type Snapshot struct {
	Config    *config.Config
	Services  []corev1.Service
	Slices    []discoveryv1.EndpointSlice
	Nodes     []corev1.Node
	Alive     []string
	OnlyClass bool
}

// Build converts a snapshot into the planner's inputs. It is pure:
// Services Herald does not serve (type, class, being deleted) or that hold
// no address are left out; endpoints are reduced to the nodes that have a
// usable one (config/endpoints: the rule the ServiceLB status uses too).
func Build(s Snapshot) plan.Inputs {
	in := plan.Inputs{Config: s.Config, Alive: slices.Clone(s.Alive)}
	eps := endpoints.ByService(s.Slices)
	for i := range s.Services {
		svc := &s.Services[i]
		if !svcstatus.Handles(svc, s.OnlyClass) {
			continue
		}
		addrs := svcstatus.Addrs(svc)
		if len(addrs) == 0 || inNodePool(s.Config, svc) {
			continue
		}
		key := svc.Namespace + "/" + svc.Name
		in.Services = append(in.Services, plan.Service{
			Key:           key,
			Addrs:         addrs,
			Local:         svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
			EndpointNodes: eps[key],
			Labels:        labels.Set(svc.Labels),
		})
	}
	for i := range s.Nodes {
		in.Nodes = append(in.Nodes, Node(&s.Nodes[i]))
	}
	return in
}

// inNodePool reports whether the Service is placed in a node-address pool:
// the addresses in its status are then the serving nodes' own (ServiceLB),
// which no speaker announces, even when a node's address lies in an address
// pool's range.
func inNodePool(cfg *config.Config, svc *corev1.Service) bool {
	if cfg == nil {
		return false
	}
	p := cfg.Pool(svcstatus.NodePool(svc))
	return p != nil && p.NodeAddresses != nil
}

// Node is what the planner needs of a Node.
func Node(n *corev1.Node) plan.Node {
	out := plan.Node{Name: n.Name, Labels: labels.Set(n.Labels), Excluded: eligible.Excluded(n),
		NetworkUnavailable: eligible.NetworkUnavailable(n)}
	out.Addrs = nodeaddr.Of(n, corev1.NodeInternalIP)
	return out
}
