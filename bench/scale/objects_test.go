//go:build scale

package scale

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The site the bench builds: N Nodes shaped like real ones and M LoadBalancer Services with an EndpointSlice each.
//
//   - Node 0 is the speaker's (InternalIP 192.0.2.1, the namespace it runs in); the others have 10.x addresses.
//   - Every node carries a real node's labels, five conditions, capacity and allocatable, nodeInfo and a list of 50
//     images with two names each (the part of a Node object that grows with the node's life).
//   - Services spread over 20 namespaces; 7 of 10 IPv4, 2 of 10 dual-stack, 1 of 10 IPv6; 1 of 10
//     externalTrafficPolicy Local; half from the L2 pool, half from the BGP pool (annotation).
//   - Each Service's slice has 3 ready endpoints on nodes spread over the cluster; one Local Service in two also
//     has one on node 0.

const (
	namespaces = 20
	speakerIP  = "192.0.2.1"
	speakerIP6 = "2001:db8::1"
)

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

func nodeIP(i int) string {
	if i == 0 {
		return speakerIP
	}
	return fmt.Sprintf("10.%d.%d.%d", 20+i/65536, (i/256)%256, i%256)
}

func nodeIP6(i int) string {
	if i == 0 {
		return speakerIP6
	}
	return fmt.Sprintf("fd00:20::%x", i)
}

func node(i int) *corev1.Node {
	name := nodeName(i)
	zone := fmt.Sprintf("zone-%c", 'a'+i%3)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
			"topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "site-1",
			"node.kubernetes.io/instance-type": "metal-64c-256g", "rack": fmt.Sprintf("r%02d", i%40),
		}, Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
			"csi.volume.kubernetes.io/nodeid": fmt.Sprintf(`{"csi.example.com":"%s"}`, name),
		}},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)},
	}
	if i%2 == 0 {
		n.Labels["herald.dev/l2"] = "true" // the L2 advertisement's node selector: half the nodes, node 0 included
	}
	return n
}

func nodeStatus(i int, heartbeat time.Time) corev1.NodeStatus {
	hb := metav1.NewTime(heartbeat.Truncate(time.Second))
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: hb, LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0)),
			Reason: reason, Message: "kubelet reports " + reason}
	}
	st := corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP(i)}, {Type: corev1.NodeInternalIP, Address: nodeIP6(i)},
			{Type: corev1.NodeHostName, Address: nodeName(i)}},
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
			cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated"),
		},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("900Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("63"), corev1.ResourceMemory: resource.MustParse("250Gi"),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("850Gi")},
		NodeInfo: corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i),
			BootID: fmt.Sprintf("%08x-1111-4000-8000-%012x", i, i), KernelVersion: "6.1.0-28-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)",
			ContainerRuntimeVersion: "containerd://1.7.24", KubeletVersion: "v1.37.2",
			OperatingSystem: "linux", Architecture: "amd64"},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
	}
	for k := 0; k < 50; k++ {
		st.Images = append(st.Images, corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("registry.example.com/team-%02d/app-%02d@sha256:%064x", k%12, k, k*7919+1),
				fmt.Sprintf("registry.example.com/team-%02d/app-%02d:v1.%d.%d", k%12, k, k%9, k%5),
			},
			SizeBytes: int64(20_000_000 + k*3_000_000),
		})
	}
	return st
}

// service i of the site.
func service(i int) *corev1.Service {
	ns := fmt.Sprintf("app-%02d", i%namespaces)
	name := fmt.Sprintf("svc-%05d", i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name, "tier": "web"},
			Annotations: map[string]string{"example.com/owner": "team-" + fmt.Sprint(i%12)}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			// Node ports run out at about 1,400 Services with two ports (30000-32767); a site with thousands of
			// LoadBalancer Services turns them off, and Herald does not need them.
			AllocateLoadBalancerNodePorts: ptr.To(false),
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
				{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP}},
		},
	}
	switch i % 10 {
	case 7, 8:
		p := corev1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &p
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	case 9:
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	}
	if i%2 == 1 {
		svc.Annotations["herald.dev/address-pool"] = "bgp"
	}
	if i%10 == 3 {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	return svc
}

