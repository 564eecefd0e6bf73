package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCCMExec: `herald ccm ARGS` replaces itself with herald-ccm from PATH
// (no herald-ccm beside the test binary), with the same arguments; without
// one it says where it looked. The exec runs in a child test process.
func TestCCMExec(t *testing.T) {
	if os.Getenv("HERALD_TEST_CCM_CHILD") == "1" {
		os.Exit(run([]string{"ccm", "--enable-load-balancer=false", "two words"}, os.Stdout, os.Stderr))
	}
	dir := t.TempDir()
	fake := "#!/bin/sh\nprintf '%s|' \"$0\" \"$@\"\nexit 7\n"
	if err := os.WriteFile(filepath.Join(dir, ccmBinary), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	child := func(path string) (string, int) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCCMExec$")
		cmd.Env = append(os.Environ(), "HERALD_TEST_CCM_CHILD=1", "PATH="+path)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := child(dir)
	if want := dir + "/herald-ccm|--enable-load-balancer=false|two words|"; code != 7 || out != want {
		t.Errorf("herald ccm with herald-ccm in PATH: exit %d, output %q; want exit 7 (the fake's), %q", code, out, want)
	}
	out, code = child(t.TempDir())
	if code != 2 || !strings.Contains(out, "herald ccm: the cloud controller manager is the binary herald-ccm") {
		t.Errorf("herald ccm without herald-ccm: exit %d, output %q; want 2 and where it looked", code, out)
	}
}

func TestCCMListed(t *testing.T) {
	var out bytes.Buffer
	run([]string{"--help"}, &out, &out)
	if !strings.Contains(out.String(), "  ccm         run as the cluster's cloud provider") {
		t.Errorf("herald --help does not list ccm:\n%s", out.String())
	}
}
