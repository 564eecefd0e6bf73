package ccm

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// EventInvalidNodeAddresses (Warning, on the Node): the node's address keys
// cannot be used; the node keeps what it has (an uninitialized node stays
// tainted) until they are fixed.
const EventInvalidNodeAddresses = "InvalidNodeAddresses"

// instances is the minimal InstancesV2: every node exists and runs, and its
// addresses come from Herald's node keys.
type instances struct{ p *Provider }

// InstanceExists is always true: Herald knows no machine that could be gone,
// so the node lifecycle controller never deletes a Node.
func (i *instances) InstanceExists(context.Context, *corev1.Node) (bool, error) { return true, nil }

// InstanceShutdown is always false: no shutdown taint is ever added.
func (i *instances) InstanceShutdown(context.Context, *corev1.Node) (bool, error) { return false, nil }

// InstanceMetadata is the provider ID herald://<node> and the node's
// addresses (NodeAddresses). With unusable address keys it records a Warning
// event on the Node and fails: the node stays as it is.
func (i *instances) InstanceMetadata(_ context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	addrs, err := NodeAddresses(node)
	if err != nil {
		msg := err.Error()
		var ae *NodeAddressesError
		if errors.As(err, &ae) {
			msg = problemsText(ae.Problems)
		}
		i.p.eventf(nodeRef(node), corev1.EventTypeWarning, EventInvalidNodeAddresses, "%s", cutNote(msg))
		return nil, err
	}
	return &cloudprovider.InstanceMetadata{ProviderID: ProviderID(node.Name), NodeAddresses: addrs}, nil
}

// nodeRef is the event reference of a Node.
func nodeRef(node *corev1.Node) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
}

func problemsText(ps []AddressProblem) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += "; "
		}
		s += p.String()
	}
	return s
}

// maxNote is the longest event message recorded (the API server's limit for
// events.k8s.io notes; core events take more, but long ones are unreadable).
const maxNote = 1024

// cutNote cuts s to maxNote bytes, marking the cut.
func cutNote(s string) string {
	if len(s) <= maxNote {
		return s
	}
	const mark = " ..."
	cut := maxNote - len(mark)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + mark
}
