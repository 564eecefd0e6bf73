//go:build integration

package cachetrim

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/herald-lb/herald/internal/kubeapi"
)

var capture = flag.Bool("cachetrim.capture", false, "rewrite testdata/*.json from a real kube-apiserver")

// TestCaptureObjects writes the objects the benchmark and the tests start
// from (testdata/*.json) as a real kube-apiserver serves them, managedFields
// included, after the writes that make them in a cluster: a Node created and
// reported by its kubelet (50 images), labelled and annotated by kubeadm, the
// node controller and Calico; a LoadBalancer Service applied by kubectl
// client-side (last-applied-configuration) and another server-side, each with
// the status Herald's controller writes; an EndpointSlice of three endpoints
// written by the EndpointSlice controller. Run with -cachetrim.capture:
//
//	go test -tags integration -run TestCaptureObjects ./internal/cachetrim/ -args -cachetrim.capture
func TestCaptureObjects(t *testing.T) {
	if !*capture {
		t.Skip("only with -cachetrim.capture")
	}
	srv, err := kubeapi.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	cs := kubernetes.NewForConfigOrDie(srv.Config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	up := func(m string) metav1.UpdateOptions { return metav1.UpdateOptions{FieldManager: m} }
	raw := func(path string) []byte {
		t.Helper()
		b, err := cs.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		must(err)
		var out bytes.Buffer
		must(json.Indent(&out, b, "", "  "))
		out.WriteByte('\n')
		return out.Bytes()
	}

	// The Node.
	node := captureNode()
	status := node.Status
	node.Status = corev1.NodeStatus{}
	n, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{FieldManager: "kubelet"})
	must(err)
	n.Status = status
	n.Status.Conditions = n.Status.Conditions[:4] // Calico reports NetworkUnavailable
	n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, up("kubelet"))
	must(err)
	n.Annotations["kubeadm.alpha.kubernetes.io/cri-socket"] = "unix:///var/run/containerd/containerd.sock"
	n, err = cs.CoreV1().Nodes().Update(ctx, n, up("kubeadm"))
	must(err)
	n.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.17.0/24", []string{"10.244.17.0/24", "fd00:10:244:11::/64"}
	n, err = cs.CoreV1().Nodes().Update(ctx, n, up("kube-controller-manager"))
	must(err)
	n.Annotations["projectcalico.org/IPv4Address"] = "192.168.17.21/24"
	n.Annotations["projectcalico.org/IPv4VXLANTunnelAddr"] = "10.244.17.0"
	n, err = cs.CoreV1().Nodes().Update(ctx, n, up("calico-node"))
	must(err)
	n.Status.Conditions = append(n.Status.Conditions, status.Conditions[4])
	n, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, up("calico-node"))
	must(err)
	n.Labels["node-role.kubernetes.io/worker"] = ""
	n.Labels["rack"] = "r17"
	_, err = cs.CoreV1().Nodes().Update(ctx, n, up("kubectl-label"))
	must(err)

	// The Services.
	ns := "shop"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(err)
	csa := captureService(ns, "web-csa")
	csa.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": lastApplied(t, csa)}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, csa, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
	must(err)
	captureStatus(t, ctx, cs, svc, "10.20.0.17")
	ssa, err := json.Marshal(captureService(ns, "web-ssa"))
	must(err)
	svc, err = cs.CoreV1().Services(ns).Patch(ctx, "web-ssa", types.ApplyPatchType, ssa, metav1.PatchOptions{FieldManager: "kubectl", Force: ptr.To(true)})
	must(err)
	captureStatus(t, ctx, cs, svc, "10.20.0.18")

	// The EndpointSlice.
	sl := captureSlice(svc)
	_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{FieldManager: "kube-controller-manager"})
	must(err)

	for name, path := range map[string]string{
		"node.json":          "/api/v1/nodes/" + node.Name,
		"service-csa.json":   "/api/v1/namespaces/shop/services/web-csa",
		"service-ssa.json":   "/api/v1/namespaces/shop/services/web-ssa",
		"endpointslice.json": "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices/" + sl.Name,
	} {
		must(os.WriteFile(filepath.Join("testdata", name), raw(path), 0o644))
	}
}

