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
	}
	for _, tc := range tests {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
