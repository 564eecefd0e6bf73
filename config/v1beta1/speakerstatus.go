package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SpeakerStatus reports one speaker's own state: its memberlist view, how
// many addresses it answers ARP/NDP for and its BGP sessions. Every
// speaker writes its own, in the install namespace, named after its node
// and labelled with LabelNode (the node's name, cut and suffixed with a hash
// when longer than a label value may be). It is owned by the speaker's Pod,
// so it disappears with it.
//
// The speaker writes a change of a session's state, of its BFD state or of
// the set of sessions within about a second, a change of the counts alone
// (members, l2Addresses, prefixes) at most every 30 seconds, and nothing
// while nothing changed: the counts can lag the speaker's view by that much
// (its metrics are current).
//
// The object has no status subresource: it is a report, written whole by
// the speaker in one call.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=speakerstatus
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Members",type=integer,JSONPath=`.status.members`
// +kubebuilder:printcolumn:name="L2",type=integer,JSONPath=`.status.l2Addresses`
// +kubebuilder:printcolumn:name="Sessions",type=string,JSONPath=`.status.bgpSessions[*].state`
type SpeakerStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status SpeakerStatusStatus `json:"status,omitempty"`
}

// SpeakerStatusStatus is what one speaker reports about itself.
type SpeakerStatusStatus struct {
	// Node is the speaker's node.
	// +optional
	Node string `json:"node,omitempty"`
	// Members is the number of speakers alive in this speaker's memberlist
	// view, itself included.
	// +optional
	Members int `json:"members,omitempty"`
	// L2Addresses is the number of addresses this node answers ARP/NDP
	// for.
	// +optional
	L2Addresses int `json:"l2Addresses,omitempty"`
	// BGPSessions are the node's BGP sessions, sorted by peer, then
	// address.
	// +optional
	BGPSessions []SpeakerBGPSession `json:"bgpSessions,omitempty"`
}

// SpeakerBGPSession is one BGP session of a speaker.
type SpeakerBGPSession struct {
	// Peer is the BGPPeer of the session.
	// +optional
	Peer string `json:"peer,omitempty"`
	// Address is the router's address.
	// +optional
	Address string `json:"address,omitempty"`
	// Established is true while the session is established.
	// +optional
	Established bool `json:"established,omitempty"`
	// State is the BGP state of the session: Idle, Connect, Active,
	// OpenSent, OpenConfirm or Established.
	// +optional
	State string `json:"state,omitempty"`
	// Prefixes is the number of prefixes the node advertises to the peer
	// (sent while the session is established).
	// +optional
	Prefixes int `json:"prefixes,omitempty"`
	// BFD is the state of the BFD session beside it: Up or Down; empty
	// when the session has no BFD.
	// +optional
	BFD string `json:"bfd,omitempty"`
}

// SpeakerStatusList is a list of SpeakerStatus.
//
// +kubebuilder:object:root=true
type SpeakerStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SpeakerStatus `json:"items"`
}
