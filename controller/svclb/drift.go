package svclb

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Drifted reports whether existing differs from want in a field Herald owns:
// the labels Herald sets (other labels are left alone), the selector, the pod
// template's labels Herald sets, and the parts of the pod spec Build fills
// (containers with their names, image, args, ports, env, probe and security
// context; service account token and Service links off; priority class,
// tolerations, affinity, sysctls). Defaults the API
// server fills in (terminationMessagePath, probe timeouts, dnsPolicy, ...)
// are not compared, so a DaemonSet created from want and read back is not
// drifted. Update would replace existing's template with want's.
func Drifted(existing, want *appsv1.DaemonSet) bool {
	if existing == nil || want == nil {
		return existing != want
	}
	if !subset(want.Labels, existing.Labels) || !subset(want.Spec.Template.Labels, existing.Spec.Template.Labels) {
		return true
	}
	if !equality.Semantic.DeepEqual(want.Spec.Selector, existing.Spec.Selector) {
		return true
	}
	e, w := &existing.Spec.Template.Spec, &want.Spec.Template.Spec
	if !boolEqual(e.AutomountServiceAccountToken, w.AutomountServiceAccountToken) ||
		!boolEqual(e.EnableServiceLinks, w.EnableServiceLinks) ||
		e.PriorityClassName != w.PriorityClassName ||
		!equality.Semantic.DeepEqual(e.Tolerations, w.Tolerations) ||
		!equality.Semantic.DeepEqual(e.Affinity, w.Affinity) ||
		!equality.Semantic.DeepEqual(sysctls(e), sysctls(w)) ||
		!equality.Semantic.DeepEqual(seccomp(e), seccomp(w)) ||
		len(e.Containers) != len(w.Containers) {
		return true
	}
	for i := range w.Containers {
		if containerDrifted(&e.Containers[i], &w.Containers[i]) {
			return true
		}
	}
	return false
}

// boolEqual: an unset want matches anything (the API server defaults it).
func boolEqual(have, want *bool) bool {
	return want == nil || (have != nil && *have == *want)
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func sysctls(s *corev1.PodSpec) []corev1.Sysctl {
	if s.SecurityContext == nil {
		return nil
	}
	return s.SecurityContext.Sysctls
}

func seccomp(s *corev1.PodSpec) *corev1.SeccompProfile {
	if s.SecurityContext == nil {
		return nil
	}
	return s.SecurityContext.SeccompProfile
}

// resourcesEqual: every request and limit Herald sets is there with its
// value (a LimitRange may add others).
func resourcesEqual(have, want corev1.ResourceRequirements) bool {
	for _, l := range [][2]corev1.ResourceList{{have.Requests, want.Requests}, {have.Limits, want.Limits}} {
		for k, w := range l[1] {
			if h, ok := l[0][k]; !ok || h.Cmp(w) != 0 {
				return false
			}
		}
	}
	return true
}

func containerDrifted(e, w *corev1.Container) bool {
	if e.Name != w.Name || e.Image != w.Image ||
		(w.ImagePullPolicy != "" && e.ImagePullPolicy != w.ImagePullPolicy) ||
		!equality.Semantic.DeepEqual(e.Command, w.Command) ||
		!equality.Semantic.DeepEqual(e.Args, w.Args) ||
		!equality.Semantic.DeepEqual(e.Env, w.Env) ||
		!equality.Semantic.DeepEqual(e.SecurityContext, w.SecurityContext) ||
		!resourcesEqual(e.Resources, w.Resources) ||
		len(e.Ports) != len(w.Ports) {
		return true
	}
	for i := range w.Ports {
		ep, wp := e.Ports[i], w.Ports[i]
		if ep.Name != wp.Name || ep.ContainerPort != wp.ContainerPort || ep.HostPort != wp.HostPort || ep.Protocol != wp.Protocol {
			return true
		}
	}
	if (e.ReadinessProbe == nil) != (w.ReadinessProbe == nil) {
		return true
	}
	if w.ReadinessProbe != nil {
		eh, wh := e.ReadinessProbe.HTTPGet, w.ReadinessProbe.HTTPGet
		if (eh == nil) != (wh == nil) || (wh != nil && (eh.Path != wh.Path || eh.Port != wh.Port)) ||
			e.ReadinessProbe.PeriodSeconds != w.ReadinessProbe.PeriodSeconds {
			return true
		}
	}
	return false
}
