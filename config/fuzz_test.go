package config

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/herald-lb/herald/config/v1beta1"
)

// FuzzParse feeds whole configurations (JSON of the six kinds' lists, as
// the caches hold them, including last valid specs in status) to
// ParseKeepingLastValid: it never panics, every object gets a state, an
// object not served has its problems, every error names a field, and the
// result depends on the objects only, not on the order they are listed in.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"Pools":[{"metadata":{"name":"a"},"spec":{"addresses":["192.0.2.0/24","192.0.2.128/25","2001:db8::/120"]}},` +
		`{"metadata":{"name":"b","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"addresses":["192.0.2.0/28"]},"status":{"lastValidSpec":{"addresses":["198.51.100.0/24"]}}}],` +
		`"L2Advertisements":[{"metadata":{"name":"l2"},"spec":{"ipAddressPools":["a","nope"],"interfaces":["eth0","eth0"]}}],` +
		`"BGPAdvertisements":[{"metadata":{"name":"bgp"},"spec":{"aggregationLength":24,"communities":["no-export","alias","large:1:2:3"]}}],` +
		`"Peers":[{"metadata":{"name":"p"},"spec":{"myASN":64500,"peerASN":64500,"peerAddress":"192.0.2.1","ebgpMultiHop":true,"holdTime":"1s","bfdProfile":"x"}}],` +
		`"Communities":[{"metadata":{"name":"c"},"spec":{"communities":[{"name":"alias","value":"65000:1"},{"name":"no-export","value":"1:1"}]}}],` +
		`"BFDProfiles":[{"metadata":{"name":"x"},"spec":{"receiveInterval":5,"echoMode":true}}]}`))
	f.Add([]byte(`{"Pools":[{"metadata":{"name":"n"},"spec":{"nodeAddresses":{"addressType":"Hostname","nodeSelector":{"matchLabels":{"a b":"c"}}},"avoidBuggyIPs":true}}]}`))
	f.Add([]byte(`{"Pools":[{"metadata":{"name":"x"},"spec":{"addresses":["0.0.0.0/0","::1/128","10.0.0.9-10.0.0.1"],"serviceAllocation":{"priority":-1,"namespaces":["Bad_NS"]}}}],` +
		`"Unreadable":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var objs Objects
		if json.Unmarshal(data, &objs) != nil {
			return
		}
		objs.Unreadable = nil
		res := ParseKeepingLastValid(objs)
		total := len(objs.Pools) + len(objs.L2Advertisements) + len(objs.BGPAdvertisements) + len(objs.Peers) + len(objs.Communities) + len(objs.BFDProfiles)
		if len(res.States) > total {
			t.Fatalf("%d states for %d objects", len(res.States), total)
		}
		for ref, st := range res.States {
			if st.Serving != ServingCurrent && len(st.Problems.Errors()) == 0 {
				t.Errorf("%v not served (%v) without an error", ref, st.Serving)
			}
			for _, p := range st.Problems.Errors() {
				if p.Field == "" {
					t.Errorf("%v: an error names no field: %v", ref, p)
				}
			}
		}
		// The same objects listed in reverse give the same result.
		rev := Objects{
			Pools:             reversed(objs.Pools),
			L2Advertisements:  reversed(objs.L2Advertisements),
			BGPAdvertisements: reversed(objs.BGPAdvertisements),
			Peers:             reversed(objs.Peers),
			Communities:       reversed(objs.Communities),
			BFDProfiles:       reversed(objs.BFDProfiles),
		}
		if !uniqueNames(objs) {
			return // names repeat: which one of a name is served depends on order
		}
		again := ParseKeepingLastValid(rev)
		if !reflect.DeepEqual(summary(res), summary(again)) {
			t.Fatalf("order changes the result:\n%v\n%v", summary(res), summary(again))
		}
	})
}

func reversed[T any](in []T) []T {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}

// uniqueNames reports whether no kind lists a name twice (the API server
// never does).
func uniqueNames(o Objects) bool {
	ok := true
	check := func(names []string) {
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				ok = false
			}
			seen[n] = true
		}
	}
	check(namesOf(o.Pools, func(x v1beta1.IPAddressPool) string { return x.Name }))
	check(namesOf(o.L2Advertisements, func(x v1beta1.L2Advertisement) string { return x.Name }))
	check(namesOf(o.BGPAdvertisements, func(x v1beta1.BGPAdvertisement) string { return x.Name }))
	check(namesOf(o.Peers, func(x v1beta1.BGPPeer) string { return x.Name }))
	check(namesOf(o.Communities, func(x v1beta1.Community) string { return x.Name }))
	check(namesOf(o.BFDProfiles, func(x v1beta1.BFDProfile) string { return x.Name }))
	return ok
}

func namesOf[T any](in []T, name func(T) string) []string {
	out := make([]string, len(in))
	for i, x := range in {
		out[i] = name(x)
	}
	return out
}

// summary is what a result says, comparable: the states and the served
// objects by name.
func summary(r Resolved) map[string]string {
	out := map[string]string{}
	for ref, st := range r.States {
		out[ref.Kind+"/"+ref.Name] = st.Serving.String() + ": " + st.Problems.Error()
	}
	for _, p := range r.Config.Pools {
		out["served pool/"+p.Name] = rangesString(p.Ranges)
	}
	for _, p := range r.Config.Peers {
		out["served peer/"+p.Name] = p.Address.String()
	}
	for _, a := range r.Config.L2Advertisements {
		out["served l2/"+a.Name] = join(a.Pools)
	}
	for _, a := range r.Config.BGPAdvertisements {
		out["served bgp/"+a.Name] = join(a.Pools)
	}
	for n, v := range r.Config.Communities {
		out["alias/"+n] = v.String()
	}
	return out
}

func rangesString(rs []Range) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return join(s)
}

func join(s []string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
