package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/eligible"
	"github.com/herald-lb/herald/config/v1beta1"
)

// World is what the reports are computed from: the objects Herald reads
// and writes, as the API server has them at one moment.
type World struct {
	// Namespace is Herald's install namespace (configuration, status
	// objects, speaker pods).
	Namespace string
	// OnlyClass is the controller's --only-class: Services without a
	// loadBalancerClass are then not Herald's.
	OnlyClass bool

	Services []corev1.Service
	Slices   []discoveryv1.EndpointSlice
	Nodes    []corev1.Node
	// Config are the configuration objects of Namespace, with their status.
	Config config.Objects
	// Speakers are the speaker pods.
	Speakers []corev1.Pod
	// SpeakerStatuses are the speakers' own reports, one per node.
	SpeakerStatuses []v1beta1.SpeakerStatus
	// L2Statuses and BGPStatuses are the status objects of the explained
	// Service only (empty for Status).
	L2Statuses  []v1beta1.ServiceL2Status
	BGPStatuses []v1beta1.ServiceBGPStatus
	// Events are the events about the explained Service (empty for
	// Status).
	Events []corev1.Event
}

// SpeakerSelector selects the chart's speaker pods.
var SpeakerSelector = labels.SelectorFromSet(labels.Set{
	"app.kubernetes.io/name":      "herald",
	"app.kubernetes.io/component": "speaker",
})

// Gather reads the World from the API server through c. When service is
// not empty ("namespace/name"), the status objects and events of that
// Service are read too. Every list is one call: at 10,000 Services and
// 1,000 nodes the Services, EndpointSlices and Nodes are the bulk of it.
func Gather(ctx context.Context, c client.Reader, namespace, service string, onlyClass bool) (*World, error) {
	w := &World{Namespace: namespace, OnlyClass: onlyClass}
	var svcs corev1.ServiceList
	var eps discoveryv1.EndpointSliceList
	var nodes corev1.NodeList
	var pods corev1.PodList
	var sts v1beta1.SpeakerStatusList
	for _, l := range []struct {
		what string
		list client.ObjectList
		opts []client.ListOption
	}{
		{"Services", &svcs, nil},
		{"EndpointSlices", &eps, nil},
		{"Nodes", &nodes, nil},
		{"speaker pods in " + namespace, &pods, []client.ListOption{client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: SpeakerSelector}}},
		{"SpeakerStatuses in " + namespace, &sts, []client.ListOption{client.InNamespace(namespace)}},
	} {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			if l.list == &sts && meta.IsNoMatchError(err) {
				continue // a release older than SpeakerStatus: the sessions' states are unknown
			}
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	w.Services, w.Slices, w.Nodes, w.Speakers, w.SpeakerStatuses = svcs.Items, eps.Items, nodes.Items, pods.Items, sts.Items
	objs, err := configobjs.List(ctx, c, namespace)
	if err != nil {
		return nil, err
	}
	w.Config = objs
	if service == "" {
		return w, nil
	}
	ns, name, _ := strings.Cut(service, "/")
	sel := client.MatchingLabels{v1beta1.LabelServiceNamespace: ns, v1beta1.LabelServiceName: name}
	var l2 v1beta1.ServiceL2StatusList
	var bgp v1beta1.ServiceBGPStatusList
	for _, l := range []client.ObjectList{&l2, &bgp} {
		if err := c.List(ctx, l, client.InNamespace(namespace), sel); err != nil {
			return nil, fmt.Errorf("listing the status objects of service %s: %w", service, err)
		}
	}
	w.L2Statuses, w.BGPStatuses = l2.Items, bgp.Items
	if svc := w.service(service); svc != nil {
		var evs corev1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(ns), client.MatchingFields{"involvedObject.uid": string(svc.UID)}); err != nil {
			return nil, fmt.Errorf("listing the events of service %s: %w", service, err)
		}
		w.Events = evs.Items
	}
	return w, nil
}

// service returns the Service named key ("namespace/name"), nil when
// there is none.
func (w *World) service(key string) *corev1.Service {
	for i := range w.Services {
		s := &w.Services[i]
		if s.Namespace+"/"+s.Name == key {
			return s
		}
	}
	return nil
}

// readySpeakers returns the nodes whose speaker pod is Ready, sorted: the
// plugin's stand-in for the members the speakers' memberlist sees alive.
func (w *World) readySpeakers() []string {
	var out []string
	for i := range w.Speakers {
		p := &w.Speakers[i]
		if p.Spec.NodeName != "" && p.DeletionTimestamp.IsZero() && eligible.PodReady(p) {
			out = append(out, p.Spec.NodeName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// speakerPod returns the speaker pod on node, nil when there is none.
func (w *World) speakerPod(node string) *corev1.Pod {
	var found *corev1.Pod
	for i := range w.Speakers {
		p := &w.Speakers[i]
		if p.Spec.NodeName == node && (found == nil || p.DeletionTimestamp.IsZero()) {
			found = p
		}
	}
	return found
}

// speakerStatus returns node's SpeakerStatus, nil when it has none.
func (w *World) speakerStatus(node string) *v1beta1.SpeakerStatus {
	for i := range w.SpeakerStatuses {
		if s := &w.SpeakerStatuses[i]; s.Status.Node == node {
			return s
		}
	}
	return nil
}

// eventsOf returns the events of the Service with uid, newest first.
func eventsOf(evs []corev1.Event, uid types.UID) []corev1.Event {
	var out []corev1.Event
	for _, e := range evs {
		if e.InvolvedObject.UID == uid {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b corev1.Event) int { return eventTime(b).Compare(eventTime(a)) })
	return out
}
