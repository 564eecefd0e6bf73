package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceBGPStatus reports what one node advertises over BGP for a
// LoadBalancer Service: the prefixes (the Service's addresses, or the
// aggregates covering them) and the peers they go to. Every advertising
// node's speaker writes its own, in the install namespace, named
// "<namespace>.<name>.<node>" (cut and suffixed with a hash when longer than
// a name may be) and labelled with LabelServiceNamespace, LabelServiceName
// and LabelNode. It is owned by the speaker's Pod, so it disappears with it;
// the speaker deletes it when the node stops advertising the Service.
//
// The object has no status subresource: it is a report, written whole by
// the speaker in one call.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=bgpstatus
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.metadata.labels.herald\.dev/service-name`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Peers",type=string,JSONPath=`.status.peers`
// +kubebuilder:printcolumn:name="Prefixes",type=string,JSONPath=`.status.prefixes`
type ServiceBGPStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status ServiceBGPStatusStatus `json:"status,omitempty"`
}

// ServiceBGPStatusStatus is what one advertising node reports.
type ServiceBGPStatusStatus struct {
	// Node is the advertising node.
	// +optional
	Node string `json:"node,omitempty"`
	// Peers are the BGPPeers the node advertises the Service's prefixes to,
	// sorted (whether their sessions are up is in the speaker's metrics and
	// the Node's events).
	// +optional
	Peers []string `json:"peers,omitempty"`
	// Prefixes are the advertised prefixes that carry the Service's
	// addresses, sorted.
	// +optional
	Prefixes []string `json:"prefixes,omitempty"`
}

// ServiceBGPStatusList is a list of ServiceBGPStatus.
//
// +kubebuilder:object:root=true
type ServiceBGPStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceBGPStatus `json:"items"`
}
