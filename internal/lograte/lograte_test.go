package lograte

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	type step struct {
		at         time.Duration
		ok         bool
		suppressed uint64
	}
	for _, tc := range []struct {
		name  string
		every time.Duration
		steps []step
	}{
		{"first line passes", 10 * time.Second, []step{{0, true, 0}}},
		{"a flood passes once per interval and counts the rest", 10 * time.Second, []step{
			{0, true, 0}, {time.Millisecond, false, 0}, {2 * time.Second, false, 0}, {9 * time.Second, false, 0},
			{10 * time.Second, true, 3}, {11 * time.Second, false, 0}, {25 * time.Second, true, 1}, {40 * time.Second, true, 0},
		}},
		{"a clock stepped back far lets a line through", 10 * time.Second, []step{
			{time.Hour, true, 0}, {time.Hour + time.Second, false, 0}, {0, true, 1},
		}},
		{"zero interval never holds back", 0, []step{{0, true, 0}, {0, true, 0}, {time.Nanosecond, true, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(tc.every)
			for i, s := range tc.steps {
				ok, n := l.Allow(t0.Add(s.at))
				if ok != s.ok || n != s.suppressed {
					t.Fatalf("step %d at %v: Allow = %v, %d; want %v, %d", i, s.at, ok, n, s.ok, s.suppressed)
				}
			}
		})
	}
}
