// Package bfd is Herald's Bidirectional Forwarding Detection: RFC 5880
// asynchronous mode over single-hop UDP (RFC 5881), IPv4 and IPv6, for
// the BGP sessions of the speaker. No Kubernetes imports.
//
// The package has three layers:
//
//   - Packet and Parse: the control packet, and the reception checks of
//     RFC 5880 6.8.6 that need no session.
//   - Session: the state machine of one session, pure and single-threaded
//     on an injected clock. Receive(packet, now), Tick(now) and Next()
//     return what to send and the state changes; no sockets, no
//     goroutines (the etcd raft pattern of the speaker).
//   - Manager: one goroutine per session and one socket per local address
//     on port 3784; TTL / hop limit 255 sent and required; Add, Remove,
//     Watch, Sessions, Stats and Close for the BGP side.
//
// Going beyond the session selection of RFC 5880 6.8.6, a session in Init
// or Up ignores (counts as Dropped, and otherwise disregards) a packet
// whose My Discriminator is not the peer's learned one, and a session in
// Up also one whose Your Discriminator is zero, but for a Down: the peer
// of an Up session knows our discriminator and names it, except in the
// Down it sends when its own detection time expired (RFC 5880 6.8.1). A
// spoofed Down must then carry the peer's 32-bit discriminator to take the
// session down. A peer that really started over (a new discriminator) no
// longer refreshes our detection timer, so the session goes Down within
// the detection time, a failure, and comes Up again from Down, which takes
// any Down to start the handshake, as before.
//
// Out of scope: authentication (a packet with the A bit is dropped),
// Demand mode (the D bit is never sent and a peer's is ignored), the Echo
// function (Required Min Echo RX is always 0) and multihop (RFC 5883).
//
// docs/bfd.md has the details, defaults and measured figures.
package bfd
