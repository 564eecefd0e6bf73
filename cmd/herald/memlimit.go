package main

import (
	"log/slog"

	"github.com/herald-lb/herald/internal/memlimit"
)

// setMemoryLimit gives the Go runtime a soft memory limit of 90 % of the container's (internal/memlimit), unless
// GOMEMLIMIT is set.
func setMemoryLimit(log *slog.Logger) {
	soft, err := memlimit.SetFromEnvironment()
	switch {
	case err != nil:
		log.Warn("cannot read the container's memory limit; no soft limit for the Go runtime", "error", err)
	case soft > 0:
		log.Info("Go runtime soft memory limit set from the container's", "bytes", soft, "share", memlimit.Share)
	}
}
