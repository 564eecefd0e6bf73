// Package configobjs reads Herald's configuration objects from the API
// server (or a cache) for config.ParseKeepingLastValid. The controller and
// the speaker both read the same six kinds from the install namespace; this
// package names them once.
package configobjs

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Kinds are empty objects of the six configuration kinds.
func Kinds() []client.Object {
	return []client.Object{
		&v1beta1.IPAddressPool{}, &v1beta1.L2Advertisement{}, &v1beta1.BGPAdvertisement{},
		&v1beta1.BGPPeer{}, &v1beta1.Community{}, &v1beta1.BFDProfile{},
	}
}

// CacheInNamespace adds the configuration kinds to byObject, cached only in
// namespace (the install namespace).
func CacheInNamespace(byObject map[client.Object]cache.ByObject, namespace string) {
	for _, o := range Kinds() {
		byObject[o] = cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}}
	}
}

// List reads every configuration object of the namespace.
func List(ctx context.Context, r client.Reader, namespace string) (config.Objects, error) {
	var objs config.Objects
	var pools v1beta1.IPAddressPoolList
	var l2 v1beta1.L2AdvertisementList
	var bgp v1beta1.BGPAdvertisementList
	var peers v1beta1.BGPPeerList
	var comms v1beta1.CommunityList
	var bfd v1beta1.BFDProfileList
	for _, l := range []client.ObjectList{&pools, &l2, &bgp, &peers, &comms, &bfd} {
		if err := r.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return objs, fmt.Errorf("listing configuration in %s: %w", namespace, err)
		}
	}
	objs.Pools, objs.L2Advertisements, objs.BGPAdvertisements = pools.Items, l2.Items, bgp.Items
	objs.Peers, objs.Communities, objs.BFDProfiles = peers.Items, comms.Items, bfd.Items
	return objs, nil
}
