package plan

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// The election hash. Every speaker of a cluster must compute the same
// scores, so these functions are part of the wire protocol between
// speakers: changing them moves addresses, and during a rolling upgrade
// from one version to the other two nodes could announce one address.
// TestHashPinned holds them fixed.

// mix is the SplitMix64 finalizer: a bijection on 64 bits in which every
// input bit affects every output bit.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// nodeHash is the 64-bit FNV-1a hash of the node name, mixed.
func nodeHash(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return mix(h)
}

// addrHash hashes the 16-byte form of a (IPv4 addresses as IPv4-mapped).
func addrHash(a netip.Addr) uint64 {
	b := a.As16()
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	return mix(mix(hi) ^ lo)
}

// score is node's rendezvous score for a key address. The highest score
// wins.
func score(node, key uint64) uint64 {
	return mix(node ^ key)
}

// pick returns the index of the node in set with the highest score for key,
// or -1 when set is empty. Equal scores (practically never) go to the lower
// index, that is the lower node name.
func pick(set []uint64, hash []uint64, key uint64) int {
	best, bestScore := -1, uint64(0)
	for w, word := range set {
		for word != 0 {
			k := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if s := score(hash[k], key); best < 0 || s > bestScore {
				best, bestScore = k, s
			}
		}
	}
	return best
}

// pickPreferred is pick among the nodes of set with the highest preference
// score pref[k] (nil: every score 0): a higher preference score wins, and
// the rendezvous score decides between equal ones.
func pickPreferred(set []uint64, hash []uint64, key uint64, pref []int64) int {
	if pref == nil {
		return pick(set, hash, key)
	}
	best, bestPref, bestScore := -1, int64(0), uint64(0)
	for w, word := range set {
		for word != 0 {
			k := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			p, s := pref[k], score(hash[k], key)
			if best < 0 || p > bestPref || p == bestPref && s > bestScore {
				best, bestPref, bestScore = k, p, s
			}
		}
	}
	return best
}
