package svclb

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// render writes a rule's expressions in a compact, nft-like notation, so
// the expected rulesets below read as data.
func render(r *nftables.Rule) string {
	var out []string
	for _, e := range r.Exprs {
		switch e := e.(type) {
		case *expr.Meta:
			out = append(out, fmt.Sprintf("meta(%d)>r%d", e.Key, e.Register))
		case *expr.Cmp:
			op := "=="
			if e.Op == expr.CmpOpNeq {
				op = "!="
			}
			out = append(out, fmt.Sprintf("r%d%s%x", e.Register, op, e.Data))
		case *expr.Payload:
			out = append(out, fmt.Sprintf("payload(%d,%d,%d)>r%d", e.Base, e.Offset, e.Len, e.DestRegister))
		case *expr.Bitwise:
			out = append(out, fmt.Sprintf("r%d&%x^%x>r%d", e.SourceRegister, e.Mask, e.Xor, e.DestRegister))
		case *expr.Ct:
			out = append(out, fmt.Sprintf("ct(%d,dir%d)>r%d", e.Key, e.Direction, e.Register))
		case *expr.Immediate:
			out = append(out, fmt.Sprintf("%x>r%d", e.Data, e.Register))
		case *expr.Numgen:
			out = append(out, fmt.Sprintf("numgen(type%d,mod%d)>r%d", e.Type, e.Modulus, e.Register))
		case *expr.Lookup:
			out = append(out, fmt.Sprintf("r%d@%s>r%d", e.SourceRegister, e.SetName, e.DestRegister))
		case *expr.NAT:
			out = append(out, fmt.Sprintf("dnat(fam%d,addr=r%d,port=r%d)", e.Family, e.RegAddrMin, e.RegProtoMin))
		case *expr.Masq:
			out = append(out, "masq")
		case *expr.Verdict:
			out = append(out, map[expr.VerdictKind]string{expr.VerdictAccept: "accept", expr.VerdictDrop: "drop"}[e.Kind])
		default:
			out = append(out, fmt.Sprintf("%T", e))
		}
	}
	return r.Chain.Name + ": " + strings.Join(out, " ")
}

