// Package daemonset builds the DaemonSet that serves one Service placed in a
// node-address pool (ServiceLB, the k3s model): one pod per qualifying node,
// one container `lb-<proto>-<port>` per Service port running `herald svclb`,
// which forwards the node's hostPort to the Service.
//
// It is pure: it reads a Service, the pool's node selector and the nodes'
// labels, and returns objects and problems. The controller creates, adopts
// (Drifted) and deletes the DaemonSets; status reuses FilterFamilies and
// NodeSelection. See docs/svclb.md, "The DaemonSet Herald builds".
package svclb

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
	forwarder "github.com/herald-lb/herald/svclb"
)

// Labels on the DaemonSet and its pods naming what made them (the labels
// naming their Service are config/v1beta1's, with every other name Herald
// writes on objects not its own).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "herald"
	LabelComponent = "app.kubernetes.io/component"
	Component      = "svclb"
)

// Defaults.
const (
	// DefaultProbePortBase is the first probe port tried; each container gets
	// the next free one that is no Service port.
	DefaultProbePortBase = forwarder.DefaultProbePort
	// Forwarding sysctls, one per family in use.
	SysctlIPv4Forward = "net.ipv4.ip_forward"
	SysctlIPv6Forward = "net.ipv6.conf.all.forwarding"
)

// Options are the controller's settings for every DaemonSet.
type Options struct {
	// Namespace is the ServiceLB namespace the DaemonSets live in.
	Namespace string
	// Image is Herald's own image; the containers run `herald svclb`.
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// PoolNodeSelector is the node pool's nodeSelector (nil: every node).
	PoolNodeSelector *metav1.LabelSelector
	// Nodes are the cluster's nodes; only their labels are read (the
	// enablelb rule depends on whether any node carries the label).
	Nodes []corev1.Node
	// Forwarders are the pool's priority class and tolerations (what a
	// Service may ask for through its annotations, and the rest).
	Forwarders config.ForwarderTerms
	// Ports are the ports the pool lets Services take on its nodes: a
	// Service port it refuses is a Problem with Denied set, and no
	// DaemonSet is built.
	Ports config.PortPolicy
	// ProbePortBase: the first probe port tried (0: DefaultProbePortBase).
	ProbePortBase int
}

// Problem is why a DaemonSet cannot be built for a Service, for a Warning
// event naming the field and the reason.
type Problem struct {
	Field  string // e.g. metadata.annotations[svccontroller.k3s.cattle.io/tolerations][1].operator
	Value  string
	Reason string
	// Denied: the Service asks for what its pool forbids (a denied port),
	// so no forwarder may run for it, not even one that exists already.
	// Other problems leave an existing forwarder serving.
	Denied bool
}

func (p Problem) String() string {
	if p.Value == "" {
		return fmt.Sprintf("%s: %s", p.Field, p.Reason)
	}
	return fmt.Sprintf("%s=%q: %s", p.Field, p.Value, p.Reason)
}

