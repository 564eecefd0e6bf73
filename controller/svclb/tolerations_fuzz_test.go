package svclb

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzTolerations feeds the Service's tolerations annotation (any tenant
// may write it; the controller turns it into the svclb pods'
// tolerations): whatever it holds, the result is either problems and no
// tolerations, or tolerations every one of which the API server would
// accept on a pod, starting with the control-plane ones.
func FuzzTolerations(f *testing.F) {
	f.Add(`[{"key":"dedicated","operator":"Equal","value":"lb","effect":"NoSchedule"}]`)
	f.Add("- key: dedicated\n  operator: Exists\n  effect: NoExecute\n  tolerationSeconds: 30\n")
	f.Add(`[{"operator":"Equal"},{"key":"a b","effect":"Sometimes"}]`)
	f.Add(`{"key":"not-a-list"}`)
	f.Add("a: &a [*a, *a, *a, *a]\n")
	f.Fuzz(func(t *testing.T, raw string) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app",
			Annotations: map[string]string{AnnotationTolerations: raw}}}
		tols, problems := Tolerations(svc)
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
		base := controlPlaneTolerations()
		if len(tols) < len(base) {
			t.Fatalf("%q: %d tolerations, fewer than the control-plane ones", raw, len(tols))
		}
		for i, tol := range tols {
			if i < len(base) && tol != base[i] {
				t.Fatalf("%q: toleration %d is %+v, want the control-plane %+v", raw, i, tol, base[i])
			}
			if errs := ValidateToleration(tol); len(errs) > 0 {
				t.Fatalf("%q: toleration %+v kept though invalid: %v", raw, tol, errs)
			}
		}
	})
}
