package svclb

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

func TestValidateToleration(t *testing.T) {
	secs := int64(30)
	tests := []struct {
		name string
		tol  corev1.Toleration
		want string // part of the one reason; "" = valid
	}{
		{name: "Equal with key and value", tol: corev1.Toleration{Key: "dedicated", Operator: "Equal", Value: "edge", Effect: "NoSchedule"}},
		{name: "empty operator means Equal", tol: corev1.Toleration{Key: "dedicated", Value: "edge"}},
		{name: "Equal with empty value", tol: corev1.Toleration{Key: "dedicated", Operator: "Equal"}},
		{name: "Exists with key", tol: corev1.Toleration{Key: "example.com/gpu", Operator: "Exists", Effect: "NoExecute"}},
		{name: "Exists without key tolerates everything", tol: corev1.Toleration{Operator: "Exists"}},
		{name: "tolerationSeconds with NoExecute", tol: corev1.Toleration{Key: "a", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: &secs}},
		{name: "PreferNoSchedule", tol: corev1.Toleration{Key: "a", Operator: "Exists", Effect: "PreferNoSchedule"}},

		{name: "Equal without key", tol: corev1.Toleration{Operator: "Equal", Value: "x"}, want: "operator must be Exists when key is empty"},
		{name: "empty operator without key", tol: corev1.Toleration{}, want: "operator must be Exists when key is empty"},
		{name: "Exists with value", tol: corev1.Toleration{Key: "a", Operator: "Exists", Value: "b"}, want: "must be empty when operator is Exists"},
		{name: "unknown operator", tol: corev1.Toleration{Key: "a", Operator: "In", Value: "b"}, want: `operator "In"`},
		{name: "operator case matters", tol: corev1.Toleration{Key: "a", Operator: "exists"}, want: `operator "exists"`},
		{name: "bad key", tol: corev1.Toleration{Key: "no spaces", Operator: "Exists"}, want: `key "no spaces"`},
		{name: "bad value", tol: corev1.Toleration{Key: "a", Operator: "Equal", Value: "not/a/label"}, want: `value "not/a/label"`},
		{name: "bad effect", tol: corev1.Toleration{Key: "a", Operator: "Exists", Effect: "NoRun"}, want: `effect "NoRun"`},
		{name: "tolerationSeconds without NoExecute", tol: corev1.Toleration{Key: "a", Operator: "Exists", Effect: "NoSchedule", TolerationSeconds: &secs},
			want: "tolerationSeconds is only allowed with effect NoExecute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ValidateToleration(tt.tol)
			if tt.want == "" {
				if len(got) > 0 {
					t.Errorf("valid toleration refused: %v", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tt.want) {
				t.Errorf("reasons %q, want one with %q", got, tt.want)
			}
		})
	}
}

func TestTolerations(t *testing.T) {
	cp := v1beta1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: "Exists", Effect: "NoSchedule"}
	pool := []corev1.Toleration{toCore(cp)}
	edge := corev1.Toleration{Key: "dedicated", Operator: "Equal", Value: "edge", Effect: "NoSchedule"}
	gpu := corev1.Toleration{Key: "gpu", Operator: "Exists"}
	terms := config.ForwarderTerms{Tolerations: []v1beta1.Toleration{cp}, AllowedTolerations: []v1beta1.Toleration{
		{Key: "dedicated", Value: "edge"}, // every effect, value edge
		{Key: "gpu", Operator: "Exists"},  // every value, every effect
	}}
	tests := []struct {
		name        string
		terms       *config.ForwarderTerms
		annotations map[string]string
		want        []corev1.Toleration
		problem     string
	}{
		{name: "none: the pool's only", want: pool},
		{name: "a pool without terms: none", terms: &config.ForwarderTerms{}, want: []corev1.Toleration{}},
		{name: "blank annotation", annotations: map[string]string{v1beta1.K3sAnnotationTolerations: "  "}, want: pool},
		{name: "JSON list", annotations: map[string]string{v1beta1.K3sAnnotationTolerations: `[{"key":"dedicated","operator":"Equal","value":"edge","effect":"NoSchedule"},{"key":"gpu","operator":"Exists"}]`},
			want: append(append([]corev1.Toleration(nil), pool...), edge, gpu)},
		{name: "YAML list", annotations: map[string]string{v1beta1.K3sAnnotationTolerations: "- key: gpu\n  operator: Exists\n"},
			want: append(append([]corev1.Toleration(nil), pool...), gpu)},
		{name: "Herald's annotation wins over k3s's", annotations: map[string]string{
			v1beta1.K3sAnnotationTolerations:   `[{"key":"gpu","operator":"Exists"}]`,
			v1beta1.AnnotationSvcLBTolerations: `[{"key":"dedicated","operator":"Equal","value":"edge","effect":"NoSchedule"}]`},
			want: append(append([]corev1.Toleration(nil), pool...), edge)},
		{name: "one bad of two: nothing, problem on the bad one", annotations: map[string]string{v1beta1.K3sAnnotationTolerations: `[{"key":"gpu","operator":"Exists"},{"operator":"Equal","value":"x"}]`},
			problem: "metadata.annotations[svccontroller.k3s.cattle.io/tolerations][1]: operator must be Exists"},
		{name: "the control plane, not allowed", annotations: map[string]string{v1beta1.AnnotationSvcLBTolerations: `[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists"}]`},
			problem: "does not allow the toleration node-role.kubernetes.io/control-plane"},
		{name: "every taint, not allowed", annotations: map[string]string{v1beta1.AnnotationSvcLBTolerations: `[{"operator":"Exists"}]`},
			problem: "does not allow the toleration every taint"},
		{name: "Exists where only a value is allowed", annotations: map[string]string{v1beta1.AnnotationSvcLBTolerations: `[{"key":"dedicated","operator":"Exists"}]`},
			problem: "does not allow the toleration dedicated"},
		{name: "another value", annotations: map[string]string{v1beta1.AnnotationSvcLBTolerations: `[{"key":"dedicated","value":"core"}]`},
			problem: "dedicated=core"},
		{name: "nothing allowed", terms: &config.ForwarderTerms{}, annotations: map[string]string{v1beta1.AnnotationSvcLBTolerations: `[{"key":"gpu","operator":"Exists"}]`},
			problem: "does not allow the toleration gpu"},
		{name: "an object, not a list", annotations: map[string]string{v1beta1.K3sAnnotationTolerations: `{"key":"gpu"}`}, problem: "not a JSON or YAML list"},
		{name: "broken YAML", annotations: map[string]string{v1beta1.K3sAnnotationTolerations: "- key: [gpu"}, problem: "not a JSON or YAML list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}}
			tm := terms
			if tt.terms != nil {
				tm = *tt.terms
			}
			got, problems := Tolerations(svc, tm)
			if tt.problem != "" {
				if got != nil || len(problems) != 1 || !strings.Contains(problems[0].String(), tt.problem) {
					t.Errorf("got %v, problems %v, want one with %q", got, problems, tt.problem)
				}
				return
			}
			if len(problems) > 0 || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v (problems %v), want %v", got, problems, tt.want)
			}
		})
	}
}

