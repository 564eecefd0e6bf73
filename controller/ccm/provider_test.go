package ccm

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/herald-lb/herald/config/v1beta1"
)

type fakeBackend struct {
	enqueued []types.NamespacedName
	released []string
	holds    bool
	err      error
}

func (f *fakeBackend) Enqueue(nn types.NamespacedName) { f.enqueued = append(f.enqueued, nn) }
func (f *fakeBackend) Holds(context.Context, *corev1.Service) (bool, error) {
	return f.holds, f.err
}
func (f *fakeBackend) ReleaseService(_ context.Context, svc *corev1.Service) error {
	f.released = append(f.released, svc.Namespace+"/"+svc.Name)
	return f.err
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestInstancesInterface(t *testing.T) {
	p := New(Switches{NodeLifecycle: true})
	rec := record.NewFakeRecorder(10)
	p.SetRecorder(rec)
	inst, _ := p.InstancesV2()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{v1beta1.NodeKeyInternalIP: "10.0.0.5"}}}
	if ok, err := inst.InstanceExists(ctx, node); !ok || err != nil {
		t.Errorf("InstanceExists = %v, %v", ok, err)
	}
	if down, err := inst.InstanceShutdown(ctx, node); down || err != nil {
		t.Errorf("InstanceShutdown = %v, %v", down, err)
	}
	md, err := inst.InstanceMetadata(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	if md.ProviderID != "herald://n1" || len(md.NodeAddresses) != 1 || md.NodeAddresses[0].Address != "10.0.0.5" ||
		md.Zone != "" || md.Region != "" || md.InstanceType != "" {
		t.Errorf("metadata %+v", md)
	}
	if ev := drain(rec); len(ev) != 0 {
		t.Errorf("events for a good node: %v", ev)
	}

	node.Annotations[v1beta1.NodeKeyInternalIP] = "10.0.0.300"
	if _, err := inst.InstanceMetadata(ctx, node); err == nil {
		t.Fatal("no error for a bad address")
	}
	ev := drain(rec)
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning InvalidNodeAddresses ") || !strings.Contains(ev[0], `annotation herald.dev/internal-ip="10.0.0.300"`) {
		t.Errorf("events %q", ev)
	}
}

func TestLoadBalancerInterface(t *testing.T) {
	p := New(Switches{LoadBalancer: true})
	rec := record.NewFakeRecorder(10)
	p.SetRecorder(rec)
	b := &fakeBackend{}
	p.SetBackend(b, nil)
	lb, _ := p.LoadBalancer()
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", UID: "0123-4567"}}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}

	// Herald's controller writes the status: the service controller writes
	// none for a Service that wants a load balancer.
	st, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nil)
	if st != nil || !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		t.Errorf("EnsureLoadBalancer = %v, %v", st, err)
	}
	if len(b.enqueued) != 1 || b.enqueued[0].String() != "app/web" {
		t.Errorf("enqueued %v", b.enqueued)
	}
	if err := lb.UpdateLoadBalancer(ctx, "kubernetes", svc, nil); !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		t.Errorf("UpdateLoadBalancer = %v", err)
	}

	if _, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", svc); exists || err != nil {
		t.Errorf("GetLoadBalancer of nothing held = %v, %v", exists, err)
	}
	b.holds = true
	st, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", svc)
	if !exists || err != nil || len(st.Ingress) != 1 || st.Ingress[0].IP != "192.0.2.1" {
		t.Errorf("GetLoadBalancer = %v, %v, %v", st, exists, err)
	}

	if err := lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil || len(b.released) != 1 {
		t.Errorf("EnsureLoadBalancerDeleted = %v, released %v", err, b.released)
	}
	// A failed release keeps the finalizer (the error reaches the service
	// controller, which retries), and is never ImplementedElsewhere.
	b.err = errors.New("forbidden")
	if err := lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err == nil || errors.Is(err, cloudprovider.ImplementedElsewhere) {
		t.Errorf("EnsureLoadBalancerDeleted with a failing backend = %v", err)
	}
	if name := lb.GetLoadBalancerName(ctx, "kubernetes", svc); name != "a01234567" {
		t.Errorf("name %q", name)
	}
	if ev := drain(rec); len(ev) != 0 {
		t.Errorf("events %v", ev)
	}

	// Without Herald's controller in the process: a Warning on the Service.
	p.SetBackend(nil, nil)
	if _, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc, nil); !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		t.Errorf("EnsureLoadBalancer without backend = %v", err)
	}
	if ev := drain(rec); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+EventNoHeraldController) {
		t.Errorf("events %q", ev)
	}
}
