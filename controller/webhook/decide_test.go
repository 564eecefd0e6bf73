package webhook

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func meta(name string, age int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "herald-system", CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute))}
}

func pool(name string, age int, addrs ...string) *v1beta1.IPAddressPool {
	return &v1beta1.IPAddressPool{ObjectMeta: meta(name, age), Spec: v1beta1.IPAddressPoolSpec{Addresses: addrs}}
}

// lastValid gives p a recorded last valid spec (as the controller writes it).
func lastValid(p *v1beta1.IPAddressPool, addrs ...string) *v1beta1.IPAddressPool {
	p.Status.LastValidSpec = &v1beta1.IPAddressPoolSpec{Addresses: addrs}
	p.Status.LastValidGeneration = 1
	return p
}

func peer(name string, age int, addr string) *v1beta1.BGPPeer {
	return &v1beta1.BGPPeer{ObjectMeta: meta(name, age), Spec: v1beta1.BGPPeerSpec{MyASN: 64512, PeerASN: 64500, PeerAddress: addr}}
}

func community(name string, age int, kv ...string) *v1beta1.Community {
	c := &v1beta1.Community{ObjectMeta: meta(name, age)}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Spec.Communities = append(c.Spec.Communities, v1beta1.CommunityAlias{Name: kv[i], Value: kv[i+1]})
	}
	return c
}

func bgpAdv(name string, age int, communities ...string) *v1beta1.BGPAdvertisement {
	return &v1beta1.BGPAdvertisement{ObjectMeta: meta(name, age), Spec: v1beta1.BGPAdvertisementSpec{Communities: communities}}
}

func l2Adv(name string, age int, pools ...string) *v1beta1.L2Advertisement {
	return &v1beta1.L2Advertisement{ObjectMeta: meta(name, age), Spec: v1beta1.L2AdvertisementSpec{IPAddressPools: pools}}
}

func objects(objs ...metav1.Object) config.Objects {
	var out config.Objects
	for _, o := range objs {
		switch o := o.(type) {
		case *v1beta1.IPAddressPool:
			out.Pools = append(out.Pools, *o)
		case *v1beta1.L2Advertisement:
			out.L2Advertisements = append(out.L2Advertisements, *o)
		case *v1beta1.BGPAdvertisement:
			out.BGPAdvertisements = append(out.BGPAdvertisements, *o)
		case *v1beta1.BGPPeer:
			out.Peers = append(out.Peers, *o)
		case *v1beta1.Community:
			out.Communities = append(out.Communities, *o)
		case *v1beta1.BFDProfile:
			out.BFDProfiles = append(out.BFDProfiles, *o)
		}
	}
	return out
}

func kindOf(o metav1.Object) string {
	switch o.(type) {
	case *v1beta1.IPAddressPool:
		return config.KindIPAddressPool
	case *v1beta1.L2Advertisement:
		return config.KindL2Advertisement
	case *v1beta1.BGPAdvertisement:
		return config.KindBGPAdvertisement
	case *v1beta1.BGPPeer:
		return config.KindBGPPeer
	case *v1beta1.Community:
		return config.KindCommunity
	case *v1beta1.BFDProfile:
		return config.KindBFDProfile
	}
	return ""
}

func create(o metav1.Object) Request {
	o.SetCreationTimestamp(metav1.Time{}) // as a new object: the newest
	return Request{Operation: Create, Object: o, Kind: kindOf(o), Name: o.GetName(), Now: t0.Add(time.Hour)}
}

func update(old, cur metav1.Object) Request {
	return Request{Operation: Update, Object: cur, OldObject: old, Kind: kindOf(cur), Name: cur.GetName(), Now: t0.Add(time.Hour)}
}