func TestPriorityClassName(t *testing.T) {
	terms := config.ForwarderTerms{PriorityClassName: "system-node-critical", AllowedPriorityClassNames: []string{"lb-high"}}
	for _, tt := range []struct {
		name        string
		terms       config.ForwarderTerms
		annotations map[string]string
		want        string
		problem     string
	}{
		{name: "the pool's", terms: terms, want: "system-node-critical"},
		{name: "the cluster default", terms: config.ForwarderTerms{}, want: ""},
		{name: "an allowed one", terms: terms, annotations: map[string]string{v1beta1.AnnotationSvcLBPriorityClass: "lb-high"}, want: "lb-high"},
		{name: "k3s's annotation", terms: terms, annotations: map[string]string{v1beta1.K3sAnnotationPriorityClass: "lb-high"}, want: "lb-high"},
		{name: "system-node-critical asked, not allowed", terms: terms, annotations: map[string]string{v1beta1.AnnotationSvcLBPriorityClass: "system-cluster-critical"},
			problem: "allows only the priority classes lb-high"},
		{name: "nothing allowed", terms: config.ForwarderTerms{}, annotations: map[string]string{v1beta1.AnnotationSvcLBPriorityClass: "lb-high"},
			problem: "lets no Service choose"},
		{name: "not a name", terms: terms, annotations: map[string]string{v1beta1.AnnotationSvcLBPriorityClass: "Not A Name"}, problem: "not a priority class name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}}
			got, problems := priorityClassName(svc, tt.terms)
			if tt.problem != "" {
				if len(problems) != 1 || !strings.Contains(problems[0].String(), tt.problem) {
					t.Errorf("got %q, problems %v, want one with %q", got, problems, tt.problem)
				}
				return
			}
			if len(problems) > 0 || got != tt.want {
				t.Errorf("got %q (problems %v), want %q", got, problems, tt.want)
			}
		})
	}
}

