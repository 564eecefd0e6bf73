package health

import (
	"strings"
	"testing"
	"time"
)

func TestObserve(t *testing.T) {
	th := Thresholds{Interval: time.Second, Timeout: time.Second, UnhealthyAfter: 5, HealthyAfter: 3}
	// s: success, f: failure; want is the status after each result.
	tests := []struct {
		name    string
		results string
		want    []Status
	}{
		{"first success settles Unknown", "s", []Status{Healthy}},
		{"first failure settles Unknown", "f", []Status{Unhealthy}},
		{"five failures turn healthy unhealthy", "sfffff",
			[]Status{Healthy, Healthy, Healthy, Healthy, Healthy, Unhealthy}},
		{"a success resets the failure run", "sffffsffff",
			[]Status{Healthy, Healthy, Healthy, Healthy, Healthy, Healthy, Healthy, Healthy, Healthy, Healthy}},
		{"three successes turn unhealthy healthy", "fsss", []Status{Unhealthy, Unhealthy, Unhealthy, Healthy}},
		{"a failure resets the success run", "fssfss",
			[]Status{Unhealthy, Unhealthy, Unhealthy, Unhealthy, Unhealthy, Unhealthy}},
		{"back and forth", "fsssfffff",
			[]Status{Unhealthy, Unhealthy, Unhealthy, Healthy, Healthy, Healthy, Healthy, Healthy, Unhealthy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s State
			var got []Status
			changes := 0
			for _, r := range tt.results {
				var changed bool
				prev := s.Status()
				s, changed = s.Observe(r == 's', th)
				if changed != (s.Status() != prev) {
					t.Fatalf("changed=%v but status %v -> %v", changed, prev, s.Status())
				}
				if changed {
					changes++
				}
				got = append(got, s.Status())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d statuses, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("after result %d (%q): %v, want %v (all: %v)", i, tt.results[:i+1], got[i], tt.want[i], got)
				}
			}
		})
	}
}

func TestObserveOtherThresholds(t *testing.T) {
	th := Thresholds{Interval: time.Second, Timeout: time.Second, UnhealthyAfter: 1, HealthyAfter: 1}
	s, _ := State{}.Observe(true, th)
	s, changed := s.Observe(false, th)
	if !changed || s.Status() != Unhealthy {
		t.Fatalf("UnhealthyAfter=1: one failure gives %v (changed %v), want unhealthy", s.Status(), changed)
	}
	s, changed = s.Observe(true, th)
	if !changed || s.Status() != Healthy {
		t.Fatalf("HealthyAfter=1: one success gives %v (changed %v), want healthy", s.Status(), changed)
	}
}

func TestEligible(t *testing.T) {
	for s, want := range map[Status]bool{Unknown: true, Healthy: true, Unhealthy: false} {
		if s.Eligible() != want {
			t.Errorf("%v.Eligible() = %v, want %v", s, s.Eligible(), want)
		}
	}
}

func TestThresholdsValidate(t *testing.T) {
	ok := DefaultThresholds()
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*Thresholds)
		want string
	}{
		{"zero interval", func(t *Thresholds) { t.Interval = 0 }, "interval"},
		{"zero timeout", func(t *Thresholds) { t.Timeout = 0 }, "timeout"},
		{"timeout above interval", func(t *Thresholds) { t.Timeout = t.Interval + 1 }, "must not exceed"},
		{"unhealthy-after 0", func(t *Thresholds) { t.UnhealthyAfter = 0 }, "unhealthy-after"},
		{"healthy-after 0", func(t *Thresholds) { t.HealthyAfter = 0 }, "healthy-after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := DefaultThresholds()
			tt.mod(&th)
			err := th.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