func del(o metav1.Object) Request {
	return Request{Operation: Delete, OldObject: o, Kind: kindOf(o), Name: o.GetName(), Now: t0.Add(time.Hour)}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name    string
		current config.Objects
		req     Request
		allowed bool
		// message is the whole refusal; warnings are fragments, in order.
		message  string
		warnings []string
	}{
		{
			name:    "good pool on an empty cluster",
			req:     create(pool("a", 0, "10.0.0.0/24")),
			allowed: true,
		},
		{
			name:    "bad range",
			req:     create(pool("a", 0, "10.0.0.9-10.0.0.1")),
			message: "IPAddressPool a: spec.addresses[0]: range \"10.0.0.9-10.0.0.1\" ends before it starts",
		},
		{
			name:    "new pool overlapping an existing one",
			current: objects(pool("a", 0, "10.0.0.0/24")),
			req:     create(pool("b", 0, "10.0.0.128/25")),
			message: `IPAddressPool b: spec.addresses: 10.0.0.128/25 overlaps 10.0.0.0/24 of IPAddressPool "a"`,
		},
		{
			name:    "new pool beside an existing one",
			current: objects(pool("a", 0, "10.0.0.0/24")),
			req:     create(pool("b", 0, "10.0.1.0/24")),
			allowed: true,
		},
		{
			name: "new pool overlapping only the last valid spec of a broken older pool",
			// a is served from its last valid spec 10.0.0.0/24: b may not take it.
			current: objects(lastValid(pool("a", 0, "nonsense"), "10.0.0.0/24")),
			req:     create(pool("b", 0, "10.0.0.0/25")),
			message: `IPAddressPool b: spec.addresses: 10.0.0.0/25 overlaps 10.0.0.0/24 of IPAddressPool "a"`,
		},
		{
			name:    "older pool edited to overlap a newer one would drop the newer one",
			current: objects(pool("a", 0, "10.0.0.0/24"), pool("b", 1, "10.0.1.0/24")),
			req:     update(pool("a", 0, "10.0.0.0/24"), pool("a", 0, "10.0.0.0/23")),
			message: `this change would break IPAddressPool b: spec.addresses: 10.0.1.0/24 overlaps 10.0.0.0/23 of IPAddressPool "a"`,
		},
		{
			name:    "pool edited to a bad spec, the last valid one kept at runtime, still refused",
			current: objects(lastValid(pool("a", 0, "10.0.0.0/24"), "10.0.0.0/24")),
			req:     update(pool("a", 0, "10.0.0.0/24"), lastValid(pool("a", 0, "10.0.0.0/33"), "10.0.0.0/24")),
			message: `IPAddressPool a: spec.addresses[0]: "10.0.0.0/33" is not a CIDR`,
		},
		{
			name:    "a broken pool that got in: a label edit passes, with a warning",
			current: objects(pool("a", 0, "10.0.0.9-10.0.0.1")),
			req: update(pool("a", 0, "10.0.0.9-10.0.0.1"), func() *v1beta1.IPAddressPool {
				p := pool("a", 0, "10.0.0.9-10.0.0.1")
				p.Labels = map[string]string{"zone": "a"}
				return p
			}()),
			allowed:  true,
			warnings: []string{"IPAddressPool a stays invalid: spec.addresses[0]: range \"10.0.0.9-10.0.0.1\" ends before it starts"},
		},
		{
			name:    "a broken pool that got in does not refuse an unrelated pool",
			current: objects(pool("a", 0, "10.0.0.9-10.0.0.1")),
			req:     create(pool("b", 0, "10.0.1.0/24")),
			allowed: true,
		},
		{
			name:    "a broken pool that got in is fixed",
			current: objects(pool("a", 0, "10.0.0.9-10.0.0.1")),
			req:     update(pool("a", 0, "10.0.0.9-10.0.0.1"), pool("a", 0, "10.0.0.1-10.0.0.9")),
			allowed: true,
		},
		{
			name:    "unknown community alias",
			current: objects(community("c", 0, "no-export-ish", "65000:1")),
			req:     create(bgpAdv("adv", 0, "typo")),
			message: `BGPAdvertisement adv: spec.communities[0]: unknown community alias "typo" (define it in a Community object, or write 65000:100 or large:1:2:3)`,
		},
		{
			name:    "known community alias",
			current: objects(community("c", 0, "mine", "65000:1")),
			req:     create(bgpAdv("adv", 0, "mine")),
			allowed: true,
		},
		{
			name:    "alias removed from a Community while an advertisement uses it",
			current: objects(community("c", 0, "mine", "65000:1"), bgpAdv("adv", 1, "mine")),
			req:     update(community("c", 0, "mine", "65000:1"), community("c", 0, "other", "65000:2")),
			message: `this change would break BGPAdvertisement adv: spec.communities[0]: unknown community alias "mine" (define it in a Community object, or write 65000:100 or large:1:2:3)`,
		},
		{
			name:     "Community deleted while an advertisement uses it: allowed, with a warning",
			current:  objects(community("c", 0, "mine", "65000:1"), bgpAdv("adv", 1, "mine")),
			req:      del(community("c", 0, "mine", "65000:1")),
			allowed:  true,
			warnings: []string{`this deletion breaks BGPAdvertisement adv: spec.communities[0]: unknown community alias "mine"`},
		},
		{
			name:    "alias defined twice",
			current: objects(community("c", 0, "mine", "65000:1")),
			req:     create(community("d", 0, "mine", "65000:2")),
			message: `Community d: spec.communities[0].name: alias "mine" is already defined by Community "c"`,
		},
		{
			name:    "duplicate peer",
			current: objects(peer("p1", 0, "192.0.2.1")),
			req:     create(peer("p2", 0, "192.0.2.1")),
			message: `BGPPeer p2: spec.peerAddress: `,
		},
		{
			name:     "advertisement of a missing pool: allowed, the runtime's warning shown",
			req:      create(l2Adv("l2", 0, "nope")),
			allowed:  true,
			warnings: []string{`spec.ipAddressPools[0]: IPAddressPool "nope" does not exist`},
		},
		{
			name:     "pool deleted under an advertisement: allowed (a missing pool is only a warning)",
			current:  objects(pool("a", 0, "10.0.0.0/24"), l2Adv("l2", 1, "a")),
			req:      del(pool("a", 0, "10.0.0.0/24")),
			allowed:  true,
			warnings: nil,
		},
		{
			name:    "deleting a broken object",
			current: objects(pool("a", 0, "10.0.0.9-10.0.0.1")),
			req:     del(pool("a", 0, "10.0.0.9-10.0.0.1")),
			allowed: true,
		},
		{
			name:    "update with no object",
			current: objects(pool("a", 0, "10.0.0.0/24")),
			req:     Request{Operation: Update, Kind: config.KindIPAddressPool, Name: "a"},
			message: "IPAddressPool a: the request carries no object",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.current, tc.req)
			if got.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (message %q, warnings %q)", got.Allowed, tc.allowed, got.Message, got.Warnings)
			}
			if !tc.allowed && !strings.HasPrefix(got.Message, tc.message) {
				t.Errorf("message\n  %q\nwant (prefix)\n  %q", got.Message, tc.message)
			}
			if len(got.Warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %d like %q", got.Warnings, len(tc.warnings), tc.warnings)
			}
			for i, w := range tc.warnings {
				if !strings.Contains(got.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got.Warnings[i], w)
				}
			}
		})
	}
}

