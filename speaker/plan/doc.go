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
// and hands want.L2 to the ARP and NDP responders, which converge to it.
// Every speaker runs the same Compute over the same inputs and so reaches the
// same [Result], without talking to the others: the election needs no
// messages and no leader. A restart, a missed or a duplicate event changes
// nothing, because the next Compute sees the same inputs.
//
// The Result covers the whole cluster, not only the calling node, so that a
// speaker can report who announces what and why an address is not announced
// ([Result.L2Skipped]). For that reason [Inputs] carries no "self": the
// caller picks its part with [Result.For]. [Desired] is that per-node part;
// BGP announcements will be added beside L2 in both.
//
// [Service] carries no pool name: pools never overlap (config.Parse drops a
// pool that overlaps an older one), so an address's pool is found from the
// address alone, and the speaker need not trust or read the controller's
// record of it. Two Services sharing an address cannot name two pools.
//
// # Layer 2 election
//
// An address is announced over layer 2 when it lies in a pool (node-address
// pools excluded: the nodes own those addresses), an L2Advertisement lists
// that pool, and at least one Service holding it has an endpoint.
//
// The candidates for an address are the nodes that
//
//   - are alive in this speaker's memberlist view,
//   - exist as a Node listed once, neither NetworkUnavailable nor carrying
//     node.kubernetes.io/exclude-from-external-load-balancers,
//   - are selected by an L2Advertisement of the address's pool (an
//     advertisement without node selectors selects every node; with several,
//     any one that matches selects), and
//   - for every Service holding the address with externalTrafficPolicy Local,
//     have an endpoint of that Service.
//
// A Service with no endpoint on any node (whatever its policy) does not ask
// for its addresses to be announced and constrains no one; an address that
// only such Services hold is not announced (reason NoEndpoints).
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
// The interfaces the winner answers on are the union of the interfaces of
// the pool's L2Advertisements that select it; if one of those names no
// interface, the winner answers on every eligible interface (Interfaces nil).
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
// # User documentation: which node answers for an address
//
// (This section is written to be lifted into the user guide.)
//
// In layer 2 mode, one node answers ARP (IPv4) and NDP (IPv6) requests for
// each LoadBalancer address, and all traffic to that address enters the
// cluster through it. Herald's speakers elect that node without a leader:
// each speaker computes the same answer from the same facts.
//
// A node can be elected for an address when its speaker is running and
// reachable by the other speakers, its Node is not NetworkUnavailable and
// does not carry the label
// node.kubernetes.io/exclude-from-external-load-balancers, and it is
// selected by an L2Advertisement of the address's IPAddressPool (through
// spec.nodeSelectors; no selectors means every node). For a Service with
// externalTrafficPolicy: Local, only nodes running a ready endpoint of the
// Service (or, while none is ready anywhere, a serving one) can be elected,
// so the client's source address is kept and no second hop is needed. A
// Service with no endpoint at all is not announced.
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
// If the L2Advertisements of the pool that select the elected node set
// spec.interfaces, the node answers only on those interfaces (their union);
// if one of them sets none, it answers on all its interfaces.
//
// If the speakers cannot see each other (a network partition), each side
// elects among the speakers it sees, and an address can be answered from
// two nodes, or none, until the partition heals.
package plan
