package svclb

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
	forwarder "github.com/herald-lb/herald/svclb"
)

const testUID = "0123abcd-4567-89ef-0123-456789abcdef"

func testService(mod ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: testUID},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			ClusterIP:             "10.43.0.10",
			ClusterIPs:            []string{"10.43.0.10"},
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			Ports: []corev1.ServicePort{
				{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, NodePort: 31443},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 31053},
			},
		},
	}
	for _, m := range mod {
		m(svc)
	}
	return svc
}

var testOpts = Options{Namespace: "herald-system", Image: "herald:test", ImagePullPolicy: corev1.PullIfNotPresent,
	Forwarders: config.ForwarderTerms{PriorityClassName: config.DefaultForwarderPriorityClass,
		AllowedPriorityClassNames: []string{"lb-critical", "herald-one", "k3s-one"},
		Tolerations:               []v1beta1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: "Exists", Effect: "NoSchedule"}},
		AllowedTolerations:        []v1beta1.Toleration{{Key: "dedicated", Operator: "Exists"}}}}

func env(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			m[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
			continue
		}
		m[e.Name] = e.Value
	}
	return m
}

func mustBuild(t *testing.T, svc *corev1.Service, opts Options) *appsv1.DaemonSet {
	t.Helper()
	ds, problems := Build(svc, opts)
	if len(problems) > 0 || ds == nil {
		t.Fatalf("Build: problems %v", problems)
	}
	return ds
}

// TestBuildCluster checks the whole DaemonSet of a single-stack Cluster Service.
func TestBuildCluster(t *testing.T) {
	ds := mustBuild(t, testService(), testOpts)
	f := false
	labels := map[string]string{
		"app.kubernetes.io/managed-by":             "herald",
		"app.kubernetes.io/component":              "svclb",
		"herald.dev/service-name":                  "web",
		"herald.dev/service-namespace":             "shop",
		"herald.dev/service-uid":                   testUID,
		"svccontroller.k3s.cattle.io/svcname":      "web",
		"svccontroller.k3s.cattle.io/svcnamespace": "shop",
	}
	tr := true
	sc := &corev1.SecurityContext{Privileged: &f, AllowPrivilegeEscalation: &f, ReadOnlyRootFilesystem: &tr,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}}}
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	container := func(name string, port, probe int32, proto corev1.Protocol, e []corev1.EnvVar) corev1.Container {
		return corev1.Container{
			Name: name, Image: "herald:test", ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"svclb"},
			Ports: []corev1.ContainerPort{{Name: name, ContainerPort: port, HostPort: port, Protocol: proto}},
			Env:   e,
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/readyz", Port: intstr.FromInt32(probe), Scheme: corev1.URISchemeHTTP}}, PeriodSeconds: 2},
			Resources:       resources,
			SecurityContext: sc,
		}
	}
	want := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "svclb-web-0123abcd", Namespace: "herald-system", Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": "svclb", "herald.dev/service-uid": testUID}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{
						container("lb-tcp-443", 443, 10903, corev1.ProtocolTCP, []corev1.EnvVar{
							{Name: "SRC_PORT", Value: "443"}, {Name: "SRC_RANGES", Value: "0.0.0.0/0"},
							{Name: "DEST_PROTO", Value: "TCP"}, {Name: "DEST_PORT", Value: "443"},
							{Name: "DEST_IPS", Value: "10.43.0.10"}, {Name: "HERALD_SVCLB_IP_FAMILIES", Value: "IPv4"},
							{Name: "HERALD_SVCLB_PROBE_PORT", Value: "10903"},
						}),
						container("lb-udp-53", 53, 10904, corev1.ProtocolUDP, []corev1.EnvVar{
							{Name: "SRC_PORT", Value: "53"}, {Name: "SRC_RANGES", Value: "0.0.0.0/0"},
							{Name: "DEST_PROTO", Value: "UDP"}, {Name: "DEST_PORT", Value: "53"},
							{Name: "DEST_IPS", Value: "10.43.0.10"}, {Name: "HERALD_SVCLB_IP_FAMILIES", Value: "IPv4"},
							{Name: "HERALD_SVCLB_PROBE_PORT", Value: "10904"},
						}),
					},
					AutomountServiceAccountToken: &f,
					EnableServiceLinks:           &f,
					PriorityClassName:            "system-node-critical",
					Tolerations: []corev1.Toleration{
						{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
					},
					SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_forward", Value: "1"}},
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				},
			},
		},
	}
	if !reflect.DeepEqual(ds, want) {
		t.Errorf("Build:\n got %+v\nwant %+v", ds, want)
	}
}

