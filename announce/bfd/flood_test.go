package bfd

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/internal/logbuf"
)

// TestFloodWarnsOncePer10s: packets for a session that has not taken the previous ones are dropped and counted,
// and a flood of them writes one warning per 10 s, saying how many it held back (before: one warning per dropped
// packet, a log line per flood packet).
func TestFloodWarnsOncePer10s(t *testing.T) {
	logs := &logbuf.Buffer{}
	m := New(Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	defer m.Close()
	s := &msession{peer: la, rx: make(chan Packet, 1)}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	m.deliver(s, Packet{}, t0) // taken: the channel had room
	for i := range 1000 {
		m.deliver(s, Packet{}, t0.Add(time.Duration(i)*time.Millisecond)) // a second of flood
	}
	if got := m.Stats().DroppedBusy; got != 1000 {
		t.Errorf("DroppedBusy = %d, want 1000", got)
	}
	if n := logs.Count("not keeping up"); n != 1 {
		t.Fatalf("%d warnings for a 1 s flood, want 1:\n%s", n, logs.String())
	}
	m.deliver(s, Packet{}, t0.Add(11*time.Second))
	if lines := logs.Lines("not keeping up"); len(lines) != 2 || !strings.Contains(lines[1], "suppressed=999") {
		t.Errorf("after 10 s, warnings %q; want a second one saying 999 were held back", lines)
	}
}
