// Package cputime reads the process's CPU time, which benchmarks report
// beside wall time: the machines they run on are shared, and wall time
// includes the time other processes held the CPU.
package cputime

import "time"

// Process returns the CPU time (user + system, the garbage collector's
// threads included) the process has used so far; 0 where it is not measured.
func Process() time.Duration { return process() }
