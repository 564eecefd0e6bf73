package config

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/google/btree"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/herald-lb/herald/config/v1beta1"
)

// parsePools validates each pool on its own, then drops pools that overlap a
// pool created before them. The result is sorted by name. It takes
// O(n log n) in the number of ranges of all pools.
func parsePools(objs []v1beta1.IPAddressPool, probs *Problems) []*Pool {
	type parsed struct {
		meta metav1.ObjectMeta
		pool *Pool
		r    *reporter
	}
	var ok []parsed
	for i := range objs {
		o := &objs[i]
		r := &reporter{kind: KindIPAddressPool, name: o.Name, out: probs}
		if p := parsePool(o, r); p != nil {
			ok = append(ok, parsed{o.ObjectMeta, p, r})
		}
	}
	sort.SliceStable(ok, func(i, j int) bool { return byAge(ok[i].meta, ok[j].meta) })

	taken := newRangeSet()
	var accepted []*Pool
	for i, c := range ok {
		if other, a, b := taken.firstOverlap(c.pool.Ranges); other != nil {
			c.r.errorf("spec.addresses", "%s overlaps %s of IPAddressPool %q", a, b, other.Name)
			continue
		}
		if i < len(ok)-1 { // the last pool is checked against nothing
			taken.add(c.pool)
		}
		accepted = append(accepted, c.pool)
	}
	sort.Slice(accepted, func(i, j int) bool { return accepted[i].Name < accepted[j].Name })
	return accepted
}

// rangeSet holds the disjoint ranges of the accepted pools, ordered by
// their first address, with the pool of each.
type rangeSet struct{ t *btree.BTreeG[ownedRange] }

// ownedRange is a range of a pool (kept small: the tree moves them).
type ownedRange struct {
	first, last netip.Addr
	pool        *Pool
	index       int32
}

func newRangeSet() rangeSet {
	return rangeSet{btree.NewG(32, func(a, b ownedRange) bool { return a.first.Less(b.first) })}
}

func (s rangeSet) add(p *Pool) {
	for i, r := range p.Ranges {
		s.t.ReplaceOrInsert(ownedRange{r.First, r.Last, p, int32(i)})
	}
}

// firstOverlap returns the first of rs (sorted) that overlaps a range of
// the set, with that range and its pool. The set's ranges are disjoint, so
// only the one starting last at or before r.Last can overlap r.
func (s rangeSet) firstOverlap(rs []Range) (*Pool, Range, Range) {
	for _, r := range rs {
		var hit *ownedRange
		s.t.DescendLessOrEqual(ownedRange{first: r.Last}, func(o ownedRange) bool {
			if r.Overlaps(Range{First: o.first, Last: o.last}) {
				hit = &o
			}
			return false
		})
		if hit != nil {
			return hit.pool, r, hit.pool.Ranges[hit.index]
		}
	}
	return nil, Range{}, Range{}
}

func parsePool(o *v1beta1.IPAddressPool, r *reporter) *Pool {
	p := &Pool{
		Name:          o.Name,
		Labels:        labels.Set(o.Labels),
		AutoAssign:    o.Spec.AutoAssign == nil || *o.Spec.AutoAssign,
		AvoidBuggyIPs: o.Spec.AvoidBuggyIPs,

		SharingAcrossNamespaces: o.Spec.AllowSharingAcrossNamespaces,
	}
	switch {
	case len(o.Spec.Addresses) == 0 && o.Spec.NodeAddresses == nil:
		r.errorf("spec", "set either addresses or nodeAddresses")
	case len(o.Spec.Addresses) > 0 && o.Spec.NodeAddresses != nil:
		r.errorf("spec", "addresses and nodeAddresses are mutually exclusive")
	case o.Spec.NodeAddresses != nil:
		p.NodeAddresses = parseNodeAddresses(o.Spec.NodeAddresses, r)
		if p.AvoidBuggyIPs {
			r.errorf("spec.avoidBuggyIPs", "does not apply to a nodeAddresses pool")
		}
	default:
		p.Ranges = parseRanges(o.Spec.Addresses, r)
	}
	if o.Spec.ServiceAllocation != nil {
		p.Allocation = parseAllocation(o.Spec.ServiceAllocation, r)
	}
	if r.broken {
		return nil
	}
	return p
}

