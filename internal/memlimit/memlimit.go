// Package memlimit gives the Go runtime a soft memory limit below the container's: 90 % of the cgroup's memory
// limit, unless GOMEMLIMIT says otherwise. Without one the garbage collector lets the heap grow to twice what is
// live before it collects (GOGC=100), so a process whose live heap is half its container limit gets killed for
// memory it did not need; with one it collects sooner as the limit nears.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Share is the part of the container limit given to the Go runtime; the rest is for memory the runtime does not
// count (thread stacks outside the heap, cgo, the kernel's accounting of page cache).
const Share = 0.9

// cgroupFiles are where the memory limit is read: cgroup v2, then v1.
var cgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// parseLimit reads a cgroup memory limit file's content: "max" (v2) or a v1 value of 2^62 or more means none.
func parseLimit(s string) (int64, bool, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("cgroup memory limit %q: %w", s, err)
	}
	if n <= 0 || n >= 1<<62 {
		return 0, false, nil
	}
	return n, true, nil
}

// Set applies Share of the cgroup memory limit as the runtime's soft limit and returns what it set (0: nothing,
// because GOMEMLIMIT is set or there is no limit). getenv and readFile are os.Getenv and os.ReadFile but for tests.
func Set(getenv func(string) string, readFile func(string) ([]byte, error)) (int64, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, nil // the operator's choice; the runtime read it at start
	}
	for _, f := range cgroupFiles {
		b, err := readFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		limit, ok, err := parseLimit(string(b))
		if err != nil || !ok {
			return 0, err
		}
		soft := int64(float64(limit) * Share)
		debug.SetMemoryLimit(soft)
		return soft, nil
	}
	return 0, nil
}

// SetFromEnvironment is Set with the process's environment and files.
func SetFromEnvironment() (int64, error) { return Set(os.Getenv, os.ReadFile) }
