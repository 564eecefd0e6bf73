//go:build e2e

package e2e_test

import (
	"testing"
	"time"
)

// On an idle cluster no speaker may declare another dead: with the fast profile's short probe timeouts a false
// positive would move addresses for nothing. Every speaker's memberlist counters are read every 2 s; any
// departure, or a view without every speaker, fails the test at once.
func TestMemberlistIdleHasNoFalsePositives(t *testing.T) {
	// HERALD_E2E_SOAK_SECONDS: 60 in make e2e, SOAK_SECONDS (default 600) in make soak-members.
	d := time.Duration(envInt(t, "HERALD_E2E_SOAK_SECONDS", 60, 1, 86400)) * time.Second
	ctx := testContext(t, d+5*time.Minute)
	installSpeakers(t, ctx) // returns once every speaker sees all of them
	type counters struct{ departures, arrivals, rejoins, health float64 }
	read := func() map[string]counters {
		out := map[string]counters{}
		for _, n := range cluster.Nodes() {
			samples, err := speakerMetrics(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			var c counters
			alive := -1.0
			for _, s := range samples {
				switch s.name {
				case "herald_memberlist_departures_total":
					c.departures = s.value
				case "herald_memberlist_arrivals_total":
					c.arrivals = s.value
				case "herald_memberlist_rejoins_total":
					c.rejoins = s.value
				case "herald_memberlist_health_score":
					c.health = s.value
				case "herald_memberlist_members_alive":
					alive = s.value
				}
			}
			if int(alive) != len(cluster.Nodes()) {
				t.Fatalf("%s sees %v speakers alive, want %d", n.Name, alive, len(cluster.Nodes()))
			}
			out[n.Name] = c
		}
		return out
	}
	start := read()
	maxHealth := 0.0
	end := time.Now().Add(d)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
		}
		for node, c := range read() {
			s := start[node]
			if c.departures != s.departures {
				t.Fatalf("%s declared %v speakers dead or gone on an idle cluster (departures %v -> %v)",
					node, c.departures-s.departures, s.departures, c.departures)
			}
			if c.arrivals != s.arrivals {
				t.Errorf("%s saw %v arrivals on an idle cluster", node, c.arrivals-s.arrivals)
			}
			if c.health > maxHealth {
				maxHealth = c.health
			}
		}
	}
	t.Logf("SOAK [%s] %v idle, %d speakers: no departure, no arrival; highest memberlist health score %v",
		memberlistProfile(), d, len(cluster.Nodes()), maxHealth)
}
