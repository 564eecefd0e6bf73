package nllb

import (
	"encoding/json"
	"net/netip"
	"slices"
	"testing"
)

// FuzzParseUpstreams feeds the persisted upstream file's parser (a file on
// the node, written by this process or the speaker, read at every start):
// whatever the bytes, it returns a usable set (not empty, sorted, unique,
// every address with a non-zero port) or an error, and what it returns
// survives a save and a load unchanged.
func FuzzParseUpstreams(f *testing.F) {
	f.Add([]byte(`{"version":1,"upstreams":["192.0.2.1:6443","[2001:db8::1]:6443"]}`))
	f.Add([]byte(`{"version":1,"upstreams":["192.0.2.1:6443","192.0.2.1:6443","[::ffff:192.0.2.1]:6443"]}`))
	f.Add([]byte(`{"version":1,"upstreams":[]}`))
	f.Add([]byte(`{"version":2,"upstreams":["192.0.2.1:6443"]}`))
	f.Add([]byte(`{"version":1,"upstreams":["0.0.0.0:6443","192.0.2.1:0","[fe80::1%eth0]:6443"]}`))
	f.Add([]byte(`{"version":1,"upstreams":"192.0.2.1:6443"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ups, err := ParseUpstreams(data)
		if err != nil {
			return
		}
		if len(ups) == 0 {
			t.Fatalf("%q: no error and no upstream", data)
		}
		if !slices.IsSortedFunc(ups, netip.AddrPort.Compare) || len(slices.Compact(slices.Clone(ups))) != len(ups) {
			t.Fatalf("%q: %v is not sorted and unique", data, ups)
		}
		for _, u := range ups {
			if !u.IsValid() || u.Port() == 0 || u.Addr().IsUnspecified() || u.Addr().Is4In6() {
				t.Fatalf("%q: unusable upstream %v", data, u)
			}
		}
		p := persisted{Version: stateVersion}
		for _, u := range ups {
			p.Upstreams = append(p.Upstreams, u.String())
		}
		again, _ := json.Marshal(p)
		back, err := ParseUpstreams(again)
		if err != nil || !slices.Equal(back, ups) {
			t.Fatalf("%q: saved as %s, loaded as %v (%v)", data, again, back, err)
		}
	})
}
