package controller

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/herald-lb/herald/speaker/inputs"
)

// TestEndpointRuleAgrees: for a Service with externalTrafficPolicy Local, the
// nodes the speaker may announce it from (inputs.Build (speaker/inputs)) and the nodes
// the ServiceLB status lists as serving it (servingNodes) are the same, for
// every mix of ready, serving and terminating endpoints. Both read
// config/endpoints; before it, the ServiceLB status counted ready endpoints
// only and dropped every node while the last pods were terminating but still
// serving, which the speaker kept announcing.
func TestEndpointRuleAgrees(t *testing.T) {
	yes, no := ptrTo(true), ptrTo(false)
	type e struct {
		node           string
		ready, serving *bool
	}
	for _, tc := range []struct {
		name string
		eps  []e
		want string // the nodes both sides choose, comma-separated
	}{
		{"ready on a and c", []e{{"a", yes, yes}, {"c", yes, yes}}, "a,c"},
		{"unset conditions count as ready", []e{{"b", nil, nil}}, "b"},
		{"ready wins over serving-only", []e{{"a", yes, yes}, {"b", no, yes}}, "a"},
		{"nothing ready: the serving ones", []e{{"a", no, yes}, {"c", no, yes}, {"b", no, no}}, "a,c"},
		{"not ready, serving unset: not serving", []e{{"a", no, nil}}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl := discoveryv1.EndpointSlice{}
			sl.Namespace = "app"
			sl.Name = "web-1"
			sl.Labels = map[string]string{discoveryv1.LabelServiceName: "web"}
			for _, x := range tc.eps {
				n := x.node
				sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{NodeName: &n, Addresses: []string{"10.244.0.1"},
					Conditions: discoveryv1.EndpointConditions{Ready: x.ready, Serving: x.serving, Terminating: ptrTo(x.ready != nil && !*x.ready)}})
			}
			svc := fakeSvc("web", 0, localPolicy, withStatus("192.0.2.10"), families(corev1.IPv4Protocol))
			nodes := []corev1.Node{node("a", "InternalIP=10.0.0.1"), node("b", "InternalIP=10.0.0.2"), node("c", "InternalIP=10.0.0.3")}

			status := servingNodes(servingInput{svc: svc, selected: []string{"a", "b", "c"}, nodes: nodes,
				pods:   []corev1.Pod{pod("p1", "a", true, ""), pod("p2", "b", true, ""), pod("p3", "c", true, "")},
				slices: []discoveryv1.EndpointSlice{sl}})

			in := inputs.Build(inputs.Snapshot{Services: []corev1.Service{*svc}, Slices: []discoveryv1.EndpointSlice{sl}, Nodes: nodes})
			if len(in.Services) != 1 {
				t.Fatalf("the speaker plans %d Services, want 1", len(in.Services))
			}
			announcers := in.Services[0].EndpointNodes

			if got := strings.Join(status.nodes, ","); got != tc.want {
				t.Errorf("ServiceLB status: serving nodes %q, want %q (why: %s)", got, tc.want, status.why)
			}
			if got := strings.Join(announcers, ","); got != tc.want {
				t.Errorf("speaker: endpoint nodes %q, want %q", got, tc.want)
			}
			if !slices.Equal(status.nodes, announcers) {
				t.Errorf("the sides disagree: ServiceLB status %v, speaker %v", status.nodes, announcers)
			}
		})
	}
}
