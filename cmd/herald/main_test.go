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
		{[]string{"version"}, 0, "herald v0.1.0 (commit abc123, go", ""},
		{nil, 2, "Usage: herald <command>", ""},
		{[]string{"--help"}, 0, "  version     print the version", ""},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"speaker"}, 2, "", "herald speaker: --node-name (or NODE_NAME) is required"},
		{[]string{"svclb", "-h"}, 0, "", "DEST_IPS"},
		{[]string{"svclb", "extra"}, 2, "", `herald svclb: unexpected arguments: ["extra"]`},
		{[]string{"controller", "--svclb-image-pull-policy=Sometimes"}, 2, "", `--svclb-image-pull-policy="Sometimes": not Always, IfNotPresent or Never`},
		{[]string{"controller", "--webhook-bind-address=:9443"}, 2, "", "--webhook-bind-address needs --webhook-service or --webhook-cert-hosts"},
		{[]string{"controller", "-h"}, 2, "", "image of the svclb pods, Herald's own (default: $HERALD_IMAGE)"},
		{[]string{"nllb"}, 2, "", "herald nllb: the node's kubeconfig is required"},
		{[]string{"nllb", "-h"}, 0, "", "bootstrap mode"},
		{[]string{"cleanup"}, 2, "", "herald cleanup: --release is required"},
		{[]string{"cleanup", "-h"}, 0, "", "webhook certificate Secret"},
		{[]string{"cleanup", "--release=r", "--kubeconfig=/nonexistent/kubeconfig"}, 1, "", "cannot load kubeconfig"},
		{[]string{"cleanup", "--release=r", "x"}, 2, "", `herald cleanup: unexpected arguments: ["x"]`},
	}
	for _, tc := range tests {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}

func TestSvclbBadEnv(t *testing.T) {
	t.Setenv("SRC_PORT", "80")
	t.Setenv("DEST_PROTO", "TCP")
	t.Setenv("DEST_PORT", "http")
	t.Setenv("DEST_IPS", "10.43.0.10")
	var out, errOut bytes.Buffer
	if code := run([]string{"svclb"}, &out, &errOut); code != 3 || !strings.Contains(errOut.String(), `DEST_PORT=\"http\": not a port number`) {
		t.Errorf("svclb with DEST_PORT=http: code %d, stderr %q; want 3 and a message naming DEST_PORT", code, errOut.String())
	}
}
