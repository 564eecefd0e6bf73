// Package bgp advertises prefixes to BGP routers from an embedded GoBGP v4
// server, fed with the whole desired state (Desired) and converging to it.
//
// # One GoBGP server per peer
//
// GoBGP v4 has per-neighbour policies only for route-server clients; for
// ordinary neighbours every export decision would go through one global
// policy with neighbour-set conditions and a soft reset after each change.
// Instead the Manager gives every peer its own GoBGP server (same router
// ID, the peer's local AS) whose RIB holds exactly the routes of that peer,
// with that peer's attributes and next hops. Per-peer prefix sets and
// attributes are then plain AddPath/DeletePath calls, and one peer's
// change never touches another session. Servers are started once and
// pooled by (router ID, local AS, listen port and address): a stopped
// server cannot be started again, and StartBgp writes package variables
// that the other servers read.
//
// # Diff and apply
//
// Set takes the desired state as given (the planner, speaker/plan, applied
// every rule: next hops, LOCAL_PREF, prepends, timers), normalizes it
// (sorting, defaults) and computes a Plan with Diff, a pure function:
//
//   - a new peer gets a session with all its routes;
//   - a gone peer is torn down: its routes are withdrawn, then the session
//     is closed with a Cease NOTIFICATION; other sessions are untouched;
//   - a peer whose session settings changed (ASN, local ASN, router ID,
//     port, source address, timers, password, multihop, graceful restart,
//     listen port) is re-created: only that session;
//   - a kept peer gets only route changes: new and changed routes are sent
//     with AddPath, which replaces the route in place (one UPDATE, no
//     withdraw in between), and gone prefixes are withdrawn.
//
// # Next hops and attributes
//
// Each Route carries its next hop: the zero value is the session's local
// address (GoBGP fills it in), which serves a prefix of the session's own
// family only; a prefix of the other family (IPv6 over an IPv4 session, or
// IPv4 over IPv6) comes with one of its family from the caller. IPv6
// routes travel in MP_REACH_NLRI (RFC 4760); IPv4 routes over IPv6
// sessions use a plain IPv4 next hop (no RFC 8950). Both unicast families
// are configured on every session. Standard and large communities are sent
// sorted, without duplicates; LOCAL_PREF when not 0 (the planner gives it
// to iBGP sessions only); the AS path as given.
//
// # Nothing is imported
//
// Every server has a global import policy that rejects every route:
// routes the routers send or reflect back never enter a RIB.
//
// # Listening
//
// With Global.ListenPort 0 no socket is opened and every session is
// active. With a port, each peer's server listens on the peer's
// SourceAddress (required, and distinct, when there are several peers).
//
// # BFD
//
// A Peer with a BFD profile gets a single-hop BFD session (announce/bfd)
// once its BGP session has been established, from the connection's local
// address. When that BFD session goes down because the path failed while
// the BGP session is established, the session is hard-reset at once
// (ResetPeer, LastError "BFD down: ...", PeerStatus.BFDResets) and
// reconnects after IdleHoldAfterReset. BFD never keeps BGP down: a BFD
// session that cannot come up changes nothing. A changed or removed
// profile changes only the BFD session; Close removes them all.
//
// # Observability
//
// Peers returns each session's state, uptime and last error, taken from
// GoBGP's peer events (each FSM transition with its reason), never from
// its logs; Watch delivers every change; Stats gives the prefixes
// advertised and the UPDATE and NOTIFICATION counters. Close withdraws
// everything and closes every session with a Cease NOTIFICATION, each
// after GoBGP counted its withdraw as sent (at most WithdrawFlush).
//
// docs/bgp.md has the whole story, with the tests against gobgpd and FRR.
package bgp
