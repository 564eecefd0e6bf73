// Package logbuf is a log sink for tests: a buffer that log handlers on
// several goroutines write to, and that the test reads and counts lines in.
package logbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is safe for concurrent writes and reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count is the number of lines that contain every one of sub.
func (l *Buffer) Count(sub ...string) int { return len(l.Lines(sub...)) }

// Lines are the lines that contain every one of sub (every line without sub).
func (l *Buffer) Lines(sub ...string) []string {
	var out []string
next:
	for _, line := range strings.Split(l.String(), "\n") {
		for _, s := range sub {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}
