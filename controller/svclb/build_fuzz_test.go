package svclb

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

// FuzzBuild feeds what a tenant writes on a Service in a node-address pool (the priority-class and tolerations
// annotations, Herald's and k3s's, the source ranges and a port) through Build with a pool's terms. Whatever it
// holds: a DaemonSet or problems, never both or neither; a DaemonSet is a forwarder's shape (each container one
// host port equal to its container port, the pod under RuntimeDefault seccomp, no token), runs at the pool's class
// or one the pool allows, carries the pool's tolerations and only allowed others; the same Service twice gives the
// same DaemonSet.
func FuzzBuild(f *testing.F) {
	f.Add("", "", "", "", "", int32(443), "TCP")
	f.Add("lb-critical", "", `[{"key":"dedicated","operator":"Equal","value":"edge","effect":"NoSchedule"}]`, "", "192.0.2.0/24", int32(53), "UDP")
	f.Add("", "system-cluster-critical", "", "- key: gpu\n  operator: Exists\n", "2001:db8::/32, 10.0.0.0/8", int32(8080), "TCP")
	f.Add("Not_A_Name", "", `[{"operator":"Exists"}]`, "", "not-a-cidr", int32(6443), "SCTP")
	f.Add("", "", "", "", "", int32(0), "")
	f.Fuzz(func(t *testing.T, class, k3sClass, tolerations, k3sTolerations, ranges string, port int32, proto string) {
		svc := testService(func(s *corev1.Service) {
			s.Annotations = map[string]string{}
			for k, v := range map[string]string{v1beta1.AnnotationSvcLBPriorityClass: class, v1beta1.K3sAnnotationPriorityClass: k3sClass,
				v1beta1.AnnotationSvcLBTolerations: tolerations, v1beta1.K3sAnnotationTolerations: k3sTolerations} {
				if v != "" {
					s.Annotations[k] = v
				}
			}
			if ranges != "" {
				s.Spec.LoadBalancerSourceRanges = strings.Split(ranges, ",")
			}
			s.Spec.Ports = []corev1.ServicePort{{Port: port, Protocol: corev1.Protocol(proto)}}
		})
		opts := testOpts
		opts.Ports = config.PortPolicy{Denied: config.DefaultDeniedPorts}
		ds, problems := Build(svc, opts)
		ds2, problems2 := Build(svc.DeepCopy(), opts)
		if !reflect.DeepEqual(ds, ds2) || !reflect.DeepEqual(problems, problems2) {
			t.Fatal("two builds of one Service differ")
		}
		if (ds == nil) == (len(problems) == 0) {
			t.Fatalf("DaemonSet %v with problems %v", ds != nil, problems)
		}
		if ds == nil {
			for _, p := range problems {
				if p.Field == "" || p.Reason == "" {
					t.Fatalf("a problem without field or reason: %+v", p)
				}
			}
			return
		}
		spec := ds.Spec.Template.Spec
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken ||
			spec.SecurityContext == nil || spec.SecurityContext.SeccompProfile == nil || spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Fatalf("pod spec outside the forwarder's shape: %+v", spec)
		}
		for _, c := range spec.Containers {
			if len(c.Ports) != 1 || c.Ports[0].HostPort != c.Ports[0].ContainerPort || c.Ports[0].HostIP != "" {
				t.Fatalf("container %s ports %v", c.Name, c.Ports)
			}
			if why := opts.Ports.Refusal(string(c.Ports[0].Protocol), c.Ports[0].HostPort); why != "" {
				t.Fatalf("container %s takes a denied port: %s", c.Name, why)
			}
		}
		if spec.PriorityClassName != opts.Forwarders.PriorityClassName && opts.Forwarders.PriorityClassRefusal(spec.PriorityClassName) != "" {
			t.Fatalf("priority class %q neither the pool's nor allowed", spec.PriorityClassName)
		}
		if len(spec.Tolerations) < len(opts.Forwarders.Tolerations) {
			t.Fatalf("tolerations %v lack the pool's", spec.Tolerations)
		}
		for i, tol := range spec.Tolerations {
			if i < len(opts.Forwarders.Tolerations) {
				if tol != toCore(opts.Forwarders.Tolerations[i]) {
					t.Fatalf("toleration %d %+v, want the pool's %+v", i, tol, opts.Forwarders.Tolerations[i])
				}
				continue
			}
			if opts.Forwarders.TolerationRefusal(fromCore(tol)) != "" {
				t.Fatalf("toleration %+v not allowed by the pool", tol)
			}
		}
	})
}