// Name is the DaemonSet's name: svclb-<service name cut to 48 characters,
// trailing '-' removed>-<first 8 characters of the Service UID>.
func Name(svc *corev1.Service) string {
	n := svc.Name
	if len(n) > 48 {
		n = n[:48]
	}
	n = strings.TrimRight(n, "-")
	uid := string(svc.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return "svclb-" + n + "-" + uid
}

// ServiceFamilies returns the Service's IP families in order: spec.ipFamilies,
// or when that is empty, the families of spec.clusterIPs in their order.
func ServiceFamilies(svc *corev1.Service) []corev1.IPFamily {
	var out []corev1.IPFamily
	add := func(f corev1.IPFamily) {
		if (f == corev1.IPv4Protocol || f == corev1.IPv6Protocol) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, f := range svc.Spec.IPFamilies {
		add(f)
	}
	if len(out) > 0 {
		return out
	}
	for _, s := range svc.Spec.ClusterIPs {
		if a, err := netip.ParseAddr(s); err == nil {
			add(family(a))
		}
	}
	return out
}

func family(a netip.Addr) corev1.IPFamily {
	if a.Unmap().Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// FilterFamilies returns the addresses of the given families, ordered by the
// order of families (the addresses of one family keep their order). No
// families: nothing.
func FilterFamilies(addrs []netip.Addr, families []corev1.IPFamily) []netip.Addr {
	var out []netip.Addr
	var seen []corev1.IPFamily
	for _, f := range families {
		if slices.Contains(seen, f) {
			continue
		}
		seen = append(seen, f)
		for _, a := range addrs {
			if a = a.Unmap(); a.IsValid() && family(a) == f && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// Build returns the DaemonSet for svc, or nil and the problems that keep it
// from being built (the controller then keeps what exists and reports them).
func Build(svc *corev1.Service, opts Options) (*appsv1.DaemonSet, []Problem) {
	families := ServiceFamilies(svc)
	problems := checkBuild(svc, opts, families)
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	var clusterIPs []netip.Addr
	if !local {
		var p []Problem
		clusterIPs, p = clusterDestinations(svc, families)
		problems = append(problems, p...)
	}
	srcRanges, rp := sourceRanges(svc, families)
	problems = append(problems, rp...)
	fw := forwarderSpec{image: opts.Image, pullPolicy: opts.ImagePullPolicy, local: local, srcRanges: srcRanges,
		clusterIPs: clusterIPs, families: families, probe: newProbePorts(svc, opts.ProbePortBase)}
	var containers []corev1.Container
	for i, p := range svc.Spec.Ports {
		c, bad := fw.container(fmt.Sprintf("spec.ports[%d]", i), p, opts.Ports)
		if bad != nil {
			problems = append(problems, *bad)
			continue
		}
		containers = append(containers, c)
	}
	priorityClass, pp := priorityClassName(svc, opts.Forwarders)
	problems = append(problems, pp...)
	tolerations, tp := Tolerations(svc, opts.Forwarders)
	problems = append(problems, tp...)
	affinity, ap := Affinity(svc, opts.PoolNodeSelector, opts.Nodes)
	problems = append(problems, ap...)
	if len(problems) > 0 {
		return nil, problems
	}
	labels := Labels(svc)
	ds := &appsv1.DaemonSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(svc),
			Namespace: opts.Namespace,
			Labels:    labels,
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: Selector(svc)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:                   containers,
					AutomountServiceAccountToken: ptr(false),
					EnableServiceLinks:           ptr(false),
					PriorityClassName:            priorityClass,
					Tolerations:                  tolerations,
					Affinity:                     affinity,
					SecurityContext: &corev1.PodSecurityContext{
						Sysctls:        forwardingSysctls(families),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
				},
			},
		},
	}
	return ds, nil
}

// checkBuild reports what Build cannot do without: its options, the
// Service's UID, an IP family and a port.
func checkBuild(svc *corev1.Service, opts Options, families []corev1.IPFamily) []Problem {
	var problems []Problem
	bad := func(field, reason string) {
		problems = append(problems, Problem{Field: field, Reason: reason})
	}
	if opts.Namespace == "" {
		bad("options.namespace", "the ServiceLB namespace is not set")
	}
	if opts.Image == "" {
		bad("options.image", "the Herald image is not set")
	}
	if svc.UID == "" {
		bad("metadata.uid", "the Service has no UID (the DaemonSet's name and selector need it)")
	}
	if len(families) == 0 {
		bad("spec.ipFamilies", "the Service has no IP family (no ClusterIP)")
	}
	if len(svc.Spec.Ports) == 0 {
		bad("spec.ports", "the Service has no port")
	}
	return problems
}

// clusterDestinations are the ClusterIPs of the Service's families, where
// externalTrafficPolicy Cluster forwards to; none is a problem.
func clusterDestinations(svc *corev1.Service, families []corev1.IPFamily) ([]netip.Addr, []Problem) {
	var parsed []netip.Addr
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil {
			parsed = append(parsed, a)
		}
	}
	out := FilterFamilies(parsed, families)
	if len(out) == 0 && len(families) > 0 {
		return nil, []Problem{{Field: "spec.clusterIPs", Value: strings.Join(ips, ","),
			Reason: "externalTrafficPolicy Cluster needs a ClusterIP of the Service's families to forward to"}}
	}
	return out, nil
}

// newProbePorts returns the allocator of the containers' readiness ports:
// from base (DefaultProbePortBase when not positive) up, one per
// container, never a port of the Service.
func newProbePorts(svc *corev1.Service, base int) func() int32 {
	if base <= 0 {
		base = DefaultProbePortBase
	}
	servicePorts := map[int32]bool{}
	for _, p := range svc.Spec.Ports {
		servicePorts[p.Port] = true
	}
	next := int32(base)
	return func() int32 {
		for servicePorts[next] {
			next++
		}
		p := next
		next++
		return p
	}
}

// forwarderSpec is what every forwarder container of a Service shares.
type forwarderSpec struct {
	image      string
	pullPolicy corev1.PullPolicy
	local      bool // externalTrafficPolicy Local: to the NodePort on the node's own addresses
	srcRanges  string
	clusterIPs []netip.Addr
	families   []corev1.IPFamily
	probe      func() int32
}

// container is the forwarder container of the Service port p (at field),
// or the problem that keeps it from being one.
func (fw *forwarderSpec) container(field string, p corev1.ServicePort, ports config.PortPolicy) (corev1.Container, *Problem) {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	if proto != corev1.ProtocolTCP && proto != corev1.ProtocolUDP {
		return corev1.Container{}, &Problem{Field: field + ".protocol", Value: string(proto), Reason: "herald svclb forwards only TCP and UDP"}
	}
	if why := ports.Refusal(string(proto), p.Port); why != "" {
		return corev1.Container{}, &Problem{Field: field + ".port", Value: strconv.Itoa(int(p.Port)), Denied: true, Reason: why}
	}
	destPort := p.Port
	if fw.local {
		destPort = p.NodePort
		if destPort == 0 {
			return corev1.Container{}, &Problem{Field: field + ".nodePort",
				Reason: "externalTrafficPolicy Local forwards to the NodePort, and the port has none (allocateLoadBalancerNodePorts: false?)"}
		}
	}
	name := fmt.Sprintf("lb-%s-%d", strings.ToLower(string(proto)), p.Port)
	probe := fw.probe()
	env := []corev1.EnvVar{
		{Name: forwarder.EnvSrcPort, Value: strconv.Itoa(int(p.Port))},
		{Name: forwarder.EnvSrcRanges, Value: fw.srcRanges},
		{Name: forwarder.EnvDestProto, Value: string(proto)},
		{Name: forwarder.EnvDestPort, Value: strconv.Itoa(int(destPort))},
	}
	if fw.local {
		env = append(env, corev1.EnvVar{Name: forwarder.EnvDestIPs, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.hostIPs"}}})
	} else {
		env = append(env, corev1.EnvVar{Name: forwarder.EnvDestIPs, Value: joinAddrs(fw.clusterIPs)})
	}
	env = append(env,
		corev1.EnvVar{Name: forwarder.EnvIPFamilies, Value: joinFamilies(fw.families)},
		corev1.EnvVar{Name: forwarder.EnvProbePort, Value: strconv.Itoa(int(probe))},
	)
	return corev1.Container{
		Name:            name,
		Image:           fw.image,
		ImagePullPolicy: fw.pullPolicy,
		Args:            []string{"svclb"},
		Ports: []corev1.ContainerPort{{
			Name: name, ContainerPort: p.Port, HostPort: p.Port, Protocol: proto,
		}},
		Env: env,
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/readyz", Port: intstr.FromInt32(probe), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: 2,
		},
		// The forwarder writes nothing to disk (nftables through netlink) and needs little memory: the
		// rules live in the kernel; the userspace proxy, where nftables cannot forward, splices TCP in
		// the kernel and holds 64 KiB per UDP session (the limit allows about 3,000). No CPU limit: a
		// throttled proxy adds latency to every connection.
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			Privileged:               ptr(false),
			AllowPrivilegeEscalation: ptr(false),
			ReadOnlyRootFilesystem:   ptr(true),
			Capabilities: &corev1.Capabilities{
				Drop: []corev1.Capability{"ALL"},
				Add:  []corev1.Capability{"NET_ADMIN"},
			},
		},
	}, nil
}

// forwardingSysctls turn on forwarding for each of the Service's families
// in the pod's network namespace.
func forwardingSysctls(families []corev1.IPFamily) []corev1.Sysctl {
	var out []corev1.Sysctl
	for _, f := range families {
		if f == corev1.IPv4Protocol {
			out = append(out, corev1.Sysctl{Name: SysctlIPv4Forward, Value: "1"})
		} else {
			out = append(out, corev1.Sysctl{Name: SysctlIPv6Forward, Value: "1"})
		}
	}
	return out
}

// Labels are the labels of the DaemonSet and its pods.
func Labels(svc *corev1.Service) map[string]string {
	return map[string]string{
		LabelManagedBy:                   ManagedBy,
		LabelComponent:                   Component,
		v1beta1.LabelServiceName:         svc.Name,
		v1beta1.LabelServiceNamespace:    svc.Namespace,
		v1beta1.LabelServiceUID:          string(svc.UID),
		v1beta1.K3sLabelServiceName:      svc.Name,
		v1beta1.K3sLabelServiceNamespace: svc.Namespace,
	}
}

// Selector is the DaemonSet's pod selector (immutable once created): the
// component and the Service's UID.
func Selector(svc *corev1.Service) map[string]string {
	return map[string]string{LabelComponent: Component, v1beta1.LabelServiceUID: string(svc.UID)}
}

func sourceRanges(svc *corev1.Service, families []corev1.IPFamily) (string, []Problem) {
	var problems []Problem
	var out []netip.Prefix
	for i, s := range svc.Spec.LoadBalancerSourceRanges {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			problems = append(problems, Problem{Field: fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), Value: s, Reason: "not a CIDR"})
			continue
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				problems = append(problems, Problem{Field: fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), Value: s, Reason: "an IPv4-mapped range must be /96 or longer"})
				continue
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		if slices.Contains(families, family(p.Addr())) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 && len(out) == 0 && len(problems) == 0 {
		problems = append(problems, Problem{Field: "spec.loadBalancerSourceRanges", Value: strings.Join(svc.Spec.LoadBalancerSourceRanges, ","),
			Reason: "no range of a family the Service uses: nothing could ever reach it"})
	}
	if len(svc.Spec.LoadBalancerSourceRanges) == 0 {
		for _, f := range families {
			if f == corev1.IPv4Protocol {
				out = append(out, netip.PrefixFrom(netip.IPv4Unspecified(), 0))
			} else {
				out = append(out, netip.PrefixFrom(netip.IPv6Unspecified(), 0))
			}
		}
	}
	ss := make([]string, len(out))
	for i, p := range out {
		ss[i] = p.String()
	}
	return strings.Join(ss, " "), problems
}

func joinAddrs(as []netip.Addr) string {
	ss := make([]string, len(as))
	for i, a := range as {
		ss[i] = a.String()
	}
	return strings.Join(ss, ",")
}

func joinFamilies(fs []corev1.IPFamily) string {
	ss := make([]string, len(fs))
	for i, f := range fs {
		ss[i] = string(f)
	}
	return strings.Join(ss, ",")
}

func ptr[T any](v T) *T { return &v }
