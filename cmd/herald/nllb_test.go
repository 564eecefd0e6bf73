package main

import (
	"io"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/herald-lb/herald/nllb/node"
)

func TestNLLBFlags(t *testing.T) {
	f, err := parseNLLBFlags([]string{"--kubeconfig", "/etc/kubernetes/kubelet.conf"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := f.o
	if o.APIServerPort != 7443 || o.Konnectivity || o.KonnectivityPort != 7132 || o.KonnectivityUpstreamPort != 8132 ||
		o.HealthMode != node.HealthReadyz || o.Thresholds.Interval != 5*time.Second || o.Thresholds.UnhealthyAfter != 5 ||
		o.Thresholds.HealthyAfter != 3 || o.Loopback != "auto" || o.StateFile != "/var/lib/herald/feed/nllb-upstreams.json" ||
		o.WatchEndpoints || o.StateFilePoll != 2*time.Second || o.SeedResolveInterval != time.Minute {
		t.Errorf("defaults: %+v", o)
	}
	f, err = parseNLLBFlags([]string{"--kubeconfig", "/k", "--patched-kubeconfig", "/p", "--upstreams", "10.0.0.1:6443, [fd00::1]:6443",
		"--konnectivity", "--konnectivity-port", "7133", "--health-mode", "tcp", "--health-interval", "2s", "--health-timeout", "1s",
		"--unhealthy-after", "3", "--healthy-after", "2", "--loopback", "ipv6", "--apiserver-port", "7444",
		"--watch-endpoints", "--state-file-poll", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o = f.o
	if o.KubeconfigOut != "/p" || !slices.Equal(o.Seeds, []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:6443"), netip.MustParseAddrPort("[fd00::1]:6443")}) ||
		!o.Konnectivity || o.KonnectivityPort != 7133 || o.HealthMode != node.HealthTCP || o.Thresholds.Interval != 2*time.Second ||
		o.Thresholds.Timeout != time.Second || o.Thresholds.UnhealthyAfter != 3 || o.Thresholds.HealthyAfter != 2 ||
		o.Loopback != "ipv6" || o.APIServerPort != 7444 || !o.WatchEndpoints || o.StateFilePoll != 0 {
		t.Errorf("flags: %+v", o)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{nil, "kubeconfig is required"},
		{[]string{"--kubeconfig", "/k", "--upstreams", "apiserver:6443"}, "--upstreams"},
		{[]string{"--kubeconfig", "/k", "--apiserver-port", "0"}, "--apiserver-port 0"},
		{[]string{"--kubeconfig", "/k", "--konnectivity-port", "70000"}, "--konnectivity-port 70000"},
		{[]string{"--kubeconfig", "/k", "--health-mode", "http"}, "health mode"},
		{[]string{"--kubeconfig", "/k", "--health-timeout", "10s"}, "must not exceed"},
		{[]string{"--kubeconfig", "/k", "--patched-kubeconfig", "/k"}, "must differ"},
		{[]string{"--kubeconfig", "/k", "extra"}, "unexpected arguments"},
		{[]string{"--kubeconfig", "/k", "--state-file-poll", "-1s"}, "must not be negative"},
		{[]string{"--kubeconfig", "/k", "--seed-resolve-interval", "-1s"}, "seed resolve interval"},
	} {
		_, err := parseNLLBFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
		}
	}
}

// TestNLLBStaticPodArgsParseBack: for each command line, the static pod's
// container runs `herald nllb` with arguments that parse back to exactly
// the options the command line gave (defaults made explicit).
func TestNLLBStaticPodArgsParseBack(t *testing.T) {
	for _, args := range [][]string{
		{"--kubeconfig", "/etc/kubernetes/kubelet.conf"},
		{"--kubeconfig", "/etc/kubernetes/kubelet.conf", "--patched-kubeconfig", "/var/lib/herald/kubelet-nllb.conf",
			"--metrics-bind-address", "127.0.0.1:7574", "--log-level", "debug"},
		{"--kubeconfig", "/var/lib/rancher/k3s/agent/kubelet.kubeconfig", "--patched-kubeconfig", "/var/lib/herald/k3s-kubelet.conf",
			"--upstreams", "10.0.0.11:6443,10.0.0.12:6443", "--konnectivity", "--konnectivity-port", "7133",
			"--konnectivity-upstream-port", "8133", "--health-mode", "tcp", "--health-interval", "3s", "--health-timeout", "1s",
			"--unhealthy-after", "2", "--healthy-after", "4", "--dial-timeout", "1500ms", "--apiserver-port", "7444"},
		{"--kubeconfig", "/k/kubelet.conf", "--loopback", "ipv6", "--upstreams", "[fd00::11]:6443", "--state-file", "",
			"--patched-kubeconfig-resync", "1m"},
		{"--kubeconfig", "/k/kubelet.conf", "--watch-endpoints", "--state-file-poll", "0", "--state-file", "/srv/nllb/u.json"},
		{"--kubeconfig", "/k/kubelet.conf", "--seed-resolve-interval", "0"},
		{"--kubeconfig", "/k/kubelet.conf", "--seed-resolve-interval", "15s"},
	} {
		full := append([]string{"--image", "localhost/herald:dev"}, args...)
		f, sp, err := parseNLLBStaticPodFlags(full, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		pod, err := node.StaticPod(f.o, sp)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		c := pod.Spec.Containers[0]
		if c.Args[0] != "nllb" || c.Image != "localhost/herald:dev" {
			t.Fatalf("%q: container %s runs %q", args, c.Image, c.Args)
		}
		back, err := parseNLLBFlags(c.Args[1:], io.Discard)
		if err != nil {
			t.Fatalf("%q: the manifest's args %q do not parse: %v", args, c.Args[1:], err)
		}
		if !reflect.DeepEqual(back.o, f.o) || back.logLevel != f.logLevel {
			t.Errorf("%q: the manifest's args parse to\n%+v (log %s), want\n%+v (log %s)", args, back.o, back.logLevel, f.o, f.logLevel)
		}
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--kubeconfig", "/k"}, "--image is required"},
		{[]string{"--image", "h", "--kubeconfig", "/k", "--image-pull-policy", "Sometimes"}, "--image-pull-policy"},
		{[]string{"--image", "h"}, "kubeconfig is required"},
	} {
		_, _, err := parseNLLBStaticPodFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
		}
	}
}

// TestNLLBStaticPodCommand: the subcommand prints a Pod manifest.
func TestNLLBStaticPodCommand(t *testing.T) {
	var out, errs strings.Builder
	if rc := run([]string{"nllb", "static-pod", "--image", "herald:1", "--kubeconfig", "/nonexistent/kubelet.conf",
		"--host-paths", "/var/lib/kubelet/pki"}, &out, &errs); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errs.String())
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(out.String()), &pod); err != nil {
		t.Fatalf("not a Pod: %v\n%s", err, out.String())
	}
	if pod.Kind != "Pod" || pod.Name != "herald-nllb" || pod.Namespace != "kube-system" || !pod.Spec.HostNetwork {
		t.Errorf("manifest: %+v", pod)
	}
	if !strings.Contains(errs.String(), "cannot be read here") || !strings.Contains(errs.String(), "no liveness probe") {
		t.Errorf("stderr: %s", errs.String())
	}
}