func TestNodeSelection(t *testing.T) {
	node := func(name string, kv ...string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		for i := 0; i < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
		return n
	}
	plain := []corev1.Node{node("c"), node("a"), node("b")}
	enable := []corev1.Node{node("a", v1beta1.K3sNodeLabelEnableLB, "true"), node("b", v1beta1.K3sNodeLabelEnableLB, "false"), node("c")}
	pools := []corev1.Node{node("a", v1beta1.K3sLabelLBPool, "edge"), node("b", v1beta1.K3sLabelLBPool, "core"), node("c"),
		node("d", v1beta1.K3sLabelLBPool, "edge", v1beta1.K3sNodeLabelEnableLB, "false"), node("e", v1beta1.K3sLabelLBPool, "edge", v1beta1.K3sNodeLabelEnableLB, "true")}
	zoned := []corev1.Node{node("a", "zone", "x", "role", "lb"), node("b", "zone", "y", "role", "lb"), node("c", "zone", "x")}
	svc := func(kv ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{}}}
		for i := 0; i < len(kv); i += 2 {
			s.Labels[kv[i]] = kv[i+1]
		}
		return s
	}
	tests := []struct {
		name  string
		svc   *corev1.Service
		pool  *metav1.LabelSelector
		nodes []corev1.Node
		want  []string
		reqs  int // node affinity requirements emitted
	}{
		{name: "no labels anywhere: every node, no affinity", svc: svc(), nodes: plain, want: []string{"a", "b", "c"}},
		{name: "no nodes", svc: svc(), nodes: nil, want: nil},
		{name: "enablelb on some node: only true qualifies", svc: svc(), nodes: enable, want: []string{"a"}, reqs: 1},
		{name: "enablelb only false anywhere: none", svc: svc(), nodes: []corev1.Node{node("a", v1beta1.K3sNodeLabelEnableLB, "false"), node("b")}, want: nil, reqs: 1},
		{name: "lbpool on the Service picks its nodes", svc: svc(v1beta1.K3sLabelLBPool, "edge"), nodes: pools[:3], want: []string{"a"}, reqs: 1},
		{name: "lbpool and enablelb together", svc: svc(v1beta1.K3sLabelLBPool, "edge"), nodes: pools, want: []string{"e"}, reqs: 2},
		{name: "no lbpool on the Service: every node (pools do not exclude)", svc: svc(), nodes: pools[:3], want: []string{"a", "b", "c"}},
		{name: "lbpool with no node", svc: svc(v1beta1.K3sLabelLBPool, "nowhere"), nodes: pools[:3], want: nil, reqs: 1},
		{name: "pool matchLabels", svc: svc(), pool: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "x", "role": "lb"}},
			nodes: zoned, want: []string{"a"}, reqs: 2},
		{name: "pool matchExpressions", svc: svc(), pool: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}},
			{Key: "role", Operator: metav1.LabelSelectorOpExists}}},
			nodes: zoned, want: []string{"a", "b"}, reqs: 2},
		{name: "pool NotIn and DoesNotExist", svc: svc(), pool: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "zone", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"y"}},
			{Key: "role", Operator: metav1.LabelSelectorOpDoesNotExist}}},
			nodes: zoned, want: []string{"c"}, reqs: 2},
		{name: "empty pool selector: every node", svc: svc(), pool: &metav1.LabelSelector{}, nodes: zoned, want: []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := NodeSelection(tt.svc, tt.pool, tt.nodes)
			if len(problems) > 0 || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("NodeSelection = %v (problems %v), want %v", got, problems, tt.want)
			}
			aff, _ := Affinity(tt.svc, tt.pool, tt.nodes)
			if tt.reqs == 0 {
				if aff != nil {
					t.Errorf("affinity %v, want none", aff)
				}
				return
			}
			if aff == nil {
				t.Fatalf("no affinity, want %d requirements", tt.reqs)
			}
			terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchExpressions) != tt.reqs {
				t.Errorf("affinity terms %v, want one term of %d requirements", terms, tt.reqs)
			}
			// The affinity the scheduler sees selects the same nodes.
			for _, n := range tt.nodes {
				if matchesTerm(n, terms[0]) != contains(tt.want, n.Name) {
					t.Errorf("node %s: affinity and NodeSelection disagree", n.Name)
				}
			}
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// matchesTerm evaluates a node selector term the way the scheduler does, for
// the operators NodeRequirements emits.
func matchesTerm(n corev1.Node, term corev1.NodeSelectorTerm) bool {
	for _, r := range term.MatchExpressions {
		v, ok := n.Labels[r.Key]
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			if !ok || !contains(r.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if ok && contains(r.Values, v) {
				return false
			}
		case corev1.NodeSelectorOpExists:
			if !ok {
				return false
			}
		case corev1.NodeSelectorOpDoesNotExist:
			if ok {
				return false
			}
		}
	}
	return true
}

