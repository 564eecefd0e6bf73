package netnstest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// SweepDaemons kills the daemons that an earlier test process left behind
// when it was killed before its cleanup, and removes their directories.
// Tests name the state directory of every daemon they start
// <tmp>/<dirPrefix><test pid>-* and pass it on the daemon's command line;
// a daemon is swept when that test process no longer exists. Nothing else
// is touched.
func SweepDaemons(t testing.TB, dirPrefix string) {
	prefix := filepath.Join(os.TempDir(), dirPrefix)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	dead := map[string]bool{}
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		_, rest, ok := strings.Cut(string(b), prefix)
		if !ok {
			continue
		}
		owner, _, ok := strings.Cut(rest, "-")
		if _, err := strconv.Atoi(owner); !ok || err != nil || owner == strconv.Itoa(os.Getpid()) {
			continue
		}
		if _, err := os.Stat("/proc/" + owner); err == nil {
			continue // its test is still running
		}
		pid, _ := strconv.Atoi(strings.Split(f, "/")[2])
		t.Logf("killing pid %d, left by test process %s: %q", pid, owner, strings.ReplaceAll(string(b), "\x00", " "))
		_ = syscall.Kill(pid, syscall.SIGKILL)
		dead[owner] = true
	}
	for owner := range dead {
		dirs, _ := filepath.Glob(prefix + owner + "-*")
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	}
}
