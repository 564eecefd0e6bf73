package endpoints

import (
	"reflect"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

type ep struct {
	node                        string
	ready, serving, terminating *bool
}

func slice(ns, svc string, eps ...ep) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-x",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
	for _, e := range eps {
		d := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			d.NodeName = ptr.To(e.node)
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

func TestByService(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   map[string][]string
	}{
		{"none", nil, map[string][]string{}},
		{"ready on two nodes, sorted, deduplicated", []discoveryv1.EndpointSlice{
			slice("a", "s", ep{node: "n2", ready: yes}, ep{node: "n1", ready: yes}, ep{node: "n2", ready: yes}),
		}, map[string][]string{"a/s": {"n1", "n2"}}},
		{"nil ready counts as ready", []discoveryv1.EndpointSlice{slice("a", "s", ep{node: "n1"})},
			map[string][]string{"a/s": {"n1"}}},
		{"not ready and not serving: no node", []discoveryv1.EndpointSlice{slice("a", "s", ep{node: "n1", ready: no, serving: no})},
			map[string][]string{}},
		{"ready wins over serving-only", []discoveryv1.EndpointSlice{
			slice("a", "s", ep{node: "n1", ready: yes, serving: yes}, ep{node: "n2", ready: no, serving: yes, terminating: yes}),
		}, map[string][]string{"a/s": {"n1"}}},
		{"terminating but serving, nothing ready: serving nodes", []discoveryv1.EndpointSlice{
			slice("a", "s", ep{node: "n2", ready: no, serving: yes, terminating: yes}, ep{node: "n1", ready: no, serving: no, terminating: yes}),
		}, map[string][]string{"a/s": {"n2"}}},
		{"ready across two slices of one Service", []discoveryv1.EndpointSlice{
			slice("a", "s", ep{node: "n1", ready: no, serving: yes}), slice("a", "s", ep{node: "n3", ready: yes}),
		}, map[string][]string{"a/s": {"n3"}}},
		{"no node name or no service label: ignored", []discoveryv1.EndpointSlice{
			slice("a", "s", ep{ready: yes}),
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "orphan"}, Endpoints: []discoveryv1.Endpoint{{NodeName: ptr.To("n1")}}},
		}, map[string][]string{}},
		{"namespaces kept apart", []discoveryv1.EndpointSlice{
			slice("a", "s", ep{node: "n1"}), slice("b", "s", ep{node: "n2"}),
		}, map[string][]string{"a/s": {"n1"}, "b/s": {"n2"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ByService(tc.slices); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNodes: the rule for one Service's slices is ByService's for that
// Service, whatever the slices' labels say.
func TestNodes(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	tests := []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   []string
	}{
		{"none", nil, nil},
		{"ready on one slice, serving-only on another", []discoveryv1.EndpointSlice{
			slice("a", "s", ep{node: "n2", ready: no, serving: yes, terminating: yes}),
			slice("a", "s", ep{node: "n1", ready: yes}),
		}, []string{"n1"}},
		{"only terminating and serving", []discoveryv1.EndpointSlice{
			slice("a", "s", ep{node: "n2", ready: no, serving: yes, terminating: yes}, ep{node: "n2", ready: no, serving: yes}),
		}, []string{"n2"}},
		{"unlabelled slices are read", []discoveryv1.EndpointSlice{
			{Endpoints: []discoveryv1.Endpoint{{NodeName: ptr.To("n3")}}},
		}, []string{"n3"}},
		{"nothing ready or serving", []discoveryv1.EndpointSlice{
			slice("a", "s", ep{node: "n1", ready: no}),
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Nodes(tc.slices); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
