package svclb

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Chain priorities: the source-range filter runs after conntrack (-200) and
// before DNAT (-100), so a refused packet never gets a NAT binding.
const (
	prioFilter = -110
	prioDNAT   = -100 // nftables' "dstnat"
	prioSNAT   = 100  // nftables' "srcnat"
)

// Ruleset is the whole table one forwarder installs, as data: building it
// is pure (and table-tested); installing it is apply's job.
type Ruleset struct {
	Table  *nftables.Table
	Chains []*nftables.Chain
	Sets   []SetWithElements
	Rules  []*nftables.Rule
}

// SetWithElements is a set (here: a map from a counter value to a
// destination address) and its contents.
type SetWithElements struct {
	Set      *nftables.Set
	Elements []nftables.SetElement
}

// TableName is the table of one forwarder. The containers of an svclb pod
// share its network namespace, one per Service port, so the name carries
// the protocol and port.
func TableName(c Config) string {
	return fmt.Sprintf("herald-svclb-%s-%d", c.Proto, c.SrcPort)
}

// BuildRuleset returns the table for c, an inet table (both families):
//
//	chain filter  (prerouting, -110): per family, packets of the protocol to
//	    SRC_PORT from an allowed range are accepted, the others (original
//	    direction) dropped;
//	chain dstnat  (prerouting, -100): per family, DNAT to DEST_PORT on one of
//	    the family's DEST_IPS (numgen inc mod N through a map when N > 1);
//	chain srcnat  (postrouting, 100): masquerade of the connections DNATed
//	    above (ct status dnat, to one of DEST_IPS on DEST_PORT).
func BuildRuleset(c Config) Ruleset {
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName(c)}
	accept := nftables.ChainPolicyAccept
	filter := &nftables.Chain{Name: "filter", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(prioFilter), Policy: &accept}
	dnat := &nftables.Chain{Name: "dstnat", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(prioDNAT), Policy: &accept}
	snat := &nftables.Chain{Name: "srcnat", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityRef(prioSNAT), Policy: &accept}
	rs := Ruleset{Table: t, Chains: []*nftables.Chain{filter, dnat, snat}}

	proto := byte(unix.IPPROTO_TCP)
	if c.Proto == UDP {
		proto = unix.IPPROTO_UDP
	}
	for _, fam := range []int{4, 6} {
		dests := c.Dests(fam)
		if len(dests) == 0 {
			continue
		}
		nfproto := byte(unix.NFPROTO_IPV4)
		if fam == 6 {
			nfproto = unix.NFPROTO_IPV6
		}
		// Our traffic: this family, this protocol, destination port SRC_PORT.
		ours := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nfproto}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(c.SrcPort)},
		}
		// The drop is for the original direction only: a reply to a client
		// whose own port is SRC_PORT (masquerade keeps it) comes back to that
		// port from the destination, which is outside the ranges.
		original := []expr.Any{
			&expr.Ct{Key: expr.CtKeyDIRECTION, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0}}, // IP_CT_DIR_ORIGINAL
		}
		for _, p := range c.Ranges(fam) {
			e := append(clone(ours), matchSource(p)...)
			e = append(e, &expr.Verdict{Kind: expr.VerdictAccept})
			rs.Rules = append(rs.Rules, &nftables.Rule{Table: t, Chain: filter, Exprs: e})
		}
		e := append(clone(ours), original...)
		e = append(e, &expr.Verdict{Kind: expr.VerdictDrop})
		rs.Rules = append(rs.Rules, &nftables.Rule{Table: t, Chain: filter, Exprs: e})

		// DNAT: register 1 = address, register 2 = port.
		e = clone(ours)
		if len(dests) == 1 {
			e = append(e, &expr.Immediate{Register: 1, Data: dests[0].AsSlice()})
		} else {
			dt := nftables.TypeIPAddr
			if fam == 6 {
				dt = nftables.TypeIP6Addr
			}
			m := &nftables.Set{Table: t, Name: fmt.Sprintf("dests%d", fam), ID: uint32(fam),
				IsMap: true, KeyType: nftables.TypeInteger, DataType: dt, KeyByteOrder: binaryutil.NativeEndian}
			var els []nftables.SetElement
			for i, d := range dests {
				els = append(els, nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)), Val: d.AsSlice()})
			}
			rs.Sets = append(rs.Sets, SetWithElements{Set: m, Elements: els})
			e = append(e,
				&expr.Numgen{Register: 1, Modulus: uint32(len(dests)), Type: unix.NFT_NG_INCREMENTAL},
				&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: m.Name, SetID: m.ID},
			)
		}
		e = append(e,
			&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(c.DestPort)},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: uint32(nfproto), RegAddrMin: 1, RegProtoMin: 2, Specified: true},
		)
		rs.Rules = append(rs.Rules, &nftables.Rule{Table: t, Chain: dnat, Exprs: e})

		// Masquerade what the DNAT rule above sent on: without it the
		// destination would answer the client directly, bypassing the
		// reverse translation. Matched after DNAT, by the new destination
		// (ct original proto-dst would say "ours" more directly, but
		// google/nftables encodes the ct direction attribute as 32 bits
		// where the kernel reads 8, and cannot read such a rule back).
		daddr := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}}
		if fam == 6 {
			daddr = []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16}}
		}
		for _, d := range dests {
			e := []expr.Any{
				&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nfproto}},
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
				&expr.Ct{Key: expr.CtKeySTATUS, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
					Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: []byte{0, 0, 0, 0}},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
			}
			e = append(e, daddr...)
			e = append(e,
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: d.AsSlice()},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(c.DestPort)},
				&expr.Masq{},
			)
			rs.Rules = append(rs.Rules, &nftables.Rule{Table: t, Chain: snat, Exprs: e})
		}
	}
	return rs
}

// matchSource matches the source address against p (nothing for /0).
func matchSource(p netip.Prefix) []expr.Any {
	if p.Bits() == 0 {
		return nil
	}
	off, n := uint32(12), uint32(4) // IPv4 source address
	if p.Addr().Is6() {
		off, n = 8, 16
	}
	mask := make([]byte, n)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	e := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}}
	if p.Bits() < int(n*8) {
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)})
	}
	return append(e, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Addr().AsSlice()})
}

// ipsDstNAT is the kernel's IPS_DST_NAT conntrack status bit.
const ipsDstNAT = 1 << 5

func clone(e []expr.Any) []expr.Any { return append([]expr.Any(nil), e...) }
