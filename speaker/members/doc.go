// Package members tells a speaker which speakers (one per node) are alive,
// over hashicorp/memberlist gossip, faster than Kubernetes notices a dead
// node. It knows nothing of Kubernetes: the agent feeds it the addresses of
// the speakers it found through the API (SetPeers) and reads the names of
// the members alive (Alive, after each Changes notification).
//
// Gossip is encrypted and authenticated with the key of the memberlist
// Secret (Options.Key); running without it needs Options.Insecure.
//
// memberlist does not reliably merge a group again after a partition heals;
// the known peers that are not alive are therefore joined again every
// RejoinInterval.
package members