func TestBuildRules(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	dual := func(s *corev1.Service) {
		s.Spec.IPFamilies = []corev1.IPFamily{v6, v4}
		s.Spec.ClusterIPs = []string{"10.43.0.10", "fd00:43::10"} // shuffled against ipFamilies
	}
	local := func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }
	annotate := func(kv ...string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				s.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	tests := []struct {
		name  string
		svc   *corev1.Service
		check func(t *testing.T, ds *appsv1.DaemonSet)
	}{
		{name: "Cluster dual-stack: ClusterIPs in ipFamilies order, both ranges, both sysctls", svc: testService(dual),
			check: func(t *testing.T, ds *appsv1.DaemonSet) {
				e := env(ds.Spec.Template.Spec.Containers[0])
				want := map[string]string{"SRC_PORT": "443", "SRC_RANGES": "::/0 0.0.0.0/0", "DEST_PROTO": "TCP", "DEST_PORT": "443",
					"DEST_IPS": "fd00:43::10,10.43.0.10", "HERALD_SVCLB_IP_FAMILIES": "IPv6,IPv4", "HERALD_SVCLB_PROBE_PORT": "10903"}
				if !reflect.DeepEqual(e, want) {
					t.Errorf("env %v, want %v", e, want)
				}
				wantSysctls := []corev1.Sysctl{{Name: "net.ipv6.conf.all.forwarding", Value: "1"}, {Name: "net.ipv4.ip_forward", Value: "1"}}
				if got := ds.Spec.Template.Spec.SecurityContext.Sysctls; !reflect.DeepEqual(got, wantSysctls) {
					t.Errorf("sysctls %v, want %v", got, wantSysctls)
				}
			}},
		{name: "IPv6 only: only the IPv6 sysctl", svc: testService(func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{v6}
			s.Spec.ClusterIPs = []string{"fd00:43::10"}
		}), check: func(t *testing.T, ds *appsv1.DaemonSet) {
			if got := ds.Spec.Template.Spec.SecurityContext.Sysctls; len(got) != 1 || got[0].Name != "net.ipv6.conf.all.forwarding" {
				t.Errorf("sysctls %v", got)
			}
			if e := env(ds.Spec.Template.Spec.Containers[0]); e["SRC_RANGES"] != "::/0" || e["DEST_IPS"] != "fd00:43::10" {
				t.Errorf("env %v", e)
			}
		}},
		{name: "Local: hostIPs from the downward API and the NodePort", svc: testService(local, dual),
			check: func(t *testing.T, ds *appsv1.DaemonSet) {
				for i, want := range []string{"31443", "31053"} {
					c := ds.Spec.Template.Spec.Containers[i]
					e := env(c)
					if e["DEST_PORT"] != want || e["DEST_IPS"] != "fieldRef:status.hostIPs" || e["HERALD_SVCLB_IP_FAMILIES"] != "IPv6,IPv4" {
						t.Errorf("%s: env %v", c.Name, e)
					}
					if c.Ports[0].HostPort != c.Ports[0].ContainerPort || e["SRC_PORT"] != itoa(c.Ports[0].HostPort) {
						t.Errorf("%s: ports %v, SRC_PORT %s", c.Name, c.Ports, e["SRC_PORT"])
					}
				}
			}},
		{name: "source ranges: masked, deduplicated, only families in use, order kept", svc: testService(func(s *corev1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.7/24", "2001:db8::/32", " 198.51.100.0/24", "192.0.2.0/24", "::ffff:203.0.113.0/120"}
		}), check: func(t *testing.T, ds *appsv1.DaemonSet) {
			if got := env(ds.Spec.Template.Spec.Containers[1])["SRC_RANGES"]; got != "192.0.2.0/24 198.51.100.0/24 203.0.113.0/24" {
				t.Errorf("SRC_RANGES %q", got)
			}
		}},
		{name: "source ranges dual", svc: testService(dual, func(s *corev1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"2001:db8::/32", "192.0.2.0/24"}
		}), check: func(t *testing.T, ds *appsv1.DaemonSet) {
			if got := env(ds.Spec.Template.Spec.Containers[0])["SRC_RANGES"]; got != "2001:db8::/32 192.0.2.0/24" {
				t.Errorf("SRC_RANGES %q", got)
			}
		}},
		{name: "priority class from k3s's annotation", svc: testService(annotate(v1beta1.K3sAnnotationPriorityClass, "lb-critical")),
			check: func(t *testing.T, ds *appsv1.DaemonSet) {
				if got := ds.Spec.Template.Spec.PriorityClassName; got != "lb-critical" {
					t.Errorf("priority class %q", got)
				}
			}},
		{name: "priority class: Herald's annotation wins", svc: testService(annotate(v1beta1.K3sAnnotationPriorityClass, "k3s-one", v1beta1.AnnotationSvcLBPriorityClass, "herald-one")),
			check: func(t *testing.T, ds *appsv1.DaemonSet) {
				if got := ds.Spec.Template.Spec.PriorityClassName; got != "herald-one" {
					t.Errorf("priority class %q", got)
				}
			}},
		{name: "tolerations from the annotation (YAML) after the pool's", svc: testService(annotate(v1beta1.K3sAnnotationTolerations,
			"- key: dedicated\n  operator: Equal\n  value: edge\n  effect: NoSchedule\n")),
			check: func(t *testing.T, ds *appsv1.DaemonSet) {
				tol := ds.Spec.Template.Spec.Tolerations
				want := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "edge", Effect: corev1.TaintEffectNoSchedule}
				if len(tol) != 2 || tol[0].Key != "node-role.kubernetes.io/control-plane" || !reflect.DeepEqual(tol[1], want) {
					t.Errorf("tolerations %v", tol)
				}
			}},
		{name: "probe ports skip the Service ports and stay distinct", svc: testService(func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{
				{Port: 10903, Protocol: corev1.ProtocolTCP}, {Port: 10904, Protocol: corev1.ProtocolUDP}, {Port: 10906, Protocol: corev1.ProtocolTCP},
				{Port: 10903, Protocol: corev1.ProtocolUDP},
			}
		}), check: func(t *testing.T, ds *appsv1.DaemonSet) {
			var got []string
			for _, c := range ds.Spec.Template.Spec.Containers {
				got = append(got, c.Name+"="+env(c)["HERALD_SVCLB_PROBE_PORT"])
				if p := itoa(c.ReadinessProbe.HTTPGet.Port.IntVal); p != env(c)["HERALD_SVCLB_PROBE_PORT"] {
					t.Errorf("%s: readiness port %s", c.Name, p)
				}
			}
			want := []string{"lb-tcp-10903=10905", "lb-udp-10904=10907", "lb-tcp-10906=10908", "lb-udp-10903=10909"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("probe ports %v, want %v", got, want)
			}
		}},
		{name: "protocol defaults to TCP", svc: testService(func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{{Port: 80}} }),
			check: func(t *testing.T, ds *appsv1.DaemonSet) {
				c := ds.Spec.Template.Spec.Containers[0]
				if c.Name != "lb-tcp-80" || c.Ports[0].Protocol != corev1.ProtocolTCP || env(c)["DEST_PROTO"] != "TCP" {
					t.Errorf("container %+v", c)
				}
			}},
		{name: "placement: pool selector and lbpool in a required node affinity", svc: testService(func(s *corev1.Service) {
			s.Labels = map[string]string{v1beta1.K3sLabelLBPool: "edge"}
		}), check: func(t *testing.T, ds *appsv1.DaemonSet) {
			a := ds.Spec.Template.Spec.Affinity
			if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
				t.Fatalf("affinity %+v", a)
			}
			want := []corev1.NodeSelectorRequirement{{Key: v1beta1.K3sLabelLBPool, Operator: corev1.NodeSelectorOpIn, Values: []string{"edge"}}}
			if got := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions; !reflect.DeepEqual(got, want) {
				t.Errorf("requirements %v, want %v", got, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustBuild(t, tt.svc, testOpts))
		})
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func TestBuildProblems(t *testing.T) {
	tests := []struct {
		name  string
		svc   *corev1.Service
		opts  *Options
		field string // the field the first problem names
		want  string // part of its reason
	}{
		{name: "bad toleration operator", svc: testService(func(s *corev1.Service) {
			s.Annotations = map[string]string{v1beta1.K3sAnnotationTolerations: `[{"key":"a","operator":"Equals","value":"b"}]`}
		}), field: "metadata.annotations[svccontroller.k3s.cattle.io/tolerations][0]", want: `operator "Equals"`},
		{name: "tolerations not a list", svc: testService(func(s *corev1.Service) {
			s.Annotations = map[string]string{v1beta1.AnnotationSvcLBTolerations: `key: a`}
		}), field: "metadata.annotations[herald.dev/svclb-tolerations]", want: "not a JSON or YAML list"},
		{name: "toleration unknown field", svc: testService(func(s *corev1.Service) {
			s.Annotations = map[string]string{v1beta1.K3sAnnotationTolerations: `[{"key":"a","operater":"Exists"}]`}
		}), field: "metadata.annotations[svccontroller.k3s.cattle.io/tolerations]", want: "operater"},
		{name: "bad priority class", svc: testService(func(s *corev1.Service) {
			s.Annotations = map[string]string{v1beta1.K3sAnnotationPriorityClass: "Not_A_Name"}
		}), field: "metadata.annotations[svccontroller.k3s.cattle.io/priorityclassname]", want: "not a priority class name"},
		{name: "SCTP", svc: testService(func(s *corev1.Service) { s.Spec.Ports[1].Protocol = corev1.ProtocolSCTP }),
			field: "spec.ports[1].protocol", want: "only TCP and UDP"},
		{name: "Local without NodePort", svc: testService(func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.Ports[0].NodePort = 0
		}), field: "spec.ports[0].nodePort", want: "NodePort"},
		{name: "headless", svc: testService(func(s *corev1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = "None", []string{"None"}, nil
		}), field: "spec.ipFamilies", want: "no IP family"},
		{name: "ClusterIP of another family only", svc: testService(func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
		}), field: "spec.clusterIPs", want: "needs a ClusterIP"},
		{name: "bad source range", svc: testService(func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "everyone"} }),
			field: "spec.loadBalancerSourceRanges[1]", want: "not a CIDR"},
		{name: "short IPv4-mapped source range", svc: testService(func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"::ffff:0.0.0.0/80"} }),
			field: "spec.loadBalancerSourceRanges[0]", want: "/96 or longer"},
		{name: "source ranges of no family in use", svc: testService(func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"2001:db8::/32"} }),
			field: "spec.loadBalancerSourceRanges", want: "no range of a family"},
		{name: "no UID", svc: testService(func(s *corev1.Service) { s.UID = "" }), field: "metadata.uid", want: "no UID"},
		{name: "no ports", svc: testService(func(s *corev1.Service) { s.Spec.Ports = nil }), field: "spec.ports", want: "no port"},
		{name: "no namespace", svc: testService(), opts: &Options{Image: "herald:test"}, field: "options.namespace", want: "not set"},
		{name: "no image", svc: testService(), opts: &Options{Namespace: "herald-system"}, field: "options.image", want: "not set"},
		{name: "denied port", svc: testService(func(s *corev1.Service) { s.Spec.Ports[1].Port = 22 }),
			opts:  &Options{Namespace: "n", Image: "i", Ports: config.PortPolicy{Denied: config.DefaultDeniedPorts}},
			field: "spec.ports[1].port", want: "the node-address pool denies 22/UDP on its nodes (by default (spec.nodeAddresses.deniedPorts unset): SSH)"},
		{name: "denied UDP port (VXLAN)", svc: testService(func(s *corev1.Service) { s.Spec.Ports[1].Port, s.Spec.Ports[1].Protocol = 8472, corev1.ProtocolUDP }),
			opts:  &Options{Namespace: "n", Image: "i", Ports: config.PortPolicy{Denied: config.DefaultDeniedPorts}},
			field: "spec.ports[1].port", want: "denies 8472/UDP"},
		{name: "port outside allowedPorts (denied)", svc: testService(),
			opts:  &Options{Namespace: "n", Image: "i", Ports: config.PortPolicy{Allowed: []config.PortRange{{Protocol: "TCP", First: 443, Last: 443}}}},
			field: "spec.ports[1].port", want: "allows only 443/TCP on its nodes (spec.nodeAddresses.allowedPorts), not 53/UDP"},
		{name: "bad pool selector", svc: testService(), opts: &Options{Namespace: "n", Image: "i", PoolNodeSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}},
			field: "pool.nodeSelector.matchExpressions[0].operator", want: "unknown operator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := testOpts
			if tt.opts != nil {
				opts = *tt.opts
			}
			ds, problems := Build(tt.svc, opts)
			if ds != nil {
				t.Errorf("built a DaemonSet despite problems %v", problems)
			}
			if len(problems) == 0 {
				t.Fatal("no problem")
			}
			if problems[0].Field != tt.field || !strings.Contains(problems[0].String(), tt.want) {
				t.Errorf("problems %v, want first on %s with %q", problems, tt.field, tt.want)
			}
			if denied := strings.Contains(tt.name, "denied"); problems[0].Denied != denied {
				t.Errorf("problem %v: Denied = %v, want %v", problems[0], problems[0].Denied, denied)
			}
		})
	}
}

