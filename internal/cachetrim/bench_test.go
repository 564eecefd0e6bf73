package cachetrim

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
)

var benchScale = flag.Float64("cachetrim.scale", 1, "scale of BenchmarkInformerCache's cluster (0.1: 100 nodes, 1,000 Services)")

// BenchmarkInformerCache measures the heap an informer cache holds for a
// cluster of 1,000 Nodes, 10,000 LoadBalancer Services and 10,000
// EndpointSlices, with and without the transforms. The objects start from
// what a real kube-apiserver serves (testdata, TestCaptureObjects): a kubelet's
// Node with 50 images, Services applied by kubectl client-side (with
// last-applied-configuration) and server-side, in turn, each with Herald's
// status, EndpointSlices of three endpoints from the EndpointSlice controller;
// each made distinct (names, UIDs, addresses, nodes). Each is encoded as
// protobuf, the format controller-runtime's informers receive built-in kinds
// in, decoded on its own as from a watch, transformed as the informer would
// (not at all, managedFields only, or the role's transforms), and added to a
// client-go indexer with controller-runtime's namespace index: the store the
// informer reads from. The figures are the live heap after a GC:
//
//   - nodes-MiB, services-MiB, slices-MiB, cache-MiB: held by the stores;
//   - replan-alloc-MiB (speaker): allocated by one copy of everything cached,
//     what the speaker's List of Services, EndpointSlices and Nodes
//     allocates on every re-plan (the cache returns deep copies);
//   - replan-heap-goal-MiB (speaker): the largest heap goal of the garbage
//     collector (GOGC 100: where the heap grows to before the next
//     collection) over 20 such re-plans, less the benchmark's own before
//     the cache was filled: the heap this cache costs a speaker that
//     re-plans, short of the planner's own allocations.
//
// make bench-cache; a tenth of the sizes: -args -cachetrim.scale=0.1.
func BenchmarkInformerCache(b *testing.B) {
	nodes, svcs, slices := int(1000**benchScale), int(10000**benchScale), int(10000**benchScale)
	c := newCluster(b, nodes)
	whole := func(o any) (any, error) { return o, nil }
	for _, role := range []struct {
		name                         string
		variant                      string
		node, service, endpointSlice func(any) (any, error)
	}{
		{"speaker", "whole", whole, whole, whole},
		{"speaker", "managedFields", ManagedFields, ManagedFields, ManagedFields},
		{"speaker", "trimmed", Node, SpeakerService, EndpointSlice},
		{"controller", "trimmed", Node, ControllerService, EndpointSlice},
	} {
		b.Run(role.name+"/"+role.variant, func(b *testing.B) {
			var st stores
			for b.Loop() {
				st = stores{}
				base := liveHeap()
				baseGoal := heapGoal()
				st.nodes = fill(b, nodes, c.node, role.node)
				afterNodes := liveHeap()
				st.services = fill(b, svcs, c.service, role.service)
				afterServices := liveHeap()
				st.slices = fill(b, slices, c.slice, role.endpointSlice)
				afterSlices := liveHeap()
				b.ReportMetric(mib(afterNodes-base), "nodes-MiB")
				b.ReportMetric(mib(afterServices-afterNodes), "services-MiB")
				b.ReportMetric(mib(afterSlices-afterServices), "slices-MiB")
				b.ReportMetric(mib(afterSlices-base), "cache-MiB")
				if role.name == "speaker" {
					b.ReportMetric(mib(replanAlloc(&st)), "replan-alloc-MiB")
					b.ReportMetric(mib(replanGoal(&st)-baseGoal), "replan-heap-goal-MiB")
				}
			}
			runtime.KeepAlive(st)
		})
	}
}

// stores are one informer store per kind.
type stores struct{ nodes, services, slices toolscache.Indexer }

