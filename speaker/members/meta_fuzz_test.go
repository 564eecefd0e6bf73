package members

import "testing"

// FuzzMeta feeds the metadata another member gossips (any host that joins with the key sends it): whatever the
// bytes, readiness and key fingerprints are read without a panic, and what metaOf writes reads back as it went in.
func FuzzMeta(f *testing.F) {
	f.Add([]byte{}, true, []byte("primary!"), []byte("latest!!"))
	f.Add([]byte{metaVersion}, false, []byte{}, []byte{})
	f.Add([]byte{metaVersion, flagReady, 1, 2, 3}, true, []byte("12345678"), []byte("12345678"))
	f.Add([]byte{9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, false, []byte("a"), []byte("b"))
	f.Fuzz(func(t *testing.T, raw []byte, ready bool, p, l []byte) {
		v := keysOf(raw)
		r := readyOf(raw)
		if len(raw) < metaLen || raw[0] != metaVersion {
			if v.known {
				t.Fatalf("%x: keys read from metadata of another version or too short", raw)
			}
		}
		if (len(raw) < 2 || raw[0] != metaVersion) && !r {
			t.Fatalf("%x: metadata of another version counts as not ready", raw)
		}
		var primary, latest fingerprint
		copy(primary[:], p)
		copy(latest[:], l)
		meta := metaOf(ready, primary, latest)
		if len(meta) != metaLen {
			t.Fatalf("metaOf wrote %d bytes, want %d", len(meta), metaLen)
		}
		got := keysOf(meta)
		if !got.known || got.primary != primary || got.latest != latest || readyOf(meta) != ready {
			t.Fatalf("metaOf(%v, %x, %x) reads back as %+v ready %v", ready, primary, latest, got, readyOf(meta))
		}
	})
}
