// Package members tells a speaker which speakers (one per node) are alive,
// over hashicorp/memberlist gossip, faster than Kubernetes notices a dead
// node. It knows nothing of Kubernetes: the agent feeds it the addresses of
// the speakers it found through the API (SetPeers) and reads the names of
// the members alive (Alive, after each Changes notification). A member
// under suspicion still counts as alive; it leaves Alive when it is
// declared dead or leaves.
//
// # Security
//
// Gossip is encrypted and authenticated with the key of the memberlist
// Secret (Options.Key, AES-256 with the 32-byte key the controller
// creates). A member with another key, or none, cannot join. Running
// without a key needs Options.Insecure (--memberlist-insecure).
//
// # Healing
//
// After a partition heals, memberlist merges the two halves only when a
// member happens to gossip to, or push/pull with, one it declared dead:
// that is not deterministic. The known peers (from SetPeers) that are not
// alive are therefore joined again every RejoinInterval (3 s by default).
// Measured with four members split two and two (fast profile), from the
// link coming back until every member sees all four:
//
//	                  10 runs (fast with SuspicionMult 2)   5 runs (fast as it is)
//	rejoin every 3 s: 10 healed, 0.10 / 2.32 / 2.55 s       5 healed, 2.10 / 2.31 / 2.45 s
//	no rejoin:         9 healed within 30 s,                 4 healed within 30 s,
//	                   19.7 / 25.6 / 28.4 s                  16.4 / 22.3 / 26.8 s
//
// (min / median / max of the runs that healed).
//
//	go test ./speaker/members -run PartitionTable -members.partition-runs=10 -v
//
// # Profiles
//
// The failure detection time is about one to two probe intervals until a
// member probes the dead one, the rest of that probe interval for the
// indirect and TCP probes, then the suspicion timeout
// SuspicionMult × max(1, log10 N) × ProbeInterval. With SuspicionMult ≥ 3
// and at least SuspicionMult members, memberlist waits for
// SuspicionMult − 2 other members to confirm the suspicion; until they do,
// the timeout is up to SuspicionMaxTimeoutMult (6) times longer, which is
// what keeps one stalled member from declaring healthy peers dead.
//
//	profile  probe interval/timeout  suspicion  gossip  hard stop detected, 3 members  5 members
//	default  1 s / 500 ms            ×4         200 ms  5.00 / 6.00 / 8.00 s          4.81 / 6.10 / 8.01 s
//	fast     100 ms / 50 ms          ×3         50 ms   0.40 / 0.50 / 0.68 s          0.47 / 0.54 / 1.02 s
//
// These are min / median / max of 20 runs on 127.0.0.1, from a member
// stopped without Leave until every other member dropped it, on the loaded
// machine described below; on the same machine idle, fast gave
// 0.40 / 0.55 / 0.70 s (3 members) and 0.49 / 0.55 / 0.74 s (5). The fast
// profile also shortens TCPTimeout to 2 s and PushPullInterval to 15 s.
// With SuspicionMult 2 instead of 3 it measured 0.31 / 0.40 / 0.55 s (3
// members), at the cost of many more false detections (below).
//
//	go test ./speaker/members -run DetectionTable -members.runs=20 [-members.size=5] -v
//
// A member that calls Leave is gone at the others within a gossip interval
// (measured: ~0.2–0.3 s with default, ~0.06 s with fast), far sooner than
// a failure is detected.
//
// False detections, idle group of five members:
//
//	go test ./speaker/members -run Soak -members.soak=10m [-members.soak-profile=default] -v
//
// On the 2-core machine of these measurements, idle (load average below
// 3; the process never stalled more than 106 ms), no profile raised a
// single suspicion in ten minutes: default, fast, and fast with
// SuspicionMult 2 alike. A 20-minute run of fast was as quiet for its
// first ten minutes; then other work brought the load to 4–5 and stalls
// of up to 257 ms (6 over 200 ms): 46 suspicions, 3 of them ending in a
// false detection.
//
// The same machine shared with a Kubernetes build (load average 13–20) is
// another story. All members live in one process, so they stall together,
// and the process stalled up to 0.6–1 s (16–25 stalls over 300 ms in ten
// minutes). There, counting each time one member declared another gone:
//
//	default                  0 false detections (stalls up to 1.06 s)
//	fast                    11 and 21 in two runs, each followed by the member's return
//	fast, SuspicionMult 2   75
//	fast, 200 ms / 100 ms    9 (SuspicionMult 2, detection ~1 s)
//
// No failure detector that answers in half a second can ride out stalls
// longer than that: the fast profile is for nodes where the speaker gets
// its CPU when it needs it — no CPU limit (CFS throttling stalls a process
// for up to a period), a CPU request, a node-critical priority class. Stats.HealthScore rising above 0 means the
// member misses its own probe deadlines (memberlist then slows its probing
// down, up to AwarenessMaxMultiplier).
package members
