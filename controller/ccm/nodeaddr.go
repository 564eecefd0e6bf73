package ccm

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/herald-lb/herald/config/nodeaddr"
	"github.com/herald-lb/herald/config/v1beta1"
)

// annotationProvidedNodeIP is where a kubelet started with
// --cloud-provider=external and --node-ip records its --node-ip (the cloud
// node controller refuses addresses that do not contain it).
const annotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"

// AddressProblem is one thing wrong with a node's address keys: which key,
// where it was read (annotation or label), the value and why it is refused.
type AddressProblem struct {
	Key    string
	Source string // "annotation", "label" or "kubelet"
	Value  string
	Reason string
}

func (p AddressProblem) String() string {
	return fmt.Sprintf("%s %s=%q: %s", p.Source, p.Key, p.Value, p.Reason)
}

// NodeAddressesError lists every problem found on a node's address keys.
type NodeAddressesError struct {
	Node     string
	Problems []AddressProblem
}

func (e *NodeAddressesError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("node %s: %s", e.Node, strings.Join(parts, "; "))
}

// NodeAddresses computes the addresses the cloud provider reports for a node,
// from the node alone (pure):
//
//   - InternalIP: Herald's internal-ip key; without it, the kubelet's
//     --node-ip (its provided-node-ip annotation); without that, the
//     InternalIP addresses the node already reports;
//   - ExternalIP: Herald's external-ip key; without it, the ExternalIP
//     addresses the node already reports;
//   - Hostname: Herald's hostname key; without it, none (the cloud node
//     controller keeps the hostname the kubelet reported).
//
// Without any InternalIP the node has no address to register with, and every
// malformed key is a problem: the result is then an error listing them all,
// and the node keeps what it has (an uninitialized node stays tainted).
// Addresses are deduplicated and ordered InternalIP, ExternalIP, Hostname,
// each in the order given.
func NodeAddresses(node *corev1.Node) ([]corev1.NodeAddress, error) {
	var problems []AddressProblem
	internal, ps := readIPs(node, v1beta1.NodeKeyInternalIP)
	problems = append(problems, ps...)
	external, ps := readIPs(node, v1beta1.NodeKeyExternalIP)
	problems = append(problems, ps...)
	hostname, ps := readHostname(node)
	problems = append(problems, ps...)

	provided, ps := providedNodeIPs(node)
	problems = append(problems, ps...)
	switch {
	case len(internal) > 0:
		// The cloud node controller refuses a list without the kubelet's
		// --node-ip: say so here, naming the key to fix.
		for _, ip := range provided {
			if !slices.Contains(internal, ip) {
				problems = append(problems, AddressProblem{Key: v1beta1.NodeKeyInternalIP, Source: sourceOf(node, v1beta1.NodeKeyInternalIP),
					Value: valueOf(node, v1beta1.NodeKeyInternalIP), Reason: fmt.Sprintf("does not contain the kubelet's --node-ip %s", ip)})
			}
		}
	case len(provided) > 0:
		internal = provided
	default:
		internal = nodeaddr.Of(node, corev1.NodeInternalIP)
	}
	if len(external) == 0 && !hasKey(node, v1beta1.NodeKeyExternalIP) {
		external = nodeaddr.Of(node, corev1.NodeExternalIP)
	}
	if len(problems) == 0 && len(internal) == 0 {
		problems = append(problems, AddressProblem{Key: v1beta1.NodeKeyInternalIP, Source: "annotation", Reason: "no InternalIP: set the annotation " +
			v1beta1.NodeKeyInternalIP + " (or the label), or start the kubelet with --node-ip"})
	}
	if len(problems) > 0 {
		return nil, &NodeAddressesError{Node: node.Name, Problems: problems}
	}
	var out []corev1.NodeAddress
	for _, ip := range internal {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
	}
	for _, ip := range external {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip.String()})
	}
	if hostname != "" {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeHostName, Address: hostname})
	}
	return out, nil
}

// hasKey reports whether the node carries the key as annotation or label.
func hasKey(node *corev1.Node, key string) bool {
	_, a := node.Annotations[key]
	_, l := node.Labels[key]
	return a || l
}