// slice is the EndpointSlice of service i (IPv4 endpoints), with endpoints on the given nodes.
func slice(i int, onNodes ...int) *discoveryv1.EndpointSlice {
	ns := fmt.Sprintf("app-%02d", i%namespaces)
	name := fmt.Sprintf("svc-%05d", i)
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-abcde", Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)},
			{Name: ptr.To("https"), Port: ptr.To[int32](8443), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for k, n := range onNodes {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+n/256, n%256, 2+(i+k)%250)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(nodeName(n)),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", name, k)},
		})
	}
	return es
}

// endpointNodes are the nodes of service i's endpoints (one Local Service in two has one on node 0).
func endpointNodes(i, nodes int) []int {
	out := []int{1 + (i*7)%(nodes-1), 1 + (i*13+5)%(nodes-1), 1 + (i*31+11)%(nodes-1)}
	if i%10 == 3 && i%20 == 3 {
		out[0] = 0
	}
	return out
}

// retry runs a write until it succeeds, the API server's answer is not a transient one (a timeout, too many
// requests, an internal error), or five tries failed. A create that times out may have been stored: AlreadyExists
// on a retry counts as done.
func retry(ctx context.Context, write func(ctx context.Context) error) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = write(ctx); err == nil || (try > 0 && apierrors.IsAlreadyExists(err)) {
			return nil
		}
		if !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTooManyRequests(err) &&
			!apierrors.IsInternalError(err) && !apierrors.IsServiceUnavailable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try+1) * 500 * time.Millisecond):
		}
	}
	return err
}

// parallel runs fn(i) for i in [0, n) with the given number of workers and returns the first error.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func createNodes(t *testing.T, ctx context.Context, cs kubernetes.Interface, n int) {
	t.Helper()
	err := parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		if err := retry(ctx, func(ctx context.Context) error {
			_, err := cs.CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
		return retry(ctx, func(ctx context.Context) error {
			n, err := cs.CoreV1().Nodes().Get(ctx, nodeName(i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Status = nodeStatus(i, time.Now())
			_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// createServices creates services [from, to) with their slices from writers concurrent writers and returns
// when each create was sent, and how long the Service creates took, sorted.
func createServices(t *testing.T, ctx context.Context, cs kubernetes.Interface, from, to, nodes, writers int) (map[string]time.Time, []time.Duration) {
	t.Helper()
	var mu sync.Mutex
	created := map[string]time.Time{}
	var calls []time.Duration
	err := parallel(ctx, to-from, writers, func(ctx context.Context, k int) error {
		i := from + k
		svc := service(i)
		t0 := time.Now()
		if err := retry(ctx, func(ctx context.Context) error {
			_, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("service %d: %w", i, err)
		}
		mu.Lock()
		created[svc.Namespace+"/"+svc.Name] = t0
		calls = append(calls, time.Since(t0))
		mu.Unlock()
		return retry(ctx, func(ctx context.Context) error {
			_, err := cs.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, slice(i, endpointNodes(i, nodes)...), metav1.CreateOptions{})
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(calls)
	return created, calls
}

// bgpAddrs are the BGP-pool addresses node 0 advertises: every address of a BGP Service with policy Cluster, and of
// a Local one with an endpoint on node 0.
func bgpAddrs(svcs []corev1.Service, nodes int) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, s := range svcs {
		if s.Annotations["herald.dev/address-pool"] != "bgp" {
			continue
		}
		var i int
		if _, err := fmt.Sscanf(s.Name, "svc-%05d", &i); err != nil {
			continue
		}
		if s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && endpointNodes(i, nodes)[0] != 0 {
			continue
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
				out[a] = true
			}
		}
	}
	return out
}
