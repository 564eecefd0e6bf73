// Package ipam is Herald's address allocator: it decides which pool and which
// addresses a LoadBalancer Service gets.
//
// It is a pure core: plain Go over net/netip, no Kubernetes client, no I/O and
// no goroutines. The controller translates a Service into a [Service] value,
// calls [Allocator.Assign] and writes the returned [Assignment] into the
// Service status. After a restart it first feeds every existing assignment to
// [Allocator.Restore], and only then assigns new ones, so a restart never moves
// an address.
//
// Rules, in the order they are applied:
//
//   - Pools are chosen by serviceAllocation. A pool whose serviceAllocation has
//     a scope (namespaces, namespace selectors, service selectors) serves only
//     the Services it matches. Pools that match a Service through a scope come
//     before pools without one; then lower priority numbers first (0, unset,
//     after every set priority); then pool name. Pools with autoAssign false are
//     used only when the Service asks for them (pool annotation or requested
//     address).
//   - Within a pool the lowest free address of each wanted family is taken.
//     With avoidBuggyIPs, IPv4 addresses ending in .0 or .255 are never given,
//     and never accepted when requested.
//   - Requested addresses (spec.loadBalancerIP or the loadBalancerIPs
//     annotations) must lie in a pool that serves the Service and match the
//     Service's IP families; all of them must come from one pool.
//   - Several Services may hold one address when they carry the same sharing
//     key, use no common port and protocol, and have compatible backends (both
//     externalTrafficPolicy Cluster, or both Local with the same pod selector).
//     A Service with a sharing key joins an address of its key when it can.
//   - Dual-stack Services get one address per family, both from the same pool,
//     in spec.ipFamilies order.
//   - Node-address pools are chosen like any other pool, but the allocator
//     gives no addresses: they come from the nodes (Assignment.NodeAddresses).
//
// Typical use by the controller:
//
//	a := ipam.New()
//	a.SetPools(cfg.Pools)              // again on every config change; reassign the dropped keys
//	a.Restore(view, pool, statusAddrs) // for every Service with a status, before any Assign
//	req, err := ipam.ParseRequest(key, svc.Annotations, svc.Spec.LoadBalancerIP)
//	asg, err := a.Assign(view)         // on every reconcile; a no-op when nothing changed
//	a.Release(key)                     // when the Service is deleted or stops being a LoadBalancer
//
// Errors are *Error values: Reason is a stable identifier for events and
// metrics, and the message names the Service and explains the problem.
//
// Every method is deterministic: results never depend on map iteration order.
// An Allocator is not safe for concurrent use.
package ipam
