//go:build integration

package charts

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/controller/svclb"
)

// TestSvclbAdmissionPolicy: with the chart's RBAC and its ValidatingAdmissionPolicy installed, the controller's
// ServiceAccount (impersonated) may create the svclb DaemonSet svclb.Build makes, and nothing that would run
// as another component: another ServiceAccount (the speaker's) or a mounted token, the host network, a host path,
// privilege, a capability beyond NET_ADMIN, another image, an init container, or a DaemonSet without Herald's
// labels. Without the policy (the chart before it), every one of them was created.
func TestSvclbAdmissionPolicy(t *testing.T) {
	const ns, svclbNS, image = "herald-vap", "herald-vap-svclb", "herald.test/herald:svclb"
	values := []string{"--set", "serviceLB.image=" + image}
	installRBAC(t, ns, svclbNS, values...)
	applyPolicies(t, ns, []string{ns + "-svclb"}, append([]string{"--set", "serviceLB.namespace=" + svclbNS, "--set", "serviceLB.createNamespace=false"}, values...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctl := newClients(t, as(ns, ns+"-controller")).cs.AppsV1().DaemonSets(svclbNS)
	admin := newClients(t, srv.Config).cs.AppsV1().DaemonSets(svclbNS)

	svc := forwardedService()
	built := func(name string) *appsv1.DaemonSet {
		ds, problems := svclb.Build(svc, svclb.Options{Image: image, Namespace: svclbNS})
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		ds.Name = name
		return ds
	}
	create := func(ds *appsv1.DaemonSet) error {
		_, err := ctl.Create(ctx, ds, metav1.CreateOptions{})
		if err == nil {
			_ = admin.Delete(ctx, ds.Name, metav1.DeleteOptions{})
		}
		return err
	}

	// The policy takes effect a moment after it is created: wait until a DaemonSet of another image is refused
	// (a positive signal), deleting the ones let in before.
	other := built("svclb-other")
	other.Spec.Template.Spec.Containers[0].Image = "busybox"
	deadline := time.Now().Add(time.Minute)
	for {
		err := create(other)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			break
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a svclb DaemonSet of another image is still admitted a minute after the policy was created")
		}
		time.Sleep(200 * time.Millisecond)
	}

	if err := create(built("svclb-web")); err != nil {
		t.Fatalf("the DaemonSet svclb.Build makes is refused: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*appsv1.DaemonSet)
		msg    string
	}{
		{"the speaker's ServiceAccount", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.ServiceAccountName = ns + "-speaker" }, "default ServiceAccount"},
		{"a mounted token", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.AutomountServiceAccountToken = nil }, "without a token"},
		{"the host network", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.HostNetwork = true
			ds.Spec.Template.Spec.SecurityContext.Sysctls = nil // not allowed with the host network
		}, "host namespace"},
		{"the host PID namespace", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostPID = true }, "host namespace"},
		{"a host path", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			ds.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "root", MountPath: "/host"}}
		}, "no volume"},
		{"privileged", func(ds *appsv1.DaemonSet) {
			yes := true
			ds.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = &yes
			ds.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = &yes
			// The test's API server runs without --allow-privileged and refuses it first; clusters that allow
			// privileged pods get the policy's message.
		}, "unprivileged|disallowed by cluster policy"},
		{"SYS_ADMIN", func(ds *appsv1.DaemonSet) {
			c := ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities
			c.Add = append(c.Add, "SYS_ADMIN")
		}, "NET_ADMIN"},
		{"capabilities not dropped", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Drop = nil
		}, "dropped"},
		{"another image", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "busybox" }, "Herald's image"},
		{"an init container", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "x", Image: image}}
		}, "init"},
		{"without Herald's labels", func(ds *appsv1.DaemonSet) { delete(ds.Labels, svclb.LabelManagedBy) }, "managed-by=herald"},
	} {
		ds := built("svclb-bad")
		tc.mutate(ds)
		err := create(ds)
		if err == nil {
			t.Errorf("%s: created", tc.name)
			continue
		}
		if !slices.ContainsFunc(strings.Split(tc.msg, "|"), func(m string) bool { return strings.Contains(err.Error(), m) }) {
			t.Errorf("%s: refused with %q, want a message with %q", tc.name, err, tc.msg)
		}
	}
	// Only the controller is held to it: an administrator may still create what it likes there.
	if _, err := admin.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Errorf("an administrator's DaemonSet of another image is refused: %v", err)
	}
	_ = admin.Delete(ctx, other.Name, metav1.DeleteOptions{})
}
