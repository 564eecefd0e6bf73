package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceL2Status reports which node answers ARP/NDP for a LoadBalancer
// Service's addresses. The speaker of the announcing node writes it (and
// only that speaker), in the install namespace, one object per announced
// Service, named after the Service ("<namespace>.<name>") and labelled with
// LabelServiceNamespace and LabelServiceName. It is owned by the announcing
// speaker's Pod, so it disappears with it; the next announcer takes it over.
//
// The object has no status subresource: it is a report, written whole by
// the speaker in one call.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=l2status
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.metadata.labels.herald\.dev/service-name`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Interfaces",type=string,JSONPath=`.status.interfaces`
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.status.addresses`
type ServiceL2Status struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status ServiceL2StatusStatus `json:"status,omitempty"`
}

// ServiceL2StatusStatus is what the announcing speaker reports.
type ServiceL2StatusStatus struct {
	// Node is the node that answers ARP/NDP for the Service's addresses.
	// +optional
	Node string `json:"node,omitempty"`
	// Interfaces are the interfaces it answers on, sorted: those the
	// L2Advertisement names, or, when it names none, the node's eligible
	// interfaces as they are now (kept current when interfaces come, go
	// or change); empty when none is eligible.
	// +optional
	Interfaces []string `json:"interfaces,omitempty"`
	// Addresses are the Service's addresses the node announces.
	// +optional
	Addresses []string `json:"addresses,omitempty"`
}

// ServiceL2StatusList is a list of ServiceL2Status.
//
// +kubebuilder:object:root=true
type ServiceL2StatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceL2Status `json:"items"`
}
