package config

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/herald-lb/herald/config/v1beta1"
)

// parsePools validates each pool on its own, then drops pools that overlap a
// pool created before them. The result is sorted by name.
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

	var accepted []*Pool
	for _, c := range ok {
		if other, a, b := firstOverlap(accepted, c.pool); other != nil {
			c.r.errorf("spec.addresses", "%s overlaps %s of IPAddressPool %q", a, b, other.Name)
			continue
		}
		accepted = append(accepted, c.pool)
	}
	sort.Slice(accepted, func(i, j int) bool { return accepted[i].Name < accepted[j].Name })
	return accepted
}

func firstOverlap(pools []*Pool, p *Pool) (*Pool, Range, Range) {
	for _, other := range pools {
		for _, a := range p.Ranges {
			for _, b := range other.Ranges {
				if a.Overlaps(b) {
					return other, a, b
				}
			}
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
		s, err := metav1.LabelSelectorAsSelector(na.NodeSelector)
		if err != nil {
			r.errorf("spec.nodeAddresses.nodeSelector", "invalid label selector: %v", err)
		} else {
			src.Selector = s
			src.NodeSelector = na.NodeSelector.DeepCopy()
		}
	}
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

// parseRanges parses spec.addresses; the result is sorted, IPv4 first.
func parseRanges(in []string, r *reporter) []Range {
	type item struct {
		rg    Range
		field string
	}
	var items []item
	for i, s := range in {
		field := fmt.Sprintf("spec.addresses[%d]", i)
		rg, err := ParseRange(s)
		if err != nil {
			r.errorf(field, "%v", err)
			continue
		}
		items = append(items, item{rg, field})
	}
	for i := range items {
		for j := 0; j < i; j++ {
			if items[i].rg.Overlaps(items[j].rg) {
				r.errorf(items[i].field, "%s overlaps %s (%s)", items[i].rg, items[j].rg, items[j].field)
			}
		}
	}
	out := make([]Range, len(items))
	for i, it := range items {
		out[i] = it.rg
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First.Less(out[j].First) })
	return out
}

// ParseRange parses one pool entry: a CIDR (10.0.0.0/24, fd00::/120) or an
// inclusive range of one family (10.0.0.10-10.0.0.20).
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
		if p.Masked() != p {
			return Range{}, fmt.Errorf("%q has host bits set (the network is %s)", s, p.Masked())
		}
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