func parseNodeAddresses(na *v1beta1.NodeAddresses, r *reporter) *NodeAddressSource {
	src := &NodeAddressSource{Selector: labels.Everything(), AddressType: na.AddressType}
	if na.NodeSelector != nil {
		sel := na.NodeSelector.AsMeta()
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			r.errorf("spec.nodeAddresses.nodeSelector", "invalid label selector: %v", err)
		} else {
			src.Selector = s
			src.NodeSelector = sel
		}
	}
	src.Ports.Denied = DefaultDeniedPorts
	if na.DeniedPorts != nil {
		ports := []int32{}
		for i, p := range *na.DeniedPorts {
			if p < 1 || p > 65535 {
				r.errorf(fmt.Sprintf("spec.nodeAddresses.deniedPorts[%d]", i), "%d is not a port (1-65535)", p)
				continue
			}
			ports = append(ports, p)
		}
		slices.Sort(ports)
		src.Ports.Denied = []PortRange{}
		for _, p := range slices.Compact(ports) {
			src.Ports.Denied = append(src.Ports.Denied, PortRange{First: p, Last: p})
		}
	}
	if na.AllowedPorts != nil {
		src.Ports.Allowed = []PortRange{}
		for i, a := range *na.AllowedPorts {
			field := fmt.Sprintf("spec.nodeAddresses.allowedPorts[%d]", i)
			pr := PortRange{Protocol: a.Protocol, First: a.Port, Last: a.Port}
			if a.EndPort != nil {
				pr.Last = *a.EndPort
			}
			switch {
			case a.Protocol != "" && a.Protocol != "TCP" && a.Protocol != "UDP" && a.Protocol != "SCTP":
				r.errorf(field+".protocol", "%q is not TCP, UDP or SCTP", a.Protocol)
			case pr.First < 1 || pr.First > 65535 || pr.Last < 1 || pr.Last > 65535:
				r.errorf(field, "%s is not a port or range of ports (1-65535)", pr)
			case pr.Last < pr.First:
				r.errorf(field+".endPort", "%d is below port %d", pr.Last, pr.First)
			default:
				src.Ports.Allowed = append(src.Ports.Allowed, pr)
			}
		}
	}
	src.Forwarders = parseForwarders(na.Forwarders, r)
	switch na.AddressType {
	case "":
		src.AddressType = v1beta1.NodeExternalIP
	case v1beta1.NodeExternalIP, v1beta1.NodeInternalIP:
	default:
		r.errorf("spec.nodeAddresses.addressType", "%q is not ExternalIP or InternalIP", na.AddressType)
	}
	return src
}

func parseAllocation(sa *v1beta1.ServiceAllocation, r *reporter) *Allocation {
	a := &Allocation{Priority: sa.Priority}
	if sa.Priority < 0 {
		r.errorf("spec.serviceAllocation.priority", "%d is negative", sa.Priority)
	}
	seen := map[string]bool{}
	for i, ns := range sa.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			r.errorf(fmt.Sprintf("spec.serviceAllocation.namespaces[%d]", i), "%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
			continue
		}
		if !seen[ns] {
			seen[ns] = true
			a.Namespaces = append(a.Namespaces, ns)
		}
	}
	sort.Strings(a.Namespaces)
	a.NamespaceSelectors = compileSelectors(r, "spec.serviceAllocation.namespaceSelectors", sa.NamespaceSelectors)
	a.ServiceSelectors = compileSelectors(r, "spec.serviceAllocation.serviceSelectors", sa.ServiceSelectors)
	return a
}

// parseRanges parses spec.addresses; the result is sorted, IPv4 first. An
// entry that overlaps another is reported once, naming one it overlaps, in
// O(n log n).
func parseRanges(in []string, r *reporter) []Range {
	type item struct {
		rg    Range
		index int
	}
	var items []item
	for i, s := range in {
		field := fmt.Sprintf("spec.addresses[%d]", i)
		rg, err := ParseRange(s)
		if err == nil {
			err = checkUsable(rg)
		}
		if err != nil {
			r.errorf(field, "%v", err)
			continue
		}
		if rg.Prefix.IsValid() && strings.TrimSpace(s) != rg.Prefix.String() && hostBitsSet(s) {
			r.warnf(field, "%q has host bits set: the pool holds the network %s, as MetalLB reads it", s, rg.Prefix)
		}
		items = append(items, item{rg, i})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].rg.First.Less(items[j].rg.First) })
	// Sweep in address order, keeping the entry that reaches furthest: an
	// entry that starts before it ends overlaps it.
	reported := map[int]bool{}
	reach := -1
	for i, it := range items {
		if reach >= 0 && it.rg.Overlaps(items[reach].rg) {
			later, earlier := it, items[reach]
			if later.index < earlier.index {
				later, earlier = earlier, later
			}
			if !reported[later.index] {
				reported[later.index] = true
				r.errorf(fmt.Sprintf("spec.addresses[%d]", later.index), "%s overlaps %s (spec.addresses[%d])", later.rg, earlier.rg, earlier.index)
			}
		}
		if reach < 0 || items[reach].rg.Last.BitLen() != it.rg.Last.BitLen() || items[reach].rg.Last.Less(it.rg.Last) {
			reach = i
		}
	}
	out := make([]Range, len(items))
	for i, it := range items {
		out[i] = it.rg
	}
	return out
}