func TestBuildRuleset(t *testing.T) {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	// Building blocks of the expected rules (meta 15 = nfproto, 16 = l4proto;
	// ct 1 = direction, 2 = status; nfproto 2 = IPv4, 10 = IPv6).
	const (
		v4tcp80  = "meta(15)>r1 r1==02 meta(16)>r1 r1==06 payload(2,2,2)>r1 r1==0050"
		v6tcp80  = "meta(15)>r1 r1==0a meta(16)>r1 r1==06 payload(2,2,2)>r1 r1==0050"
		v4udp53  = "meta(15)>r1 r1==02 meta(16)>r1 r1==11 payload(2,2,2)>r1 r1==0035"
		original = " ct(1,dir0)>r1 r1==00"
		masq4    = "meta(15)>r1 r1==02 meta(16)>r1 r1==06 ct(2,dir0)>r1 r1&20000000^00000000>r1 r1!=00000000 payload(1,16,4)>r1 "
		masq6    = "meta(15)>r1 r1==0a meta(16)>r1 r1==06 ct(2,dir0)>r1 r1&20000000^00000000>r1 r1!=00000000 payload(1,24,16)>r1 "
	)
	tests := []struct {
		name  string
		c     Config
		table string
		rules []string
		sets  map[string][]string // map name: "key>value" elements
	}{
		{
			name:  "IPv4 TCP, one ClusterIP, everything allowed",
			c:     Config{Proto: TCP, SrcPort: 80, DestPort: 80, DestIPs: []netip.Addr{a("10.43.0.10")}, SrcRanges: []netip.Prefix{p("0.0.0.0/0")}},
			table: "herald-svclb-tcp-80",
			rules: []string{
				"filter: " + v4tcp80 + " accept",
				"filter: " + v4tcp80 + original + " drop",
				"dstnat: " + v4tcp80 + " 0a2b000a>r1 0050>r2 dnat(fam2,addr=r1,port=r2)",
				"srcnat: " + masq4 + "r1==0a2b000a payload(2,2,2)>r1 r1==0050 masq",
			},
		},
		{
			name: "dual stack TCP, two IPv4 destinations spread, ranges per family, NodePort",
			c: Config{Proto: TCP, SrcPort: 80, DestPort: 30080, DestIPs: []netip.Addr{a("192.168.1.5"), a("fd00::5"), a("192.168.1.6")},
				SrcRanges: []netip.Prefix{p("192.0.2.0/24"), p("198.51.100.7/32"), p("2001:db8::/32")}},
			table: "herald-svclb-tcp-80",
			rules: []string{
				"filter: " + v4tcp80 + " payload(1,12,4)>r1 r1&ffffff00^00000000>r1 r1==c0000200 accept",
				"filter: " + v4tcp80 + " payload(1,12,4)>r1 r1==c6336407 accept",
				"filter: " + v4tcp80 + original + " drop",
				"dstnat: " + v4tcp80 + " numgen(type0,mod2)>r1 r1@dests4>r1 7580>r2 dnat(fam2,addr=r1,port=r2)",
				"srcnat: " + masq4 + "r1==c0a80105 payload(2,2,2)>r1 r1==7580 masq",
				"srcnat: " + masq4 + "r1==c0a80106 payload(2,2,2)>r1 r1==7580 masq",
				"filter: " + v6tcp80 + " payload(1,8,16)>r1 r1&ffffffff000000000000000000000000^00000000000000000000000000000000>r1 r1==20010db8000000000000000000000000 accept",
				"filter: " + v6tcp80 + original + " drop",
				"dstnat: " + v6tcp80 + " fd000000000000000000000000000005>r1 7580>r2 dnat(fam10,addr=r1,port=r2)",
				"srcnat: " + masq6 + "r1==fd000000000000000000000000000005 payload(2,2,2)>r1 r1==7580 masq",
			},
			sets: map[string][]string{"dests4": {"00000000>c0a80105", "01000000>c0a80106"}},
		},
		{
			name:  "UDP, nothing allowed but one host",
			c:     Config{Proto: UDP, SrcPort: 53, DestPort: 53, DestIPs: []netip.Addr{a("10.43.0.10")}, SrcRanges: []netip.Prefix{p("10.0.0.1/32")}},
			table: "herald-svclb-udp-53",
			rules: []string{
				"filter: " + v4udp53 + " payload(1,12,4)>r1 r1==0a000001 accept",
				"filter: " + v4udp53 + original + " drop",
				"dstnat: " + v4udp53 + " 0a2b000a>r1 0035>r2 dnat(fam2,addr=r1,port=r2)",
				"srcnat: meta(15)>r1 r1==02 meta(16)>r1 r1==11 ct(2,dir0)>r1 r1&20000000^00000000>r1 r1!=00000000 payload(1,16,4)>r1 r1==0a2b000a payload(2,2,2)>r1 r1==0035 masq",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := BuildRuleset(tc.c)
			if rs.Table.Name != tc.table || rs.Table.Family != nftables.TableFamilyINet {
				t.Errorf("table %v %q, want inet %q", rs.Table.Family, rs.Table.Name, tc.table)
			}
			var chains []string
			for _, ch := range rs.Chains {
				chains = append(chains, fmt.Sprintf("%s/%s/%d/%d", ch.Name, ch.Type, *ch.Hooknum, *ch.Priority))
			}
			if want := []string{"filter/filter/0/-110", "dstnat/nat/0/-100", "srcnat/nat/4/100"}; !reflect.DeepEqual(chains, want) {
				t.Errorf("chains %q, want %q", chains, want)
			}
			var got []string
			for _, r := range rs.Rules {
				got = append(got, render(r))
			}
			if !reflect.DeepEqual(got, tc.rules) {
				t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.rules, "\n"))
			}
			sets := map[string][]string{}
			for _, s := range rs.Sets {
				if !s.Set.IsMap || s.Set.KeyType != nftables.TypeInteger {
					t.Errorf("set %s: want a map from an integer", s.Set.Name)
				}
				for _, e := range s.Elements {
					sets[s.Set.Name] = append(sets[s.Set.Name], fmt.Sprintf("%x>%x", e.Key, e.Val))
				}
			}
			if len(sets) == 0 {
				sets = nil
			}
			if !reflect.DeepEqual(sets, tc.sets) {
				t.Errorf("maps %q, want %q", sets, tc.sets)
			}
		})
	}
}