// sourceOf and valueOf say where a key is read: the annotation wins.
func sourceOf(node *corev1.Node, key string) string {
	if _, ok := node.Annotations[key]; ok {
		return "annotation"
	}
	return "label"
}

func valueOf(node *corev1.Node, key string) string {
	if v, ok := node.Annotations[key]; ok {
		return v
	}
	return node.Labels[key]
}

// readIPs reads an address key: a comma-separated annotation, or a label
// holding one address ('-' for ':').
func readIPs(node *corev1.Node, key string) ([]netip.Addr, []AddressProblem) {
	if !hasKey(node, key) {
		return nil, nil
	}
	src, val := sourceOf(node, key), valueOf(node, key)
	var fields []string
	if src == "annotation" {
		fields = strings.Split(val, ",")
	} else {
		fields = []string{labelToIP(val)}
	}
	var out []netip.Addr
	var problems []AddressProblem
	for _, f := range fields {
		f = strings.TrimSpace(f)
		ip, reason := parseNodeIP(f)
		if reason != "" {
			problems = append(problems, AddressProblem{Key: key, Source: src, Value: val, Reason: fmt.Sprintf("%q: %s", f, reason)})
			continue
		}
		if !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out, problems
}

// labelToIP turns a label value into an address string: an IPv6 address has
// '-' for ':' (a dotted IPv4 address has no '-').
func labelToIP(v string) string {
	if strings.Contains(v, ".") {
		return v
	}
	return strings.ReplaceAll(v, "-", ":")
}

// parseNodeIP parses one node address and returns why it is refused ("" when
// it is fine): a node address must be a plain unicast address.
func parseNodeIP(s string) (netip.Addr, string) {
	if s == "" {
		return netip.Addr{}, "empty address"
	}
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return ip, "not an IP address"
	case ip.Zone() != "":
		return ip, "an IPv6 zone is not allowed"
	case ip.Is4In6():
		return ip, "an IPv4-mapped IPv6 address is not allowed; write the IPv4 address"
	case ip.IsUnspecified():
		return ip, "the unspecified address is not a node address"
	case ip.IsLoopback():
		return ip, "a loopback address is not a node address"
	case ip.IsMulticast():
		return ip, "a multicast address is not a node address"
	case ip.IsLinkLocalUnicast():
		return ip, "a link-local address is not a node address"
	}
	return ip, ""
}

// readHostname reads the hostname key.
func readHostname(node *corev1.Node) (string, []AddressProblem) {
	if !hasKey(node, v1beta1.NodeKeyHostname) {
		return "", nil
	}
	src, val := sourceOf(node, v1beta1.NodeKeyHostname), valueOf(node, v1beta1.NodeKeyHostname)
	h := strings.TrimSpace(val)
	if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
		return "", []AddressProblem{{Key: v1beta1.NodeKeyHostname, Source: src, Value: val, Reason: strings.Join(errs, "; ")}}
	}
	return h, nil
}

// providedNodeIPs reads the kubelet's --node-ip annotation (one address, or
// two for dual-stack).
func providedNodeIPs(node *corev1.Node) ([]netip.Addr, []AddressProblem) {
	val, ok := node.Annotations[annotationProvidedNodeIP]
	if !ok || strings.TrimSpace(val) == "" {
		return nil, nil
	}
	var out []netip.Addr
	for _, f := range strings.Split(val, ",") {
		f = strings.TrimSpace(f)
		ip, err := netip.ParseAddr(f)
		if err != nil {
			return nil, []AddressProblem{{Key: annotationProvidedNodeIP, Source: "kubelet", Value: val, Reason: "not an IP address list"}}
		}
		if ip.IsUnspecified() {
			// --node-ip=0.0.0.0 or :: asks for the node's default
			// address of that family: nothing to match.
			continue
		}
		out = append(out, ip)
	}
	return out, nil
}

// ProviderID is the node's provider ID: herald://<node name>.
func ProviderID(nodeName string) string {
	return ProviderName + "://" + nodeName
}
