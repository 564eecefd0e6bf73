package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	version, commit = "v0.1.0", "abc123"
	tests := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{
		{[]string{"version"}, 0, "herald-ccm v0.1.0 (commit abc123, go", ""},
		{[]string{"--enable-load-balancer=false", "--enable-node-lifecycle=false"}, 2, "", "herald ccm: --enable-load-balancer=false and --enable-node-lifecycle=false: nothing to run"},
		{[]string{"--cloud-provider=aws"}, 2, "", `--cloud-provider="aws": herald ccm runs only the provider "herald"`},
		{[]string{"--svclb-image-pull-policy=Sometimes"}, 2, "", `--svclb-image-pull-policy="Sometimes"`},
		{[]string{"--help"}, 0, "--enable-node-lifecycle", ""},
		{[]string{"--help"}, 0, "--herald-webhook-bind-address", ""},
		{[]string{"--herald-webhook-bind-address=:9443"}, 2, "", "herald ccm: --herald-webhook-bind-address needs --herald-webhook-service or --herald-webhook-cert-hosts"},
		{[]string{"--enable-load-balancer=false", "--herald-webhook-bind-address=:9443", "--herald-webhook-service=w"}, 2, "", "--herald-webhook-bind-address=:9443 needs --enable-load-balancer"},
	}
	for _, tc := range tests {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("run(%q) = %d, stdout %.300q, stderr %.300q; want %d, %q, %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