func TestDrifted(t *testing.T) {
	want := mustBuild(t, testService(), testOpts)
	// readBack is want as the API server returns it: defaults filled in,
	// metadata of its own, labels added by someone else.
	readBack := func() *appsv1.DaemonSet {
		ds := want.DeepCopy()
		ds.ResourceVersion, ds.UID, ds.Generation = "42", "ds-uid", 3
		ds.Labels["example.com/owner"] = "ops"
		ds.Spec.RevisionHistoryLimit = new(int32)
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}
		ps := &ds.Spec.Template.Spec
		ps.DNSPolicy, ps.RestartPolicy, ps.SchedulerName = corev1.DNSClusterFirst, corev1.RestartPolicyAlways, "default-scheduler"
		ps.TerminationGracePeriodSeconds = new(int64)
		for i := range ps.Containers {
			c := &ps.Containers[i]
			c.TerminationMessagePath, c.TerminationMessagePolicy = "/dev/termination-log", corev1.TerminationMessageReadFile
			c.ReadinessProbe.TimeoutSeconds, c.ReadinessProbe.SuccessThreshold, c.ReadinessProbe.FailureThreshold = 1, 1, 3
		}
		ds.Status.NumberReady = 2
		return ds
	}
	tests := []struct {
		name    string
		mutate  func(*appsv1.DaemonSet)
		drifted bool
	}{
		{name: "as built", mutate: func(*appsv1.DaemonSet) {}},
		{name: "read back with defaults and foreign labels", mutate: nil},
		{name: "Herald label removed", mutate: func(ds *appsv1.DaemonSet) { delete(ds.Labels, v1beta1.LabelServiceUID) }, drifted: true},
		{name: "k3s pod label changed", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Labels[v1beta1.K3sLabelServiceName] = "other" }, drifted: true},
		{name: "selector changed", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Selector.MatchLabels["x"] = "y" }, drifted: true},
		{name: "image changed", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "herald:old" }, drifted: true},
		{name: "env changed", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[1].Env[4].Value = "10.43.0.99" }, drifted: true},
		{name: "container removed", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers = ds.Spec.Template.Spec.Containers[:1]
		}, drifted: true},
		{name: "hostPort changed", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Ports[0].HostPort = 8443 }, drifted: true},
		{name: "privileged", mutate: func(ds *appsv1.DaemonSet) {
			tr := true
			ds.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = &tr
		}, drifted: true},
		{name: "probe port changed", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Port.IntVal = 1
		}, drifted: true},
		{name: "priority class changed", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.PriorityClassName = "" }, drifted: true},
		{name: "toleration added", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = append(ds.Spec.Template.Spec.Tolerations, corev1.Toleration{Operator: "Exists"})
		}, drifted: true},
		{name: "affinity added", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Affinity = &corev1.Affinity{} }, drifted: true},
		{name: "service account token mounted", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.AutomountServiceAccountToken = nil
		}, drifted: true},
		{name: "Service links on", mutate: func(ds *appsv1.DaemonSet) {
			tr := true
			ds.Spec.Template.Spec.EnableServiceLinks = &tr
		}, drifted: true},
		{name: "sysctl removed", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.SecurityContext = nil }, drifted: true},
		{name: "seccomp profile removed (an older release built it)", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.SecurityContext.SeccompProfile = nil
		}, drifted: true},
		{name: "root filesystem writable", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = nil
		}, drifted: true},
		{name: "memory limit removed", mutate: func(ds *appsv1.DaemonSet) {
			delete(ds.Spec.Template.Spec.Containers[1].Resources.Limits, corev1.ResourceMemory)
		}, drifted: true},
		{name: "a limit a LimitRange added", mutate: func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			existing := readBack()
			if tt.mutate != nil {
				existing = want.DeepCopy()
				tt.mutate(existing)
			}
			if got := Drifted(existing, want); got != tt.drifted {
				t.Errorf("Drifted = %v, want %v", got, tt.drifted)
			}
		})
	}
	if !Drifted(nil, want) || !Drifted(want, nil) {
		t.Error("a missing DaemonSet is not drifted")
	}
}
