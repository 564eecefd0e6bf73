// Package v1beta1 holds the Herald configuration API: address pools, L2 and BGP
// advertisements, BGP peers and community aliases, in the API group herald.dev.
//
// The objects live in Herald's install namespace. Their field names follow
// MetalLB's so that an existing MetalLB configuration moves over by changing
// the API group.
//
// +kubebuilder:object:generate=true
// +groupName=herald.dev
package v1beta1
