package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// ccmBinary is the cloud controller manager's own binary (cmd/herald-ccm),
// kept out of this one so that every other role stays small.
const ccmBinary = "herald-ccm"

// runCCM is `herald ccm`: it replaces this process with herald-ccm, found
// beside this binary (as in Herald's image) or in PATH, with the same
// arguments.
func runCCM(args []string, _, stderr io.Writer) int {
	path, err := findCCM()
	if err != nil {
		fmt.Fprintln(stderr, "herald ccm:", err)
		return 2
	}
	err = syscall.Exec(path, append([]string{ccmBinary}, args...), os.Environ())
	fmt.Fprintf(stderr, "herald ccm: running %s: %v\n", path, err)
	return 1
}

// findCCM looks for herald-ccm beside the running binary, then in PATH.
func findCCM() (string, error) {
	self, err := os.Executable()
	if err == nil {
		p := filepath.Join(filepath.Dir(self), ccmBinary)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(ccmBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("the cloud controller manager is the binary %s (in Herald's image beside herald; make build puts it in bin/), found neither beside %s nor in PATH", ccmBinary, self)
}
