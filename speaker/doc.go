// Package speaker is Herald's node agent (`herald speaker`): one per node,
// with the host network, it makes the node answer for the LoadBalancer
// addresses it is elected for.
//
// It has the shape of every Herald component (docs/design-choices.md, "From a
// Service to the wire"): the edges feed a pure planner and apply the node's
// part of its result.
//
//	cache (Services, EndpointSlices, Nodes, config,     memberlist (members)
//	       ServiceL2Status, the key Secret)                  |
//	              \__________ Snapshot __________________/
//	                             | inputs.Build (pure, table-tested)
//	                             v
//	                  plan.Compute -> Result.For(node)
//	                             |
//	     Announcer.Set (announce/arp + announce/ndp)     ServiceL2Status, events, metrics
//
// # The loop
//
// Every change seen by the cache's informers, every memberlist change and
// every change of the node's default interface set (Announcer.DefaultChanged)
// kicks one channel of capacity one; a single goroutine takes the kick,
// reads the whole state from the cache and plans again. Kicks arriving
// during a plan collapse into one more plan, which sees the latest state:
// a burst costs at most two plans. Nothing is incremental, so a missed or
// repeated event and a restart change nothing; a restart plans from the API
// server's state and the same memberlist view, and reaches the same plan.
// The Announcer is called only when the node's desired set changed. The
// plan reads the cache's own objects, not copies, and never writes them.
//
// The status objects (ServiceL2Status, ServiceBGPStatus) and the events that
// go with them are written by a second goroutine, which always works towards
// the newest plan: a sync hands its reports over and returns, so an
// announcement never waits for API writes. A speaker starting at 10,000
// Services creates thousands of objects at its client's rate limit, for
// minutes; before, the next plan (the one that moves an announcement) waited
// behind them. A pass that fails in part is retried a second later.
//
// Before the first plan, the speaker gives memberlist up to Options.JoinWait
// (5 s) to see another speaker, so that a speaker restarting alone in its
// view does not briefly elect itself for every address.
//
// The configuration goes through config.ParseKeepingLastValid, the rule the
// controller applies: an object edited into an invalid state is served by its
// status.lastValidSpec, so a broken edit never makes a speaker withdraw. The
// speaker reports nothing on configuration objects (the controller does); it
// logs the problems once per change.
//
// # Peers
//
// The speakers to join are the Nodes' InternalIPs (of the family of the
// speaker's own memberlist address) at the one memberlist port every
// speaker uses. The speaker runs with the host network, so its Pod IP is
// its node's IP: watching speaker Pods would give the same addresses for
// one more watch (and Pod RBAC), and Nodes are watched anyway. The price:
// nodes that run no speaker (tainted control planes) are probed by the
// periodic re-join (one failed TCP connect per node every re-join interval,
// 3 s). The node is a candidate only when its speaker is alive in
// memberlist, so a node without a speaker is never elected.
//
// # Announcer
//
// Announcer is the seam between the agent and the network. announce/l2's
// Announcer is the real one (ARP for IPv4, NDP for IPv6, and the node's one
// link event subscription, which also tells both responders which
// interfaces to re-check); the integration tests use a
// recording fake so that two speakers can run in one process without raw
// sockets. Both take the whole desired set at once.
//
// An address whose L2Advertisement names no interfaces is answered on the
// node's default set: announce/netif's eligible interfaces (up, not a bridge
// port or bond slave, ARP-capable, not virtual) minus
// --l2-exclude-interfaces. announce/l2 keeps that set current on its own:
// it follows rtnetlink link events (an interface added, removed, up, down,
// enslaved or released, a new MAC), reads the set again 100 ms after the
// first event of a burst and, when the set changed, applies the last
// desired set again on the new set, so the addresses move off a dead or
// enslaved interface (its bridge or bond answers instead) and onto a new
// one with no re-plan. It logs "default interfaces changed" (old, new) at
// Info and signals DefaultChanged; the agent then re-plans, which rewrites
// the status. Set reads the set too, so a lost link event is caught by
// the next plan; when the kernel drops the event subscription (overflow),
// the announcer subscribes again and reads the set. DefaultInterfaces
// gives the set as answered on now; herald_l2_interfaces is its size.
//
// # ServiceL2Status
//
// For each Service it announces, the speaker keeps one ServiceL2Status in the
// install namespace, named "<service namespace>.<service name>", labelled
// herald.dev/service-namespace and herald.dev/service-name, owned by the
// speaker's Pod (POD_NAME, POD_UID), with status.node, status.interfaces
// (the interfaces answering, sorted: those the L2Advertisement names, and
// the default set, resolved, for addresses whose advertisement names none;
// empty only when no interface is eligible) and status.addresses. Only the announcing
// speaker writes it: the new announcer takes the object over (update) and
// emits the Normal event AnnouncingFromNode on the Service, naming the old
// node from the object it replaces; a speaker that stops announcing a Service
// deletes the object if it still names its node (with the version it read as
// a precondition, so it never deletes a takeover). When the addresses of one
// Service are elected onto different nodes (their pools are advertised on
// disjoint nodes), the node of the lowest address writes the object.
//
// # SpeakerStatus
//
// Each speaker keeps one SpeakerStatus about itself in the install
// namespace, named after its node, labelled herald.dev/node and owned by its
// Pod: status.node, status.members (alive in its memberlist view, itself
// included), status.l2Addresses and status.bgpSessions (BGPPeer, router
// address, established, state, prefixes, BFD state). writeSpeakerStatus
// keeps it on its own goroutine, from the counts of each sync and the
// sessions as the session manager and the BFD manager report them now
// (poked by their watches, and polled every 5 s). It writes only what
// differs from what it last wrote or read: a change of state within a
// second, a change of counts alone at most every 30 s
// (SpeakerStatusTimings).
//
// # Stopping
//
// On SIGTERM the speaker closes the responders (stops answering), leaves
// memberlist (the others drop it within about one gossip interval and the
// new announcers send gratuitous ARP / unsolicited NA at once), then shuts
// memberlist down. Its ServiceL2Status objects go with its Pod, or are taken
// over by the new announcers.
//
// # Gossip key
//
// The key comes from the Secret the controller creates (herald-memberlist,
// key "secretkey"). A speaker waits up to a minute for it, then refuses to
// run, unless --memberlist-insecure allows unencrypted gossip. A key changed
// under a running speaker is not applied (memberlist keeps its key): the
// speaker warns, and every speaker must be restarted.
package speaker
