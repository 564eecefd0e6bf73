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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/controller/svclb"
)

// setPort makes the DaemonSet's first container forward host port host to container port ctr.
func setPort(ds *appsv1.DaemonSet, host, ctr int32, proto corev1.Protocol) {
	p := &ds.Spec.Template.Spec.Containers[0].Ports[0]
	p.HostPort, p.ContainerPort, p.Protocol = host, ctr, proto
}

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
	// The chart bounds what tenants' Services run there with a ResourceQuota (issue 38).
	quota := false
	for _, o := range render(t, ns, "--set", "fullnameOverride="+ns, "--set", "serviceLB.namespace="+svclbNS) {
		if o.GetKind() == "ResourceQuota" && o.GetNamespace() == svclbNS {
			hard, _, _ := unstructured.NestedStringMap(o.Object, "spec", "hard")
			quota = hard["pods"] != "" && hard["requests.memory"] != "" && hard["limits.memory"] != ""
		}
	}
	if !quota {
		t.Error("the chart renders no ResourceQuota bounding pods and memory in the ServiceLB namespace")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctl := newClients(t, as(ns, ns+"-controller")).cs.AppsV1().DaemonSets(svclbNS)
	admin := newClients(t, srv.Config).cs.AppsV1().DaemonSets(svclbNS)

	svc := forwardedService()
	built := func(name string) *appsv1.DaemonSet {
		ds, problems := svclb.Build(svc, svclb.Options{Image: image, Namespace: svclbNS,
			Forwarders: config.ForwarderTerms{PriorityClassName: config.DefaultForwarderPriorityClass}})
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
		// Issue 38: what the deny-list let through.
		{"host port 6443", func(ds *appsv1.DaemonSet) { setPort(ds, 6443, 6443, corev1.ProtocolTCP) }, "serviceLB.deniedHostPorts"},
		{"host port 10250", func(ds *appsv1.DaemonSet) { setPort(ds, 10250, 10250, corev1.ProtocolTCP) }, "serviceLB.deniedHostPorts"},
		{"VXLAN 8472/UDP", func(ds *appsv1.DaemonSet) { setPort(ds, 8472, 8472, corev1.ProtocolUDP) }, "serviceLB.deniedHostPorts"},
		{"a NodePort", func(ds *appsv1.DaemonSet) { setPort(ds, 30080, 30080, corev1.ProtocolTCP) }, "serviceLB.deniedHostPorts"},
		{"host port beside the container port", func(ds *appsv1.DaemonSet) { setPort(ds, 8080, 22, corev1.ProtocolTCP) }, "the same as its container port"},
		{"a second port", func(ds *appsv1.DaemonSet) {
			c := &ds.Spec.Template.Spec.Containers[0]
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: "extra", ContainerPort: 8081, HostPort: 8081, Protocol: corev1.ProtocolTCP})
		}, "one TCP or UDP host port"},
		{"a host IP", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Ports[0].HostIP = "127.0.0.1" }, "every host address"},
		{"tolerations onto control-plane nodes", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}, "serviceLB.allowedTolerations"},
		{"tolerating every taint", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}, "serviceLB.allowedTolerations"},
		{"seccomp Unconfined (pod)", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, "RuntimeDefault seccomp"},
		{"no seccomp profile", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.SecurityContext.SeccompProfile = nil }, "RuntimeDefault seccomp"},
		{"seccomp Unconfined (container)", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, "no SELinux, AppArmor"},
		{"AppArmor Unconfined (pod)", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, "no SELinux, AppArmor or Windows options"},
		{"AppArmor Unconfined (container)", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, "no SELinux, AppArmor"},
		{"AppArmor annotation", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/" + ds.Spec.Template.Spec.Containers[0].Name: "unconfined"}
		}, "AppArmor|apparmor"},
		{"SELinux options", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
		}, "no SELinux"},
		{"procMount Unmasked", func(ds *appsv1.DaemonSet) {
			u := corev1.UnmaskedProcMount
			ds.Spec.Template.Spec.Containers[0].SecurityContext.ProcMount = &u
		}, "procMount"},
		{"a writable root filesystem", func(ds *appsv1.DaemonSet) {
			no := false
			ds.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = &no
		}, "read-only root filesystem"},
		{"another sysctl", func(ds *appsv1.DaemonSet) {
			sc := ds.Spec.Template.Spec.SecurityContext
			sc.Sysctls = append(sc.Sysctls, corev1.Sysctl{Name: "net.ipv4.conf.all.route_localnet", Value: "1"})
		}, "no sysctl but IP forwarding"},
		{"a runtime class", func(ds *appsv1.DaemonSet) { rc := "kata"; ds.Spec.Template.Spec.RuntimeClassName = &rc }, "runtime class"},
		{"system-cluster-critical", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.PriorityClassName = "system-cluster-critical" }, "priority class"},
		{"a node name", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "cp-1" }, "node name"},
		{"another command", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "id"}
		}, "herald svclb"},
		{"an environment variable of its own", func(ds *appsv1.DaemonSet) {
			c := &ds.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: "/tmp/x.so"})
		}, "forwarder's environment"},
		{"a Secret in the environment", func(ds *appsv1.DaemonSet) {
			c := &ds.Spec.Template.Spec.Containers[0]
			c.Env[0].Value = ""
			c.Env[0].ValueFrom = &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Key: "k"}}
		}, "forwarder's environment"},
		{"a probe of another host", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Host = "10.0.0.1"
		}, "no host"},
		{"an exec liveness probe", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"id"}}}}
		}, "no probe but"},
		{"no memory limit", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Resources.Limits = nil }, "limited to at most"},
		{"a memory limit of 8Gi", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("8Gi")
		}, "limited to at most"},
		{"a request of 4 CPUs", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
		}, "asks for at most"},
		{"huge pages", func(ds *appsv1.DaemonSet) {
			r := &ds.Spec.Template.Spec.Containers[0].Resources
			r.Limits["hugepages-2Mi"] = resource.MustParse("1Gi")
			r.Requests["hugepages-2Mi"] = resource.MustParse("1Gi")
		}, "claims no other resource"},
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
	// What the chart allows is admitted: a TCP port of an overlay's UDP number, a toleration and priority class
	// the chart's values list.
	tcp8472 := built("svclb-tcp8472")
	setPort(tcp8472, 8472, 8472, corev1.ProtocolTCP)
	if err := create(tcp8472); err != nil {
		t.Errorf("TCP 8472 (VXLAN is UDP) is refused: %v", err)
	}
	// Only the controller is held to it: an administrator may still create what it likes there.
	if _, err := admin.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Errorf("an administrator's DaemonSet of another image is refused: %v", err)
	}
	_ = admin.Delete(ctx, other.Name, metav1.DeleteOptions{})
}
