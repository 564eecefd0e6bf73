package main

import (
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

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
		o.Thresholds.HealthyAfter != 3 || o.Loopback != "auto" || o.StateFile != "/var/lib/herald/nllb-upstreams.json" ||
		o.WatchEndpoints || o.StateFilePoll != 2*time.Second {
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
	} {
		_, err := parseNLLBFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
		}
	}
}