// captureStatus writes the status Herald's controller writes (a merge patch
// of the status subresource, field manager "herald").
func captureStatus(t *testing.T, ctx context.Context, cs kubernetes.Interface, svc *corev1.Service, ip string) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"loadBalancer":{"ingress":[{"ip":%q,"ipMode":"VIP"}]},"conditions":[{"type":"herald.dev/AddressAllocated","status":"True","reason":"Allocated","message":"%s from pool \"public\"","observedGeneration":1,"lastTransitionTime":"2026-12-01T10:00:00Z"}]}}`, ip, ip)
	_, err := cs.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "herald"}, "status")
	if err != nil {
		t.Fatal(err)
	}
}

// lastApplied is kubectl's annotation for a manifest of obj: its JSON with
// sorted keys, empty annotations, no status, and a newline.
func lastApplied(t *testing.T, obj any) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	delete(m["metadata"].(map[string]any), "creationTimestamp")
	m["metadata"].(map[string]any)["annotations"] = map[string]any{}
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func captureService(ns, name string) *corev1.Service {
	lbl := map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": name, "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/component": "frontend"}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": name},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
				{Name: "https", Port: 443, TargetPort: intstr.FromString("https"), Protocol: corev1.ProtocolTCP},
			},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
		},
	}
}

func captureSlice(svc *corev1.Service) *discoveryv1.EndpointSlice {
	lbl := map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	for k, v := range svc.Labels {
		lbl[k] = v
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-x7k2p", GenerateName: svc.Name + "-", Namespace: svc.Namespace, Labels: lbl,
			Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-01T10:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8080))},
			{Name: ptr.To("https"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8443))},
		},
	}
	for i, node := range []string{"node-0017", "node-0342", "node-0815"} {
		pod := fmt.Sprintf("web-7d9c5b6f8-%c%c%c%c%c", 'a'+i, 'k', 'q'+i, 'z', 'm')
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.%d.%d", 17+i, 31+i)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(node),
			Zone:       ptr.To(fmt.Sprintf("eu-west-%c", 'a'+i)),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: svc.Namespace, Name: pod, UID: types.UID(fmt.Sprintf("6f1c2a3e-90b1-4c0d-8e2f-%012d", i))},
		})
	}
	return sl
}

// captureNode is a worker node as its kubelet reports it: a Node of a
// kubeadm cluster with containerd, 50 images (a real node's list is capped
// at 50 by default, --node-status-max-images), five conditions (Calico's
// NetworkUnavailable last).
func captureNode() *corev1.Node {
	name := "node-0017"
	q := resource.MustParse
	hb := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	tr := metav1.NewTime(time.Date(2026, 11, 2, 8, 14, 3, 0, time.UTC))
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{
				"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				"node.kubernetes.io/instance-type": "r640", "topology.kubernetes.io/region": "eu-west", "topology.kubernetes.io/zone": "eu-west-a",
			},
			Annotations: map[string]string{
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        `{"csi.tigera.io":"` + name + `","rbd.csi.ceph.com":"` + name + `"}`,
			}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{"cpu": q("32"), "ephemeral-storage": q("936945128Ki"), "hugepages-1Gi": q("0"), "hugepages-2Mi": q("0"),
				"memory": q("263852648Ki"), "pods": q("110")},
			Allocatable: corev1.ResourceList{"cpu": q("31500m"), "ephemeral-storage": q("863486047093"), "hugepages-1Gi": q("0"), "hugepages-2Mi": q("0"),
				"memory": q("262701672Ki"), "pods": q("110")},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: hb, LastTransitionTime: tr, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: hb, LastTransitionTime: tr, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: hb, LastTransitionTime: tr, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: hb, LastTransitionTime: tr, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, LastHeartbeatTime: hb, LastTransitionTime: tr, Reason: "CalicoIsUp", Message: "Calico is running on this node"},
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.17.21"}, {Type: corev1.NodeInternalIP, Address: "fd00:192:168:17::21"}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: "4c4c4544004d3510805ac4c04f4e3532", SystemUUID: "4c4c4544-004d-3510-805a-c4c04f4e3532",
				BootID: "8a1f6c2e-5b7d-4e3a-9c1b-2d4f6a8b0c1e", KernelVersion: "6.8.0-49-generic", OSImage: "Ubuntu 24.04.1 LTS",
				ContainerRuntimeVersion: "containerd://1.7.24", KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
			Images: captureImages(),
			RuntimeHandlers: []corev1.NodeRuntimeHandler{
				{Name: "", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}},
				{Name: "runc", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}},
			},
			Features: &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)},
		},
	}
	return n
}

func captureImages() []corev1.ContainerImage {
	repos := []string{
		"registry.k8s.io/kube-proxy", "registry.k8s.io/pause", "registry.k8s.io/coredns/coredns", "registry.k8s.io/sig-storage/csi-node-driver-registrar",
		"registry.k8s.io/sig-storage/livenessprobe", "docker.io/calico/node", "docker.io/calico/cni", "docker.io/calico/csi",
		"docker.io/calico/node-driver-registrar", "docker.io/calico/pod2daemon-flexvol", "quay.io/prometheus/node-exporter",
		"quay.io/cephcsi/cephcsi", "quay.io/jetstack/cert-manager-controller", "docker.io/library/nginx", "docker.io/library/redis",
		"docker.io/library/postgres", "docker.io/bitnami/kafka", "ghcr.io/fluxcd/source-controller", "ghcr.io/herald-lb/herald",
		"docker.io/grafana/promtail", "docker.io/grafana/loki", "quay.io/argoproj/argocd", "docker.io/istio/proxyv2",
		"registry.gitlab.com/acme/shop/frontend", "registry.gitlab.com/acme/shop/cart", "registry.gitlab.com/acme/shop/payments",
		"registry.gitlab.com/acme/shop/search", "registry.gitlab.com/acme/shop/catalog", "docker.io/library/busybox",
		"docker.io/library/alpine", "docker.io/otel/opentelemetry-collector-contrib", "docker.io/library/memcached",
		"quay.io/minio/minio", "docker.io/elastic/filebeat", "docker.io/library/rabbitmq", "docker.io/library/mongo",
		"registry.gitlab.com/acme/shop/orders", "registry.gitlab.com/acme/shop/users", "registry.gitlab.com/acme/shop/mailer",
		"registry.gitlab.com/acme/shop/recommendations", "registry.gitlab.com/acme/shop/inventory", "registry.gitlab.com/acme/shop/auth",
		"docker.io/library/haproxy", "docker.io/library/traefik", "quay.io/kiwigrid/k8s-sidecar", "docker.io/jaegertracing/all-in-one",
		"registry.k8s.io/ingress-nginx/controller", "registry.k8s.io/metrics-server/metrics-server", "docker.io/velero/velero",
		"docker.io/library/python",
	}
	out := make([]corev1.ContainerImage, len(repos))
	for i, r := range repos {
		digest := fmt.Sprintf("%016x%016x%016x%016x", uint64(i+1)*0x9e3779b97f4a7c15, uint64(i+7)*0xbf58476d1ce4e5b9, uint64(i+13)*0x94d049bb133111eb, uint64(i+29)*0x2545f4914f6cdd1d)
		out[i] = corev1.ContainerImage{Names: []string{r + "@sha256:" + digest, fmt.Sprintf("%s:v%d.%d.%d", r, 1+i%3, i%17, i%5)}, SizeBytes: int64(5_000_000 + i*7_340_033)}
	}
	return out
}
