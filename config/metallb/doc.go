// Package metallb carries MetalLB's configuration over to Herald's.
//
// Table lists every field of MetalLB's configuration API, every Service
// annotation MetalLB reads or writes and the kinds MetalLB writes itself,
// with what Herald does with each; docs/metallb.md renders it, and a test
// compares it with MetalLB's source. Convert turns MetalLB objects (its
// custom resources, or the ConfigMap of MetalLB v0.12 and older) into
// Herald's objects and a Report of everything that did not carry over as
// it was, including what config.Parse says about the result. It is pure:
// objects in, objects and a report out; `herald migrate` reads and writes.
package metallb
