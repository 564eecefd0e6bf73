package svclb

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

// FuzzTolerations feeds the Service's tolerations annotation (any tenant
// may write it; the controller turns it into the svclb pods'
// tolerations): whatever it holds, the result is either problems and no
// tolerations, or tolerations every one of which the API server would
// accept on a pod, starting with the pool's and each covered by the pool's
// allowedTolerations.
func FuzzTolerations(f *testing.F) {
	f.Add(`[{"key":"dedicated","operator":"Equal","value":"lb","effect":"NoSchedule"}]`)
	f.Add("- key: dedicated\n  operator: Exists\n  effect: NoExecute\n  tolerationSeconds: 30\n")
	f.Add(`[{"operator":"Equal"},{"key":"a b","effect":"Sometimes"}]`)
	f.Add(`{"key":"not-a-list"}`)
	f.Add("a: &a [*a, *a, *a, *a]\n")
	f.Fuzz(func(t *testing.T, raw string) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app",
			Annotations: map[string]string{v1beta1.AnnotationSvcLBTolerations: raw}}}
		// Everything is allowed here but the control-plane taint: what the
		// parser lets through is then what the pool's allow-list refuses.
		terms := config.ForwarderTerms{Tolerations: []v1beta1.Toleration{{Key: "pool", Operator: "Exists"}},
			AllowedTolerations: []v1beta1.Toleration{{Key: "dedicated", Operator: "Exists"}, {Key: "", Operator: "Exists"}}}
		tols, problems := Tolerations(svc, terms)
		if len(problems) > 0 {
			if tols != nil {
				t.Fatalf("%q: problems %v and tolerations %v", raw, problems, tols)
			}
			for _, p := range problems {
				if p.Field == "" || p.Reason == "" {
					t.Fatalf("%q: a problem without field or reason: %+v", raw, p)
				}
			}
			return
		}
		if len(tols) == 0 || tols[0].Key != "pool" {
			t.Fatalf("%q: tolerations %v do not start with the pool's", raw, tols)
		}
		for _, tol := range tols[1:] {
			if !config.Covers(terms.AllowedTolerations, fromCore(tol)) {
				t.Fatalf("%q: toleration %+v kept though the pool does not allow it", raw, tol)
			}
			if errs := ValidateToleration(tol); len(errs) > 0 {
				t.Fatalf("%q: toleration %+v kept though invalid: %v", raw, tol, errs)
			}
		}
	})
}