// fill makes n objects, each encoded and decoded alone, transformed and
// stored, as an informer's list and watch would.
func fill(b *testing.B, n int, gen func(int) kruntime.Object, transform func(any) (any, error)) toolscache.Indexer {
	b.Helper()
	ix := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	for i := range n {
		obj, err := transform(wire(b, gen(i)))
		if err != nil {
			b.Fatal(err)
		}
		if err := ix.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	return ix
}

var protobuf = func() kruntime.Serializer {
	info, ok := kruntime.SerializerInfoForMediaType(clientgoscheme.Codecs.SupportedMediaTypes(), kruntime.ContentTypeProtobuf)
	if !ok {
		panic("no protobuf serializer")
	}
	return info.Serializer
}()

// wire is obj as a client decodes it from the API server's protobuf.
func wire(b *testing.B, obj kruntime.Object) kruntime.Object {
	var buf strings.Builder
	if err := protobuf.Encode(obj, &buf); err != nil {
		b.Fatal(err)
	}
	out, _, err := protobuf.Decode([]byte(buf.String()), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// replanAlloc is what one deep copy of every cached object allocates.
func replanAlloc(st *stores) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := 0
	for _, ix := range []toolscache.Indexer{st.services, st.slices, st.nodes} {
		for _, o := range ix.List() {
			if o.(kruntime.Object).DeepCopyObject() != nil {
				n++
			}
		}
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// replanGoal re-plans 20 times (a copy of everything cached, held while
// the plan would be computed) and returns the largest heap goal seen.
func replanGoal(st *stores) uint64 {
	var peak uint64
	for range 20 {
		var held []kruntime.Object
		for _, ix := range []toolscache.Indexer{st.services, st.slices, st.nodes} {
			for _, o := range ix.List() {
				held = append(held, o.(kruntime.Object).DeepCopyObject())
			}
		}
		peak = max(peak, heapGoal())
		runtime.KeepAlive(held)
	}
	return peak
}

// heapGoal is the garbage collector's current heap goal.
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// cluster makes the objects of a cluster from the captured ones.
type cluster struct {
	nodes    int
	nodeT    *corev1.Node
	svcT     [2]*corev1.Service
	lastConf string
	sliceT   *discoveryv1.EndpointSlice
}

func newCluster(b *testing.B, nodes int) *cluster {
	c := &cluster{nodes: nodes, nodeT: readTestdata[corev1.Node](b, "node.json"), sliceT: readTestdata[discoveryv1.EndpointSlice](b, "endpointslice.json")}
	c.svcT[0] = readTestdata[corev1.Service](b, "service-csa.json")
	c.svcT[1] = readTestdata[corev1.Service](b, "service-ssa.json")
	c.lastConf = c.svcT[0].Annotations["kubectl.kubernetes.io/last-applied-configuration"]
	return c
}

func uid(kind byte, i int) types.UID {
	return types.UID(fmt.Sprintf("%c%07x-88a3-4042-ab72-%012x", kind, i, i*2654435761))
}

func nodeName(i int) string { return fmt.Sprintf("node-%04d", i) }

func (c *cluster) node(i int) kruntime.Object {
	n := c.nodeT.DeepCopy()
	n.Name, n.UID, n.ResourceVersion = nodeName(i), uid('n', i), fmt.Sprint(1000+i)
	n.Labels["kubernetes.io/hostname"] = n.Name
	n.Labels["topology.kubernetes.io/zone"] = fmt.Sprintf("eu-west-%c", 'a'+i%3)
	n.Labels["rack"] = fmt.Sprintf("r%02d", i/40)
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.%d.%d", i/250, i%250+1)},
		{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("fd00:192:168:%x::%x", i/250, i%250+1)},
		{Type: corev1.NodeHostName, Address: n.Name},
	}
	n.Spec.PodCIDR = fmt.Sprintf("10.%d.%d.0/24", 100+i/250, i%250)
	n.Spec.PodCIDRs = []string{n.Spec.PodCIDR, fmt.Sprintf("fd00:10:%x::/64", i)}
	n.Status.NodeInfo.BootID = string(uid('b', i))
	n.Status.NodeInfo.MachineID = strings.ReplaceAll(string(uid('m', i)), "-", "")
	n.Status.NodeInfo.SystemUUID = string(uid('s', i))
	n.Annotations["projectcalico.org/IPv4Address"] = n.Status.Addresses[0].Address + "/24"
	n.Annotations["csi.volume.kubernetes.io/nodeid"] = `{"csi.tigera.io":"` + n.Name + `","rbd.csi.ceph.com":"` + n.Name + `"}`
	return n
}

func (c *cluster) service(i int) kruntime.Object {
	s := c.svcT[i%2].DeepCopy()
	name, ns := fmt.Sprintf("web-%05d", i), fmt.Sprintf("team-%03d", i%100)
	s.Name, s.Namespace, s.UID, s.ResourceVersion = name, ns, uid('s', i), fmt.Sprint(20000+i)
	s.Labels["app.kubernetes.io/instance"] = name
	s.Spec.Selector["app.kubernetes.io/instance"] = name
	if i%2 == 0 {
		s.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = strings.ReplaceAll(strings.ReplaceAll(c.lastConf, "web-csa", name), `"shop"`, `"`+ns+`"`)
	}
	if i%10 == 0 {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = int32(30000 + i%2000)
	}
	ip := fmt.Sprintf("10.%d.%d.%d", 20+i/65000, i/250%260, i%250+1)
	s.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
	s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	for p := range s.Spec.Ports {
		s.Spec.Ports[p].NodePort = int32(30000 + (2*i+p)%2767)
	}
	s.Status.LoadBalancer.Ingress[0].IP = ip
	s.Status.Conditions[0].Message = ip + ` from pool "public"`
	return s
}

func (c *cluster) slice(i int) kruntime.Object {
	s := c.sliceT.DeepCopy()
	svc := fmt.Sprintf("web-%05d", i)
	s.Name, s.GenerateName, s.Namespace = svc+fmt.Sprintf("-%05x", i*7919%0xfffff), svc+"-", fmt.Sprintf("team-%03d", i%100)
	s.UID, s.ResourceVersion = uid('e', i), fmt.Sprint(40000+i)
	s.Labels[discoveryv1.LabelServiceName] = svc
	s.Labels["app.kubernetes.io/instance"] = svc
	s.OwnerReferences[0].Name, s.OwnerReferences[0].UID = svc, uid('s', i)
	for e := range s.Endpoints {
		ep := &s.Endpoints[e]
		node := (i*3 + e*337) % c.nodes
		ep.Addresses = []string{fmt.Sprintf("10.%d.%d.%d", 100+node/250, node%250, (i+e)%250+2)}
		ep.NodeName = ptrTo(nodeName(node))
		ep.TargetRef.Name = fmt.Sprintf("%s-7d9c5b6f8-%05x", svc, (i*31+e)%0xfffff)
		ep.TargetRef.UID = uid('p', i*3+e)
	}
	s.Annotations["endpoints.kubernetes.io/last-change-trigger-time"] = metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	return s
}

func ptrTo[T any](v T) *T { return &v }
