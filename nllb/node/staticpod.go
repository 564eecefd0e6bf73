package node

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
)

// Args is the `herald nllb` command line (after "nllb") that parses back to
// o: every flag explicit, so the static pod does not depend on the
// binary's defaults. The fields that are no flags (Registerer, Logger,
// Lookup) are left out.
func (o Options) Args(logLevel string) []string {
	b := func(v bool) string { return strconv.FormatBool(v) }
	d := func(v time.Duration) string { return v.String() }
	u := func(v uint16) string { return strconv.Itoa(int(v)) }
	args := []string{
		"--kubeconfig=" + o.KubeconfigIn,
		"--patched-kubeconfig=" + o.KubeconfigOut,
		"--patched-kubeconfig-resync=" + d(o.KubeconfigResync),
		"--state-file=" + o.StateFile,
		"--state-file-poll=" + d(o.StateFilePoll),
	}
	args = append(args, "--seed-resolve-interval="+d(o.SeedResolveInterval))
	if len(o.Seeds) > 0 {
		s := make([]string, len(o.Seeds))
		for i, a := range o.Seeds {
			s[i] = a.String()
		}
		args = append(args, "--upstreams="+strings.Join(s, ","))
	}
	args = append(args,
		"--loopback="+o.Loopback,
		"--apiserver-port="+u(o.APIServerPort),
		"--konnectivity="+b(o.Konnectivity),
		"--konnectivity-port="+u(o.KonnectivityPort),
		"--konnectivity-upstream-port="+u(o.KonnectivityUpstreamPort),
		"--health-mode="+string(o.HealthMode),
		"--health-interval="+d(o.Thresholds.Interval),
		"--health-timeout="+d(o.Thresholds.Timeout),
		"--unhealthy-after="+strconv.Itoa(o.Thresholds.UnhealthyAfter),
		"--healthy-after="+strconv.Itoa(o.Thresholds.HealthyAfter),
		"--dial-timeout="+d(o.DialTimeout),
		"--watch-endpoints="+b(o.WatchEndpoints),
		"--metrics-bind-address="+o.MetricsAddr,
	)
	if logLevel != "" {
		args = append(args, "--log-level="+logLevel)
	}
	return args
}

// HostMount is one host directory the static pod mounts at the same path.
type HostMount struct {
	Path     string
	Writable bool
}

// HostMounts are the host directories `herald nllb` with o needs, at the
// same paths: writable the directories of the state file and the patched
// kubeconfig (files there are replaced by a rename, so the directory is
// mounted, never the file), read-only the kubeconfig's directory, the
// directories of the files the kubeconfig names (CA, client certificate and
// key, token file: relative ones against the kubeconfig's directory,
// symbolic links such as kubelet-client-current.pem followed to their
// targets) when the kubeconfig can be read now, and extra. A directory
// inside another mount of at least its access is left out.
func HostMounts(o Options, extra []string) ([]HostMount, error) {
	want := map[string]bool{} // path -> writable
	add := func(p string, rw bool) error {
		if p == "" {
			return nil
		}
		if !filepath.IsAbs(p) {
			return fmt.Errorf("host path %q: must be absolute (the static pod mounts it at the same path)", p)
		}
		p = filepath.Clean(p)
		want[p] = want[p] || rw
		return nil
	}
	if o.StateFile != "" {
		if err := add(filepath.Dir(o.StateFile), true); err != nil {
			return nil, err
		}
	}
	if o.KubeconfigOut != "" {
		if err := add(filepath.Dir(o.KubeconfigOut), true); err != nil {
			return nil, err
		}
	}
	if err := add(filepath.Dir(o.KubeconfigIn), false); err != nil {
		return nil, err
	}
	files, _ := KubeconfigFiles(o.KubeconfigIn) // not readable here: its directory and extra only
	for _, f := range files {
		if err := add(filepath.Dir(f), false); err != nil {
			return nil, err
		}
	}
	for _, p := range extra {
		if err := add(p, false); err != nil {
			return nil, err
		}
	}
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	slices.Sort(paths) // parents first: a nested mount goes on top of its parent's
	var out []HostMount
	for _, p := range paths {
		covered := false
		for q, rw := range want {
			if q != p && within(p, q) && (rw || !want[p]) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, HostMount{Path: p, Writable: want[p]})
		}
	}
	return out, nil
}

