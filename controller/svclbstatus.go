package controller

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/endpoints"
	"github.com/herald-lb/herald/config/nodeaddr"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
)

// The pure half of ServiceLB status: which nodes serve a Service placed in a
// node-address pool, at which addresses, and why none does. No client, no
// clock; the reconciler feeds it what its caches hold.

// servingInput is what the status of a node-address Service depends on.
type servingInput struct {
	svc *corev1.Service
	// addressType is the pool's spec.nodeAddresses.addressType
	// (v1beta1.NodeExternalIP or v1beta1.NodeInternalIP; "" is ExternalIP).
	addressType string
	// selected are the nodes that qualify for the Service's pod by the
	// pool's selector and k3s's labels (svclb.NodeSelection).
	selected []string
	// pods are the svclb pods of the Service (its UID label).
	pods []corev1.Pod
	// nodes are the cluster's nodes.
	nodes []corev1.Node
	// slices are the Service's EndpointSlices (read for Local only).
	slices []discoveryv1.EndpointSlice
}

// serving is who serves a node-address Service.
type serving struct {
	// nodes serving the Service, sorted.
	nodes []string
	// addrs are the status addresses: the serving nodes' addresses of the
	// chosen type, of the Service's families, ordered by ipFamilies, sorted
	// within a family.
	addrs []netip.Addr
	// failures describe the svclb pods the kubelets failed (podFailure),
	// sorted and unique.
	failures []string
	// why no node serves it (empty when some node does).
	why string
	// warning: why is a problem for the operator (no node matches), not a
	// wait (pods starting).
	warning bool
}

// servingNodes decides which nodes serve the Service: those with a ready
// svclb pod of this Service (Ready condition true, not being deleted) that
// exist, still match the pool (selected), may carry load-balancer traffic
// (config/eligible: the speakers' rule) and are not cordoned, and for
// externalTrafficPolicy Local that also have a usable endpoint of the Service
// (config/endpoints: the rule the speaker applies too).
//
// Addresses: with addressType InternalIP, the nodes' InternalIPs; otherwise
// the nodes' ExternalIPs when any serving node has one of the Service's
// families, else their InternalIPs.
func servingNodes(in servingInput) serving {
	svc := in.svc
	nodes := map[string]*corev1.Node{}
	for i := range in.nodes {
		nodes[in.nodes[i].Name] = &in.nodes[i]
	}
	selected := map[string]bool{}
	for _, n := range in.selected {
		selected[n] = true
	}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	var withEndpoint map[string]bool
	if local {
		withEndpoint = map[string]bool{}
		for _, n := range endpoints.Nodes(in.slices) {
			withEndpoint[n] = true
		}
	}

	var readyNodes, cordoned, unfit, serve []string
	var pending []*corev1.Pod
	var out0 serving
	for i := range in.pods {
		p := &in.pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if p.Status.Phase == corev1.PodFailed {
			// The kubelet refused or lost it (SysctlForbidden, evicted, ...):
			// the DaemonSet controller replaces it, again and again while the
			// cause lasts. Reported apart, so the condition does not change
			// with every replacement.
			out0.failures = append(out0.failures, podFailure(p))
			continue
		}
		if p.Spec.NodeName == "" || !eligible.PodReady(p) {
			pending = append(pending, p)
			continue
		}
		n := nodes[p.Spec.NodeName]
		if n == nil || !selected[n.Name] {
			// Gone, or no longer matching the pool (its pod is not
			// evicted at once: the affinity is IgnoredDuringExecution
			// until the DaemonSet controller removes it).
			continue
		}
		if why := eligible.Why(n); why != "" {
			// The rule the speakers follow (config/eligible): the label
			// node.kubernetes.io/exclude-from-external-load-balancers or
			// NetworkUnavailable takes the node out of every load balancer.
			unfit = append(unfit, n.Name+": "+why)
			continue
		}
		if n.Spec.Unschedulable {
			// ServiceLB's own: a drain begins with a cordon (the speakers
			// go on announcing from a cordoned node; docs/svclb.md).
			cordoned = append(cordoned, n.Name)
			continue
		}
		readyNodes = append(readyNodes, n.Name)
		if local && !withEndpoint[n.Name] {
			continue
		}
		serve = append(serve, n.Name)
	}
	sort.Strings(serve)
	serve = slices.Compact(serve)

	families := svclb.ServiceFamilies(svc)
	out := serving{failures: uniqueSorted(out0.failures)}
	if len(serve) > 0 {
		want := corev1.NodeInternalIP
		if in.addressType != v1beta1.NodeInternalIP && anyAddress(serve, nodes, corev1.NodeExternalIP, families) {
			want = corev1.NodeExternalIP
		}
		var addrs []netip.Addr
		for _, name := range serve {
			addrs = append(addrs, nodeaddr.Of(nodes[name], want)...)
		}
		slices.SortFunc(addrs, netip.Addr.Compare)
		out.addrs = svclb.FilterFamilies(slices.Compact(addrs), families)
		if len(out.addrs) > 0 {
			out.nodes = serve
			return out
		}
		out.why = fmt.Sprintf("nodes %s have no %s of the Service's families %v", nameList(serve), want, families)
		out.warning = true
		return out
	}

	switch {
	case len(in.selected) == 0:
		out.why, out.warning = "no node matches the pool's node selector (and the k3s enablelb/lbpool labels)", true
	case len(readyNodes) > 0 && local:
		out.why = fmt.Sprintf("externalTrafficPolicy is Local and no node with a ready svclb pod (%s) has a usable endpoint of the Service (ready, or serving while none is ready)", nameList(uniqueSorted(readyNodes)))
	case len(cordoned) > 0 && len(unfit) == 0:
		out.why = fmt.Sprintf("every node with a ready svclb pod is cordoned (%s)", nameList(uniqueSorted(cordoned)))
	case len(unfit) > 0:
		out.why = fmt.Sprintf("no node with a ready svclb pod may carry load-balancer traffic (%s", nameList(uniqueSorted(unfit)))
		if len(cordoned) > 0 {
			out.why += fmt.Sprintf("; cordoned: %s", nameList(uniqueSorted(cordoned)))
		}
		out.why += ")"
	default:
		// Pods not created yet, starting, or replaced after a failure: one
		// message for all of them, so that pods coming and going do not
		// rewrite the condition; the scheduler's reason when it gives one.
		out.why = fmt.Sprintf("waiting for svclb pods on %d matching nodes", len(in.selected))
		if msg := schedulerMessage(pending); msg != "" {
			out.why += ": " + msg
		}
	}
	return out
}

