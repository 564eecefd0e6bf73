//go:build unix

package atomicfile

import "syscall"

// safeOpenFlags: refuse a final symlink (ELOOP), do not block on a FIFO
// without a writer, never take a terminal as controlling terminal.
const safeOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_NOCTTY
