//go:build unix

package ipam

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) used by the process so
// far. Benchmarks report it beside wall time because the machines they run
// on are shared: wall time includes the time other processes held the CPU.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
