// Package cachetrim holds the cache transforms of the speaker and the
// controller: functions the informers apply to every object before it enters
// the cache, which keep of each kind what Herald reads and drop the rest
// (managedFields, a Node's image list and system information, pod templates,
// endpoint addresses, annotations of other tools, ...). Each speaker caches
// every Service, EndpointSlice and Node of the cluster; what it holds of each
// is what it costs per Service and per node.
//
// Each function is a client-go TransformFunc (toolscache.TransformFunc, for
// controller-runtime's cache.Options.DefaultTransform and
// cache.ByObject.Transform): pure, idempotent, and it passes any other type
// through unchanged. The speaker only reads what it caches; the controller
// writes back what it reads, so its transforms are chosen so that no write
// computed against a cached object can remove a field the transform dropped:
//
//   - Services (ControllerService) are patched (JSON merge patches computed
//     from the cached object: the status with its lists, and the
//     herald.dev/ip-allocated-from-pool annotation). A merge patch replaces a
//     list whole, so the status is kept whole; it writes "annotations": null
//     when a map it had is left empty, so every annotation key is kept and
//     only the values Herald never reads are emptied.
//   - svclb DaemonSets are updated (Get, modify, Update): they lose only
//     their managedFields, which the API server keeps when a write carries
//     none.
//   - Nodes, EndpointSlices and svclb Pods are never written by Herald.
//
// What is read, and by whom, is listed at each function; a reader of a new
// field must be added there, with its test (cachetrim_test.go, and the
// speaker's and controller's own: the planner's and the ServiceLB status's
// inputs from trimmed objects equal those from whole ones).
package cachetrim

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/svcstatus"
)

// ReadAnnotationPrefixes are the annotation prefixes under which Herald reads
// a Service's annotations: its own (requests, the node-address pool it
// records, svclb settings), MetalLB's under both names, and k3s ServiceLB's
// (svclb priority class and tolerations).
var ReadAnnotationPrefixes = []string{
	"herald.dev/",
	"metallb.io/",
	"metallb.universe.tf/",
	"svccontroller.k3s.cattle.io/",
}

// ReadAnnotation reports whether Herald reads a Service annotation of this
// key (it is under one of ReadAnnotationPrefixes).
func ReadAnnotation(key string) bool {
	for _, p := range ReadAnnotationPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// ManagedFields drops metadata.managedFields, of any object with metadata
// (typed or unstructured): the default transform of both caches. Nothing in
// Herald reads them, and an object written back with Update or a patch keeps
// them: the API server keeps an object's managedFields when a write carries
// none (it resets them only when a write carries a list with one empty entry).
func ManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// SpeakerService keeps what a speaker reads of a Service (inputs.Build (speaker/inputs),
// config/svcstatus, its status writers and events):
//
//   - metadata: name, namespace, uid, resourceVersion, generation,
//     creationTimestamp, deletionTimestamp (the event reference and
//     svcstatus.Handles), labels (advertisements' serviceSelectors) and the
//     annotations Herald reads (ReadAnnotation: the node-address pool);
//   - spec: type, loadBalancerClass, externalTrafficPolicy;
//   - status.loadBalancer.ingress: each entry's ip;
//   - of status.conditions, the speakers' own, herald.dev/Announced, whole:
//     the reporter speaker compares what it would write with it (and keeps
//     its lastTransitionTime while the status holds).
//
// Of a Service that is not a LoadBalancer only its identity, type and the
// herald.dev/Announced condition are kept: the speaker skips it, but the
// reporter removes a condition it wrote before the type changed (a change of
// type is a new update, trimmed anew).
func SpeakerService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	out := &corev1.Service{TypeMeta: s.TypeMeta, ObjectMeta: identity(&s.ObjectMeta)}
	out.Spec.Type = s.Spec.Type
	for _, c := range s.Status.Conditions {
		if c.Type == svcstatus.ConditionAnnounced {
			out.Status.Conditions = []metav1.Condition{c}
			break
		}
	}
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return out, nil
	}
	out.Labels = s.Labels
	out.Annotations = readAnnotations(s.Annotations)
	out.Spec.LoadBalancerClass = s.Spec.LoadBalancerClass
	out.Spec.ExternalTrafficPolicy = s.Spec.ExternalTrafficPolicy
	if in := s.Status.LoadBalancer.Ingress; len(in) > 0 {
		out.Status.LoadBalancer.Ingress = make([]corev1.LoadBalancerIngress, len(in))
		for i := range in {
			out.Status.LoadBalancer.Ingress[i].IP = in[i].IP
		}
	}
	return out, nil
}

