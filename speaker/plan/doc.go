// Package plan is the speaker's planner: a pure function from what a speaker
// sees (configuration, Services, Nodes, the speakers alive in memberlist) to
// what the cluster must announce. It does no I/O, reads no clock, starts no
// goroutine and knows no Kubernetes client; its result never depends on the
// order of any input slice or on map iteration order.
//
// It plays the part of the Ready value in etcd's raft library: the speaker's
// loop takes a snapshot of its watches and of memberlist, calls
//
//	res := plan.Compute(inputs)
//	want := res.For(self)
//
// and hands want.L2 to the ARP and NDP responders and want.BGP to the BGP
// session manager, which converge to them. The Result also names the writer
// of each status object: the speaker writes the ServiceL2Status objects
// res.L2Statuses(self) lists and the ServiceBGPStatus objects
// want.BGP.Statuses(kept) lists, and only translates them into objects
// (see Status objects below).
// Every speaker runs the same Compute over the same inputs and so reaches the
// same [Result], without talking to the others: the election needs no
// messages and no leader. A restart, a missed or a duplicate event changes
// nothing, because the next Compute sees the same inputs.
//
// The Result covers the whole cluster, not only the calling node, so that a
// speaker can report who announces what and why an address is not announced
// ([Result.L2Skipped], [Result.BGPSkipped]). For that reason [Inputs]
// carries no "self": the caller picks its part with [Result.For]. [Desired]
// is that per-node part. The BGP part of the Result is kept compact (a few
// bitsets per address) and For expands one node's routes from it, so that
// a plan does not cost nodes × addresses routes.
//
// [Service] carries no pool name: pools never overlap (config.Parse drops a
// pool that overlaps an older one), so an address's pool is found from the
// address alone, and the speaker need not trust or read the controller's
// record of it. Two Services sharing an address cannot name two pools.
//
// # Which advertisements apply: serviceSelectors
//
// An advertisement (L2Advertisement or BGPAdvertisement) applies to a
// Service's address when it lists the address's pool and its
// serviceSelectors select the Service's labels ([Service].Labels; an
// advertisement without serviceSelectors selects every Service, with
// several any one that matches selects), as in MetalLB, which picks per
// Service the advertisements of its pool whose serviceSelectors match its
// labels, for layer 2 and for BGP alike. For each protocol, a Service that
// no advertisement of the address's pool selects is treated as a Service
// without endpoints: it does not ask for the address to be announced,
// constrains no node, and is listed in no announcement, route or status
// object. An address that no advertisement of its pool selects for any
// Service holding it is not announced (NoL2Advertisement,
// NoBGPAdvertisement: no advertisement applies).
//
// An address that Services share is announced for those of them that an
// advertisement selects, and each such Service (with endpoints) narrows
// the address's candidates to the nodes of the advertisements that select
// it, as a Local Service narrows them to its endpoints. MetalLB instead
// does not announce over layer 2 a Service carrying allow-shared-ip when
// one of the advertisements selecting it has serviceSelectors; the planner
// sees no annotations and has no such exception.
//
// # Layer 2 election
//
// An address is announced over layer 2 when it lies in a pool (node-address
// pools excluded: the nodes own those addresses), an L2Advertisement of that
// pool selects a Service holding it, and at least one such Service has an
// endpoint.
//
// The candidates for an address are the nodes that
//
//   - are alive in this speaker's memberlist view,
//   - exist as a Node listed once, neither NetworkUnavailable nor carrying
//     node.kubernetes.io/exclude-from-external-load-balancers,
//   - for every Service with endpoints holding the address that an
//     L2Advertisement of its pool selects, are selected by one of those
//     advertisements (an advertisement without node selectors selects
//     every node; with several, any one that matches selects); without
//     serviceSelectors, that is: selected by an L2Advertisement of the
//     pool, and
//   - for every such Service with externalTrafficPolicy Local, have an
//     endpoint of that Service.
//
// A Service with no endpoint on any node (whatever its policy) does not ask
// for its addresses to be announced and constrains no one; an address that
// only such Services hold (among those an advertisement selects) is not
// announced (reason NoEndpoints).
//
// Addresses that must sit on one node are grouped into components: two
// addresses are in one component when one Service holds both (dual-stack) or
// through a chain of such Services and shared addresses (union-find over the
// Services' addresses, whatever their endpoints). The component's lowest
// address is its key. The candidates of a component are the intersection of
// the candidates of its announced addresses; the winner is the candidate
// with the highest rendezvous score for the key, and it announces every
// address of the component. When that intersection is empty (for instance
// a dual-stack Service whose two pools are advertised on disjoint sets of
// nodes), the addresses are elected one by one, each among its own
// candidates, still with the component's key: reachability comes before
// co-location. An address without any candidate of its own is not announced
// (reason NoEligibleNode); that includes an address shared by two Local
// Services whose endpoints sit on different nodes. When
// Services join or split components (a new dual-stack family, a new sharer)
// the component's key can change and its addresses can move: co-location
// has that price.
//
// The rendezvous (highest random weight) score of a node for a key is a
// 64-bit mix of the hash of the node name and the hash of the key address.
// Unlike "sort the candidates and take index hash mod n", it moves an
// address only when it must: a node that joins takes exactly the addresses
// for which it scores highest, and a node that leaves releases only the
// addresses it held, which go to their second-best node. The hash functions
// are part of the protocol between speakers (see TestHashPinned).
//
// Preferred nodes (preferredNodeSelectors). Before the rendezvous score,
// candidates are compared by a preference score, MetalLB's rule (v0.16.2):
//
//   - an L2Advertisement gives each node its nodeSelectors select the sum
//     of the weights of its preferences whose selector matches the node's
//     labels (a preference of a node it does not select counts nothing);
//   - a node's preference score for an address is the sum of what the
//     advertisements that apply to the address give it, each advertisement
//     once (MetalLB attaches an advertisement to a pool once, even when
//     both its ipAddressPools and its ipAddressPoolSelectors name it);
//   - only the candidates with the highest preference score take part in
//     the election; the rendezvous score decides between them.
//
// So preferences order the candidates and never add one: when no preferred
// node is a candidate (dead, NetworkUnavailable, excluded, or without an
// endpoint of a Local Service), every candidate scores alike and the usual
// election runs; a preferred node that stops being a candidate hands its
// addresses to the candidates with the next highest score, and takes them
// back when it returns. Equal scores fall back to the rendezvous score. A
// component is scored under the advertisements of all its announced
// addresses; when its addresses are elected one by one, each address under
// its own. MetalLB orders a Service's candidates by that score, then by
// its own hash of node and address, and the first announces; the hashes
// differ, the scores do not.
//
// The interfaces the winner answers on are the union of the interfaces of
// the L2Advertisements that apply to the address and select it; if one of
// those names no interface, the winner answers on every eligible interface
// (Interfaces nil).
//
// # BGP
//
// Unlike layer 2 there is no election: every node that qualifies advertises
// the address itself, and routers spread traffic over the nodes by ECMP.
// Memberlist liveness does not matter (Inputs.Alive is not read): a dead
// node's sessions drop and the routers withdraw its routes.
//
// Sessions. A node has a session with every BGPPeer whose nodeSelectors
// select it (none: every node), whether or not it may advertise anything
// (an excluded or NetworkUnavailable node keeps its sessions, so that it
// advertises at once when it qualifies again). Every field is resolved
// ([BGPSession]): config.Parse's defaults (port 179, hold time 90s,
// keepalive a third of it, connect time 120s) and the router ID, which is the
// peer's routerID or else the node's first IPv4 address among Node.Addrs
// (its InternalIPs; IPv4-mapped addresses count as IPv4). A node without an
// IPv4 address has no session with a peer that sets no routerID (issue
// NoRouterID). A node has one router ID, its first session's (by name): a
// session that would resolve another is left out on that node (issue
// RouterIDConflict, in the node's BGPDesired.Left too), and one session per
// router address: a later session (by name) to the address of a kept one,
// two BGPPeers of one address and other ports, is left out on that node
// (PeerAddressInUse). Each session is the session manager's peer
// (announce/bgp.Peer) with the multihop TTL (255 for an eBGP peer with
// ebgpMultiHop) and its routes resolved: each route's next hop is the
// node's first address of the route's family, else (for the session's own
// family) its source address or the session's local address; a route of one
// family goes to a session of the other only from a node with an address of
// the route's family (else NoNextHop in Left, and the node does not count
// among the address's advertisers); its AS path is the session's local AS
// as many times as asPathPrepend says. The session manager applies no rule
// of its own: it sends what the plan says. The password is carried as a
// reference, Secret name and key "password" ([SecretRef]), not as a value:
// Inputs hold no Secret data, so a plan can be logged and diffed freely, and
// the speaker, which watches the Secret, must re-create the session when the
// password changes. A node listed twice in Inputs.Nodes has no session and no
// route.
//
// Which nodes advertise an address. An address is advertised when it lies
// in a pool (node-address pools excluded) that a BGPAdvertisement lists
// (config.Parse has resolved ipAddressPools and ipAddressPoolSelectors into
// the list), and at least one Service holding it that such an
// advertisement selects (serviceSelectors, above) has an endpoint. Address
// A qualifies on node N when N is listed once, is neither
// NetworkUnavailable nor excluded, and, for every such Service holding A
// with externalTrafficPolicy Local, N has an endpoint of it (the endpoint
// rule of layer 2: ready endpoints, or serving ones while none is ready).
// With Cluster policy every such node qualifies. For each
// BGPAdvertisement X that applies to A (lists its pool and selects one of
// those Services) and whose nodeSelectors select N (none: every node), N
// advertises A's prefix under X to each of its sessions whose peer X names
// (spec.peers; none: every peer), and the route lists the Services of A
// that X selects. Names of missing peers are ignored (config.Parse warns
// about them). The prefix is A masked to X's aggregationLength (IPv4) or
// aggregationLengthV6 (IPv6), /32 and /128 by default (config.Parse
// allows serviceSelectors only with those).
//
// Reasons in [Result.BGPSkipped], checked in this order: NotInPool,
// NoBGPAdvertisement (none lists the pool, or none selects a Service
// holding the address), NoEndpoints, NoEligibleNode (no node qualifies and
// is selected by an advertisement that applies), NoBGPPeer (such nodes exist but
// none has a session with a peer those advertisements send to). When the
// configuration has no BGPAdvertisement at all, BGP is not in use and
// BGPSkipped is empty.
//
// Aggregation. A node advertises prefix P under X when at least one address
// inside P qualifies on it under X (above); P's route lists the Services of
// all such addresses. So a node with a Local endpoint of one Service inside
// P attracts traffic for every address of P, including addresses of Local
// Services it has no endpoint of, which kube-proxy drops there. The planner
// reports each such address (issue LocalAggregated, naming the
// advertisement, the prefix, the address and its Local Services). MetalLB
// behaves the same way: its documentation presents aggregationLength as a
// way to roll host routes up into one prefix and does not restrict it for
// Local Services; its issue #2811 (open) asks to force /32 for Local
// Services because of this blackholing. Herald keeps the advertisement as
// configured and tells the operator; the usual fix is a second
// BGPAdvertisement with host-length prefixes for the same pool (routers use
// the longest match), or Cluster policy. config.Parse already rejects an
// aggregation length shorter than a CIDR block of the pool, so P never
// covers addresses outside the pool.
//
// Several advertisements on one prefix. When several BGPAdvertisements
// give node N the same prefix towards the same peer (same pool, same
// aggregation length, each applying to an address inside it), N sends one
// route whose communities are the union of theirs (standard and large,
// duplicates removed) and whose localPref is the highest of theirs. An
// advertisement that selects none of the prefix's Services adds nothing:
// its communities and localPref go only with the Services it selects. Different aggregation lengths give different prefixes,
// each with its own attributes (a /32 with localPref and no-advertise beside
// the /24 for transit, as in MetalLB's example). Peers of N that end up with
// equal attributes for a prefix share one merge (the planner computes it
// once); each session gets its own copy of the route, with its next hop.
//
// localPref is sent to iBGP peers only (myASN equal to peerASN); towards an
// eBGP peer the route carries none, and the planner reports issue
// LocalPrefNotSent for every advertisement with a localPref that names (or,
// having no spec.peers, reaches) an eBGP peer. localPref 0 means unset (the
// router's default applies). Communities are written as values: standard
// ones as "ASN:VALUE" in decimal (well-known names included: no-export is
// "65535:65281"), large ones as "GLOBAL:LOCAL1:LOCAL2", sorted numerically.
// Community aliases are resolved by config.Parse, which also rejects an
// advertisement that names a missing alias (the last valid configuration
// stays in force).
//
// The planner does not split routes by address family: an IPv4 prefix goes
// to an IPv6 peer and the other way round (multiprotocol BGP); the session
// manager chooses the next hop for each family.
//
// [Result.BGPNodes] and [Result.BGPNodeSetsByService] give the nodes that
// advertise an address or a Service (a route covering the address, to at
// least one peer, because the address qualifies there), for events when
// that set changes; they are the nodes that write the Service's
// ServiceBGPStatus when they keep every session.
// [Result.BGPNodeSetsByService] gives the same sets as [NodeSet]s (a count,
// a hash and the first few names), which a speaker keeps from one plan to
// the next: full lists of hundreds of nodes per Service do not scale.
//
// # Status objects
//
// The plan says which node writes which status object, and with what
// content, so that every speaker reaches the same writers without talking
// to the others, and no object has two writers.
//
// ServiceL2Status ([Result.L2Statuses], [L2Status]): one object per Service
// that an [L2Announcement] lists (a Service with an endpoint holding an
// announced address, that an L2Advertisement selects; a Service not
// announced, not selected, or without endpoints, has none). Its writer is the node elected for the Service's lowest announced
// address (IPv4 before IPv6). It lists the Service's addresses that node
// announces, so when a Service's addresses are elected apart (see Layer 2
// election) the others appear in no object; and the union of the
// interfaces that node answers on for them. An address answered on every
// eligible interface is reported as such (EveryInterface), not resolved:
// which interfaces are eligible is the writer's speaker's knowledge as it
// is now, not an input of Compute, and it adds them itself. Services
// sharing an address each have their own object, often from one node.
//
// ServiceBGPStatus ([BGPDesired.Statuses], [BGPStatus]): one object per
// node and Service, written by that node, when one of the node's routes
// carries the Service to a session the node keeps. The kept sessions are a
// parameter: the speaker may leave out a planned session (a password it
// cannot read), and a route to no kept session is in no object. The
// object lists the kept peers of those routes and their prefixes (the
// Service's addresses, or the aggregates covering them).
//
// # Partitions
//
// The election is only as consistent as the inputs. When memberlist views
// differ, for instance while a network partition lasts or while a dead node
// is not yet declared dead everywhere, two speakers can each elect
// themselves for an address (both answer ARP and NDP; each client uses the
// answer it got last) or each elect the other (nobody answers). This is
// inherent to an election without a coordinator. It heals by itself: when
// memberlist re-joins the partitions, the views agree again and so do the
// plans.
//
// # Cost
//
// Per Compute, node selectors are matched once per L2Advertisement and node
// (not per Service), node names are hashed once, candidate sets are bitsets
// over the nodes, addresses are sorted and searched as plain integers, and a
// score is one 64-bit mix. 1,000 Services over 100 nodes take under 1 ms of
// CPU (BenchmarkCompute, docs/benchmarks.md).
//
// serviceSelectors and preferences cost only when the configuration has
// them. A Service's labels are matched once per advertisement with
// serviceSelectors, on first need. A set of L2Advertisements (a pool's, or
// those of a pool that select a Service, or the union of an address's or a
// component's) is numbered once per distinct set, and its nodes, its
// interfaces per node and its nodes' preference scores are computed once
// per set, on first need: the cost is per class of Services, not per
// Service. In BGP, the advertisements that apply to an address held by one
// Service are listed once per pool and class; only an address that
// Services share gets lists of its own. BenchmarkComputeSelectors is
// BenchmarkComputeL2BGP with both in use.
//
// BGP adds, per Compute, one selector match per peer and node and per
// BGPAdvertisement and node, and per address a few bitset operations per
// advertisement of its pool; per For, one pass over the advertised
// addresses, a sort of the node's (prefix, advertisement, address) triples
// and one merge per prefix, with merged attributes cached per set of
// advertisements (BenchmarkComputeL2BGP, BenchmarkForL2BGP).
//
// # User documentation: which node answers for an address
//
// (This section is written to be lifted into the user guide.)
//
// In layer 2 mode, one node answers ARP (IPv4) and NDP (IPv6) requests for
// each LoadBalancer address, and all traffic to that address enters the
// cluster through it. Herald's speakers elect that node without a leader:
// each speaker computes the same answer from the same facts.
//
// A Service is announced by the L2Advertisements of its address's
// IPAddressPool whose spec.serviceSelectors select the Service's labels
// (no selectors means every Service); a Service that none selects is not
// announced over layer 2.
//
// A node can be elected for an address when its speaker is running and
// reachable by the other speakers, its Node is not NetworkUnavailable and
// does not carry the label
// node.kubernetes.io/exclude-from-external-load-balancers, and it is
// selected by one of those L2Advertisements (through spec.nodeSelectors;
// no selectors means every node). For a Service with
// externalTrafficPolicy: Local, only nodes running a ready endpoint of the
// Service (or, while none is ready anywhere, a serving one) can be elected,
// so the client's source address is kept and no second hop is needed. A
// Service with no endpoint at all is not announced.
//
// If those L2Advertisements set spec.preferredNodeSelectors, each node
// that can be elected gets the sum of the weights of the preferences it
// matches (over all those advertisements, each counting only on the nodes
// it selects), and only the nodes with the highest sum take part in the
// election below. Preferences never make a node electable: when no
// preferred node can be elected, any node that can may win; when a
// preferred node fails, its addresses go to the next best, and they come
// back when it returns.
//
// Among the nodes that can be elected, each address goes to the one that
// scores highest in a hash of the node name and the address. Addresses
// spread evenly over nodes, and a change moves as few as possible: a new
// node takes only the addresses it scores highest for, and when a node
// fails only its own addresses move, to the node that scores next. The new
// node sends gratuitous ARP / unsolicited neighbour advertisements so that
// clients and switches learn the move at once. A move breaks the
// connections open through the old node. With externalTrafficPolicy: Local
// the set of nodes that can be elected follows the Service's pods: the
// address moves when its node loses its last endpoint, and it can also move
// when a new endpoint starts on a node that scores higher.
//
// The two addresses of a dual-stack Service, and every address shared by
// Services through allow-shared-ip, are always answered by one node (unless
// no node can serve them all; then each address is elected on its own).
//
// If the L2Advertisements announcing the address that select the elected
// node set spec.interfaces, the node answers only on those interfaces
// (their union); if one of them sets none, it answers on all its
// interfaces.
//
// If the speakers cannot see each other (a network partition), each side
// elects among the speakers it sees, and an address can be answered from
// two nodes, or none, until the partition heals.
//
// # User documentation: which nodes advertise an address over BGP
//
// (This section is written to be lifted into the user guide.)
//
// In BGP mode every node that may carry a Service's traffic advertises the
// Service's address to the routers it peers with, and the routers spread
// the traffic over those nodes (ECMP). A node peers with every BGPPeer whose
// spec.nodeSelectors select it. It advertises an address of a pool listed by
// a BGPAdvertisement when the advertisement's spec.nodeSelectors select it,
// its Node is not NetworkUnavailable and does not carry the label
// node.kubernetes.io/exclude-from-external-load-balancers, the
// advertisement's spec.serviceSelectors select the Service's labels (no
// selectors: every Service), the Service has an endpoint somewhere, and,
// for externalTrafficPolicy: Local, the node runs a ready endpoint of the
// Service. It sends the route to the peers the advertisement names in
// spec.peers (all its peers when none), with the advertisement's
// communities, and its localPref to iBGP peers only. When
// several advertisements give one node the same prefix for the same peer,
// the route carries all their communities and the highest localPref.
//
// With aggregationLength (or aggregationLengthV6) the node advertises the
// covering prefix instead, once for all the addresses inside it, as soon as
// one of them may be served by the node. With externalTrafficPolicy: Local
// that sends traffic for a Service to nodes that run another Service of the
// prefix but no endpoint of this one, where it is dropped; Herald reports
// it (LocalAggregated). Add a BGPAdvertisement with the default lengths for
// the same pool so that routers that accept host routes send the traffic
// to the right nodes, or use Cluster policy.
package plan