// KubeconfigFiles are the files the kubeconfig at path names for its
// current context (CA, client certificate, key, token file), absolute, with
// the targets of symbolic links added; an error when it cannot be read.
func KubeconfigFiles(path string) ([]string, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range []string{rc.CAFile, rc.CertFile, rc.KeyFile, rc.BearerTokenFile} {
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(path), f)
		}
		out = append(out, f)
		if t, err := filepath.EvalSymlinks(f); err == nil && t != f {
			if abs, err := filepath.Abs(t); err == nil {
				out = append(out, abs)
			}
		}
	}
	return out, nil
}

// within: p is q or lies inside it.
func within(p, q string) bool {
	return p == q || q == "/" || strings.HasPrefix(p, q+"/")
}

// StaticPodOptions are the static pod's own settings.
type StaticPodOptions struct {
	// Image runs `herald` (at /herald, the image's entrypoint).
	Image string
	// ImagePullPolicy: IfNotPresent by default (an image loaded on the node
	// beforehand needs no registry at boot).
	ImagePullPolicy corev1.PullPolicy
	// Name (default herald-nllb; the kubelet adds the node's name) and
	// Namespace (default kube-system) of the pod.
	Name, Namespace string
	// LogLevel is herald nllb's --log-level ("": its default).
	LogLevel string
	// HostPaths are extra host directories mounted read-only.
	HostPaths []string
}

// Critical priority, as the kubelet and the API server's priority
// admission know it.
const (
	systemNodeCritical         = "system-node-critical"
	systemNodeCriticalPriority = int32(2000001000)
)

// StaticPod is the manifest that runs `herald nllb` with o as a static pod:
// host network (the balancer listens on the node's loopback), critical
// priority, no service account token (it talks to nothing but the API
// servers, with the node's credentials), root without any capability on a
// read-only root filesystem, the host directories of HostMounts, and, when
// o serves metrics, a liveness probe on /healthz there.
func StaticPod(o Options, sp StaticPodOptions) (*corev1.Pod, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("nllb options: %w", err)
	}
	if sp.Image == "" {
		return nil, errors.New("static pod: an image is required")
	}
	if o.APIServerPort == 0 || o.Konnectivity && o.KonnectivityPort == 0 {
		return nil, errors.New("static pod: the balancer ports must be set (0 picks a free port: tests only)")
	}
	if sp.Name == "" {
		sp.Name = "herald-nllb"
	}
	if sp.Namespace == "" {
		sp.Namespace = "kube-system"
	}
	if sp.ImagePullPolicy == "" {
		sp.ImagePullPolicy = corev1.PullIfNotPresent
	}
	mounts, err := HostMounts(o, sp.HostPaths)
	if err != nil {
		return nil, err
	}
	yes, no, root := true, false, int64(0)
	prio := systemNodeCriticalPriority
	c := corev1.Container{
		Name:            "nllb",
		Image:           sp.Image,
		ImagePullPolicy: sp.ImagePullPolicy,
		Args:            append([]string{"nllb"}, o.Args(sp.LogLevel)...),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                &root,
			Privileged:               &no,
			AllowPrivilegeEscalation: &no,
			ReadOnlyRootFilesystem:   &yes,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: sp.Name, Namespace: sp.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "herald", "app.kubernetes.io/component": "nllb"},
		},
		Spec: corev1.PodSpec{
			HostNetwork: true,
			// The node's resolver: no cluster DNS before the API is reachable.
			DNSPolicy:                    corev1.DNSDefault,
			PriorityClassName:            systemNodeCritical,
			Priority:                     &prio,
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			Containers:                   []corev1.Container{c},
		},
	}
	for i, m := range mounts {
		name := fmt.Sprintf("host-%d", i)
		typ := corev1.HostPathDirectory
		if m.Writable {
			typ = corev1.HostPathDirectoryOrCreate
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.Path, Type: &typ}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: name, MountPath: m.Path, ReadOnly: !m.Writable})
	}
	if o.MetricsAddr != "" {
		host, port, err := net.SplitHostPort(o.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("metrics address %q: %w", o.MetricsAddr, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("metrics address %q: want a port 1-65535", o.MetricsAddr)
		}
		get := &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(p))}
		if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() {
			// Host network: the probe must go where the server listens
			// (by default the kubelet probes the pod's IP, the node's).
			get.Host = a.String()
		} else if host != "" && err != nil {
			get.Host = host
		}
		pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: get},
			PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3,
		}
	}
	return pod, nil
}