// podFailure describes a failed svclb pod for an event: its node, the
// kubelet's reason and message, and what to do about the one failure an
// operator meets on a cluster that is not k3s.
func podFailure(p *corev1.Pod) string {
	s := fmt.Sprintf("on node %s: %s", p.Spec.NodeName, p.Status.Reason)
	if p.Status.Message != "" {
		s += ": " + p.Status.Message
	}
	if p.Status.Reason == "SysctlForbidden" {
		s += " (the kubelets must allow the forwarding sysctls: allowedUnsafeSysctls [" +
			svclb.SysctlIPv4Forward + ", " + svclb.SysctlIPv6Forward +
			"] in the kubelet configuration, or --allowed-unsafe-sysctls; k3s agents allow them; see docs/svclb.md)"
	}
	return s
}

// schedulerMessage is the scheduler's explanation on the first pending pod
// (by name) that has one: its PodScheduled condition's message.
func schedulerMessage(pods []*corev1.Pod) string {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range sorted {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				return c.Message
			}
		}
	}
	return ""
}

func anyAddress(names []string, nodes map[string]*corev1.Node, t corev1.NodeAddressType, families []corev1.IPFamily) bool {
	for _, n := range names {
		if len(svclb.FilterFamilies(nodeaddr.Of(nodes[n], t), families)) > 0 {
			return true
		}
	}
	return false
}

// maxListed bounds the names a message lists: a condition message holds at
// most 32 KiB and an event note 1 KiB, and a large cluster has more nodes.
const maxListed = 10

// nameList joins names with ", ", the first maxListed of them and how many
// more.
func nameList(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}

func uniqueSorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}

// daemonSetService is the Service a Herald DaemonSet (or pod) was made for,
// from its labels; ok is false when the labels do not name one.
func daemonSetService(labels map[string]string) (nn types.NamespacedName, uid types.UID, ok bool) {
	nn = types.NamespacedName{Namespace: labels[v1beta1.LabelServiceNamespace], Name: labels[v1beta1.LabelServiceName]}
	uid = types.UID(labels[v1beta1.LabelServiceUID])
	return nn, uid, nn.Namespace != "" && nn.Name != "" && uid != ""
}

// staleDaemonSets are the DaemonSets, among those labelled for one Service,
// that must go: every one when want is nil (the Service is gone or no longer
// in a node-address pool), otherwise those that are not want (another name:
// a recreated Service's predecessor, whose UID differs).
func staleDaemonSets(dss []appsv1.DaemonSet, want *appsv1.DaemonSet) []*appsv1.DaemonSet {
	var out []*appsv1.DaemonSet
	for i := range dss {
		ds := &dss[i]
		if want != nil && ds.Name == want.Name && ds.Namespace == want.Namespace {
			continue
		}
		out = append(out, ds)
	}
	return out
}

// orphanDaemonSets are Herald DaemonSets no Service can claim: labels that
// name no Service, or a Service that does not exist with that UID. uidOf
// reports the UID of the Service of that name ("" when there is none), and
// known false when it could not tell (a failed read): such a DaemonSet is
// kept. The others belong to a live Service, whose own sync keeps or deletes
// them.
func orphanDaemonSets(dss []appsv1.DaemonSet, uidOf func(types.NamespacedName) (uid types.UID, known bool)) []*appsv1.DaemonSet {
	var out []*appsv1.DaemonSet
	for i := range dss {
		nn, uid, ok := daemonSetService(dss[i].Labels)
		if !ok {
			out = append(out, &dss[i])
			continue
		}
		if have, known := uidOf(nn); known && have != uid {
			out = append(out, &dss[i])
		}
	}
	return out
}