// unusable are the addresses no Service can be reached at: a pool entry
// may not include any of them.
var unusable = []struct {
	prefix netip.Prefix
	what   string
	rg     Range
}{
	{prefix: netip.MustParsePrefix("0.0.0.0/32"), what: "the unspecified address"},
	{prefix: netip.MustParsePrefix("127.0.0.0/8"), what: "loopback addresses"},
	{prefix: netip.MustParsePrefix("169.254.0.0/16"), what: "link-local addresses"},
	{prefix: netip.MustParsePrefix("224.0.0.0/4"), what: "multicast addresses"},
	{prefix: netip.MustParsePrefix("255.255.255.255/32"), what: "the broadcast address"},
	{prefix: netip.MustParsePrefix("::/128"), what: "the unspecified address"},
	{prefix: netip.MustParsePrefix("::1/128"), what: "the loopback address"},
	{prefix: netip.MustParsePrefix("::ffff:0:0/96"), what: "IPv4-mapped addresses (write IPv4 addresses in dotted form)"},
	{prefix: netip.MustParsePrefix("fe80::/10"), what: "link-local addresses"},
	{prefix: netip.MustParsePrefix("ff00::/8"), what: "multicast addresses"},
}

func init() {
	for i := range unusable {
		u := &unusable[i]
		u.rg = Range{First: u.prefix.Addr(), Last: lastAddr(u.prefix)}
	}
}

// checkUsable refuses a range that includes an address no Service can be
// reached at.
func checkUsable(rg Range) error {
	for _, u := range unusable {
		if rg.Overlaps(u.rg) {
			return fmt.Errorf("%s includes %s (%s), which cannot be a Service's address", rg, u.what, u.prefix)
		}
	}
	return nil
}

// hostBitsSet reports whether the CIDR s has bits set below its mask.
func hostBitsSet(s string) bool {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	return err == nil && p.Masked() != p
}

// ParseRange parses one pool entry: a CIDR (10.0.0.0/24, fd00::/120; host
// bits are cleared, 10.0.0.5/24 is 10.0.0.0/24) or an inclusive range of one
// family (10.0.0.10-10.0.0.20).
func ParseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Range{}, fmt.Errorf("empty entry")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Range{}, fmt.Errorf("%q is not a CIDR: %v", s, err)
		}
		if err := plainAddr(p.Addr(), s); err != nil {
			return Range{}, err
		}
		// MetalLB reads a CIDR with host bits set as its network; so does
		// Herald (parseRanges warns).
		p = p.Masked()
		return Range{First: p.Addr(), Last: lastAddr(p), Prefix: p}, nil
	}
	first, last, ok := strings.Cut(s, "-")
	if !ok {
		return Range{}, fmt.Errorf("%q is neither a CIDR nor a range (write one address as %s/%d)", s, s, bitsOf(s))
	}
	a, err := netip.ParseAddr(strings.TrimSpace(first))
	if err != nil {
		return Range{}, fmt.Errorf("range %q: start: %v", s, err)
	}
	b, err := netip.ParseAddr(strings.TrimSpace(last))
	if err != nil {
		return Range{}, fmt.Errorf("range %q: end: %v", s, err)
	}
	if err := plainAddr(a, s); err != nil {
		return Range{}, err
	}
	if err := plainAddr(b, s); err != nil {
		return Range{}, err
	}
	if a.Is4() != b.Is4() {
		return Range{}, fmt.Errorf("range %q mixes IPv4 and IPv6", s)
	}
	if b.Less(a) {
		return Range{}, fmt.Errorf("range %q ends before it starts", s)
	}
	rg := Range{First: a, Last: b}
	if ps := rangePrefixes(a, b); len(ps) == 1 {
		rg.Prefix = ps[0]
	}
	return rg, nil
}

func bitsOf(s string) int {
	if strings.Contains(s, ":") {
		return 128
	}
	return 32
}

func plainAddr(a netip.Addr, entry string) error {
	if a.Zone() != "" {
		return fmt.Errorf("%q: addresses may not carry a zone", entry)
	}
	if a.Is4In6() {
		return fmt.Errorf("%q: write IPv4 addresses in dotted form, not as IPv4-mapped IPv6", entry)
	}
	return nil
}

// lastAddr is the highest address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// rangePrefixes splits an inclusive range into the fewest CIDR blocks that
// cover exactly it, in address order.
func rangePrefixes(first, last netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	bits := first.BitLen()
	for {
		// The largest block starting at first that does not pass last.
		size := bits
		for size > 0 {
			p := netip.PrefixFrom(first, size-1)
			if p.Masked().Addr() != first || last.Less(lastAddr(p)) {
				break
			}
			size--
		}
		p := netip.PrefixFrom(first, size)
		out = append(out, p)
		end := lastAddr(p)
		if end == last {
			return out
		}
		first = end.Next()
	}
}
