//go:build integration

package svclb

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/kubeapi"
)

// Against a real kube-apiserver (`make integration`): every DaemonSet Build
// returns passes the API server's validation, and read back with the server's
// defaults it is not Drifted — so a restarted controller adopts it as is.

var srv *kubeapi.Server

func TestMain(m *testing.M) {
	os.Exit(kubeapi.RunTests(m, "herald-it-svclbds-", "../../config/crd", &srv))
}

func TestBuildAcceptedByAPIServer(t *testing.T) {
	cs, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "herald-system"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1beta1.K3sNodeLabelEnableLB: "true"}}}}
	pool := &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "role", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}}}
	tests := []struct {
		name string
		svc  *corev1.Service
		opts Options
	}{
		{name: "cluster v4, two ports", svc: testService(), opts: testOpts},
		{name: "local dual-stack, everything annotated, placed", svc: testService(func(s *corev1.Service) {
			s.Name = "a-very-long-service-name-that-is-cut-at-48-characters-x"
			s.UID = types.UID("fedcba98-0000-0000-0000-000000000000")
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
			s.Spec.ClusterIPs = []string{"fd00:43::10", "10.43.0.10"}
			s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24", "2001:db8::/32"}
			s.Labels = map[string]string{v1beta1.K3sLabelLBPool: "edge"}
			s.Annotations = map[string]string{
				v1beta1.K3sAnnotationPriorityClass: "lb-critical",
				v1beta1.K3sAnnotationTolerations:   "- {key: dedicated, operator: Equal, value: edge, effect: NoExecute, tolerationSeconds: 30}\n- {operator: Exists}\n",
			}
		}), opts: Options{Namespace: ns, Image: "herald:test", PoolNodeSelector: pool, Nodes: nodes,
			Forwarders: config.ForwarderTerms{PriorityClassName: config.DefaultForwarderPriorityClass, AllowedPriorityClassNames: []string{"lb-critical"},
				AllowedTolerations: []v1beta1.Toleration{{Key: "dedicated", Operator: "Exists"}, {Operator: "Exists"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := mustBuild(t, tt.svc, tt.opts)
			got, err := cs.AppsV1().DaemonSets(ns).Create(ctx, want, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("the API server refused the DaemonSet: %v", err)
			}
			if Drifted(got, want) {
				t.Errorf("read back after creation, Drifted says it drifted:\n got %+v\nwant %+v", got.Spec.Template.Spec, want.Spec.Template.Spec)
			}
			got.Spec.Template.Spec.Containers[0].Env[0].Value = "1"
			if !Drifted(got, want) {
				t.Error("a changed SRC_PORT is not drifted")
			}
		})
	}
}

// TestValidateTolerationAgreesWithAPIServer puts each toleration of
// TestValidateToleration's kinds into a DaemonSet as is (past Build) and
// checks that the API server refuses exactly those ValidateToleration refuses.
func TestValidateTolerationAgreesWithAPIServer(t *testing.T) {
	cs, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "herald-tolerations"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secs := int64(30)
	tols := []corev1.Toleration{
		{Key: "dedicated", Operator: "Equal", Value: "edge", Effect: "NoSchedule"},
		{Key: "dedicated", Value: "edge"},
		{Key: "dedicated", Operator: "Equal"},
		{Key: "example.com/gpu", Operator: "Exists", Effect: "NoExecute"},
		{Operator: "Exists"},
		{Key: "a", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs},
		{Operator: "Equal", Value: "x"},
		{},
		{Key: "a", Operator: "Exists", Value: "b"},
		{Key: "a", Operator: "In", Value: "b"},
		{Key: "a", Operator: "exists"},
		{Key: "no spaces", Operator: "Exists"},
		{Key: "a", Operator: "Equal", Value: "not/a/label"},
		{Key: "a", Operator: "Exists", Effect: "NoRun"},
		{Key: "a", Operator: "Exists", Effect: "NoSchedule", TolerationSeconds: &secs},
	}
	for i, tol := range tols {
		ds := mustBuild(t, testService(), Options{Namespace: ns, Image: "herald:test"})
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{tol}
		_, err := cs.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		ours := ValidateToleration(tol)
		if (err == nil) != (len(ours) == 0) {
			t.Errorf("toleration %d %+v: API server says %v, ValidateToleration says %q", i, tol, err, ours)
		}
	}
}