// TestDecideSameTextAsCondition: a refused object's message is its kind and
// name, then exactly the problems the runtime puts in its Valid condition
// when the object gets in anyway (config.Problems.Summary of its state).
func TestDecideSameTextAsCondition(t *testing.T) {
	current := objects(pool("a", 0, "10.0.0.0/24"), community("c", 0, "mine", "65000:1"))
	for _, o := range []metav1.Object{
		pool("b", 5, "10.0.0.0/25", "10.0.9.9-10.0.9.1"),
		bgpAdv("adv", 5, "mine", "typo", "65000:99999"),
		peer("p", 5, "not-an-address"),
	} {
		got := decide(current, Request{Operation: Create, Object: o, Kind: kindOf(o), Name: o.GetName()})
		with := objects(o)
		with.Pools = append(with.Pools, current.Pools...)
		with.Communities = append(with.Communities, current.Communities...)
		st := config.ParseKeepingLastValid(with).States[config.ObjectRef{Kind: kindOf(o), Name: o.GetName()}]
		want := kindOf(o) + " " + o.GetName() + ": " + st.Problems.Summary()
		if got.Allowed || got.Message != want {
			t.Errorf("%s %s: got allowed=%v %q, want refused with %q", kindOf(o), o.GetName(), got.Allowed, got.Message, want)
		}
	}
}

// decide is DecideWith with the resolution made from current.
func decide(current config.Objects, req Request) Decision {
	return DecideWith(current, config.ParseKeepingLastValid(current), req)
}
