// Package endpoints is the one rule for which nodes have a usable endpoint of
// a Service, read by every side that needs it: the speaker (which nodes may
// announce a Service with externalTrafficPolicy Local) and the controller's
// ServiceLB status (which nodes serve a node-address Service).
//
// The rule follows kube-proxy's for Local traffic: the nodes with a ready
// endpoint; when no endpoint of the Service is ready, the nodes with a
// serving one (pods that are terminating but still answer, so a rolling
// update of the last pods does not drop the address). A nil Ready counts as
// ready and a nil Serving as the endpoint's readiness, as the EndpointSlice
// API documents for unknown states. Endpoints without a node name are
// ignored.
package endpoints

import (
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// Nodes are the sorted, distinct nodes with a usable endpoint in the slices
// of one Service (the caller selected them; their labels are not read).
func Nodes(eps []discoveryv1.EndpointSlice) []string {
	var acc nodes
	for i := range eps {
		acc.add(&eps[i])
	}
	return acc.usable()
}

// ByService maps "namespace/service" to Nodes of that Service's slices, for
// slices of many Services. Slices without the service-name label are
// ignored; a Service with no usable endpoint has no entry.
func ByService(eps []discoveryv1.EndpointSlice) map[string][]string {
	byKey := make(map[string]*nodes, len(eps))
	for i := range eps {
		sl := &eps[i]
		name := sl.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			continue
		}
		key := sl.Namespace + "/" + name
		acc := byKey[key]
		if acc == nil {
			acc = &nodes{}
			byKey[key] = acc
		}
		acc.add(sl)
	}
	out := make(map[string][]string, len(byKey))
	for k, acc := range byKey {
		if list := acc.usable(); len(list) > 0 {
			out[k] = list
		}
	}
	return out
}

// nodes accumulates one Service's endpoints by condition.
type nodes struct{ ready, serving []string }

func (n *nodes) add(sl *discoveryv1.EndpointSlice) {
	for _, ep := range sl.Endpoints {
		if ep.NodeName == nil || *ep.NodeName == "" {
			continue
		}
		ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
		serving := ready
		if ep.Conditions.Serving != nil {
			serving = *ep.Conditions.Serving
		}
		if ready {
			n.ready = append(n.ready, *ep.NodeName)
		}
		if serving {
			n.serving = append(n.serving, *ep.NodeName)
		}
	}
}

// usable applies the rule: ready nodes, else serving ones; sorted, distinct.
func (n *nodes) usable() []string {
	list := n.ready
	if len(list) == 0 {
		list = n.serving
	}
	if len(list) == 0 {
		return nil
	}
	slices.Sort(list)
	return slices.Compact(list)
}