// TestEnvAcceptedByForwarder is the contract with `herald svclb`: the
// environment of every container Build makes, with the kubelet's rendering of
// status.hostIPs (comma separated, both families on a dual-stack node), is
// accepted by forwarder.ParseEnv and means what the Service asks.
func TestEnvAcceptedByForwarder(t *testing.T) {
	const hostIPs = "192.168.1.5,2001:db8::5"
	tests := []struct {
		name      string
		svc       *corev1.Service
		wantDests string
		wantPorts []uint16 // DestPort per container
	}{
		{name: "Cluster v4", svc: testService(), wantDests: "[10.43.0.10]", wantPorts: []uint16{443, 53}},
		{name: "Cluster dual", svc: testService(func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
			s.Spec.ClusterIPs = []string{"fd00:43::10", "10.43.0.10"}
		}), wantDests: "[fd00:43::10 10.43.0.10]", wantPorts: []uint16{443, 53}},
		{name: "Local v4 on a dual-stack node", svc: testService(func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}), wantDests: "[192.168.1.5]", wantPorts: []uint16{31443, 31053}},
		{name: "Local v6 with ranges on a dual-stack node", svc: testService(func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
			s.Spec.ClusterIPs = []string{"fd00:43::10"}
			s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24", "2001:db8:1::/48"}
		}), wantDests: "[2001:db8::5]", wantPorts: []uint16{31443, 31053}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := mustBuild(t, tt.svc, testOpts)
			for i, c := range ds.Spec.Template.Spec.Containers {
				e := env(c)
				if e["DEST_IPS"] == "fieldRef:status.hostIPs" {
					e["DEST_IPS"] = hostIPs
				}
				cfg, warnings, err := forwarder.ParseEnv(func(k string) string { return e[k] })
				if err != nil {
					t.Fatalf("%s: the forwarder refuses its environment: %v", c.Name, err)
				}
				if got := fmt.Sprint(cfg.DestIPs); got != tt.wantDests {
					t.Errorf("%s: destinations %s, want %s (warnings %q)", c.Name, got, tt.wantDests, warnings)
				}
				if cfg.DestPort != tt.wantPorts[i] || int32(cfg.SrcPort) != c.Ports[0].HostPort || int32(cfg.ProbePort) == c.Ports[0].HostPort {
					t.Errorf("%s: config %+v", c.Name, cfg)
				}
				v4, v6 := cfg.Families()
				var sysctls []string
				for _, s := range ds.Spec.Template.Spec.SecurityContext.Sysctls {
					sysctls = append(sysctls, s.Name)
				}
				if v4 != slices.Contains(sysctls, SysctlIPv4Forward) || v6 != slices.Contains(sysctls, SysctlIPv6Forward) {
					t.Errorf("%s: forwards v4 %v v6 %v, sysctls %v", c.Name, v4, v6, sysctls)
				}
			}
		})
	}
}