// ControllerService trims a Service for the controller, which reads most of
// it (the allocator's view: spec, labels, request annotations; the status
// contract; svclb.Build: ports, cluster IPs, families, source ranges, svclb
// annotations) and patches it. It drops managedFields and empties the value of
// every annotation Herald does not read (kubectl's last-applied-configuration
// is the large one), keeping the key: the annotation patch, computed against
// this object, then names only the key it changes, and never replaces the map.
// Spec and status are kept whole (a merge patch replaces status lists whole).
func ControllerService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	for k, v := range s.Annotations {
		if v != "" && !ReadAnnotation(k) {
			s.Annotations[k] = ""
		}
	}
	return s, nil
}

// EndpointSlice keeps what the rule of config/endpoints reads, for the
// speaker (Local Services) and the controller (node-address Services with
// Local): the identity (metadata as SpeakerService keeps it, without the
// generation), the
// kubernetes.io/service-name label (the Service it belongs to; the
// controller's cache selects on it), the address type and, of each endpoint
// with a node name, the node name and the ready and serving conditions (the
// serving one only when the endpoint is not ready). Endpoints without a node
// name, which the rule ignores, are dropped.
func EndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{TypeMeta: s.TypeMeta, ObjectMeta: identity(&s.ObjectMeta), AddressType: s.AddressType}
	// Every change of an endpoint bumps the slice's generation, which
	// nothing reads: kept, it would make every such change, even of what
	// is trimmed away, a change for the planner.
	out.Generation = 0
	if name, ok := s.Labels[discoveryv1.LabelServiceName]; ok {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: name}
	}
	n := 0
	for i := range s.Endpoints {
		if nn := s.Endpoints[i].NodeName; nn != nil && *nn != "" {
			n++
		}
	}
	if n > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, 0, n)
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			cond := discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready, Serving: ep.Conditions.Serving}
			if cond.Ready == nil || *cond.Ready {
				// The rule reads the serving nodes only when no endpoint of
				// the Service is ready, so a ready endpoint's serving flag
				// cannot change its result: dropped, its flaps are no
				// change for the planner.
				cond.Serving = nil
			}
			out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{NodeName: ep.NodeName, Conditions: cond})
		}
	}
	return out, nil
}

// Node keeps what the speaker (inputs.Node (speaker/inputs), its memberlist peers) and
// the controller (ServiceLB placement and status, its Node predicate) read of
// a Node: the identity, the labels, spec.unschedulable, status.addresses, and
// the NetworkUnavailable condition's type and status. Gone: the image list,
// nodeInfo, capacity, daemonEndpoints, volumes, config, taints, annotations,
// the other conditions and their heartbeat times.
func Node(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{TypeMeta: n.TypeMeta, ObjectMeta: identity(&n.ObjectMeta)}
	out.Labels = n.Labels
	out.Spec.Unschedulable = n.Spec.Unschedulable
	out.Status.Addresses = n.Status.Addresses
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
			break
		}
	}
	return out, nil
}

// SvclbPod keeps what the controller reads of its svclb pods (ServiceLB
// status and the pod-to-Service mapping): the identity, the labels,
// spec.nodeName, and the status's phase, reason, message and conditions
// (type, status, reason, message: Ready, and the scheduler's explanation in
// PodScheduled). The pod spec (containers, volumes, affinity) is the
// DaemonSet's template and is dropped.
func SvclbPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: identity(&p.ObjectMeta)}
	out.Labels = p.Labels
	out.Spec.NodeName = p.Spec.NodeName
	out.Status.Phase, out.Status.Reason, out.Status.Message = p.Status.Phase, p.Status.Reason, p.Status.Message
	if len(p.Status.Conditions) > 0 {
		out.Status.Conditions = make([]corev1.PodCondition, len(p.Status.Conditions))
		for i, c := range p.Status.Conditions {
			out.Status.Conditions[i] = corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
	}
	return out, nil
}

// identity is the metadata every trimmed object keeps: what names it (also in
// an event's reference) and its lifecycle.
func identity(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp,
	}
}

// readAnnotations are the annotations Herald reads, nil when none.
func readAnnotations(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if ReadAnnotation(k) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
