//go:build unix

package plan

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system, garbage collector
// included) the process used so far. BenchmarkCompute reports it beside wall
// time because the machines it runs on are shared.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
