// Package explain is the operator's view of Herald: why a Service is or is
// not served, and the state of the pools and speakers, from what Herald
// publishes in the API (Services and their conditions, the configuration
// and its status, the speakers' status objects, events) and from the
// planner run on the same inputs the speakers plan from. It scrapes no log
// and no metric. `kubectl herald` (cmd/kubectl-herald) is its shell.
//
// Gather reads a World from the API server; ExplainService and Status are
// pure functions of a World; Write and WriteStatus print their reports for
// people (JSON and YAML come from the reports' own fields).
//
// The plan it runs is the speakers' plan with one difference it says so
// in its output: the speakers elect among the members their memberlist
// sees alive, the plugin among the nodes whose speaker pod is Ready. The
// two agree except for the seconds after a node dies (memberlist notices in
// under a second, the pod's readiness after the node's grace period) or
// while the speakers' gossip is split.
package explain
