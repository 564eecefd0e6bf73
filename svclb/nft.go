package svclb

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/nftables"
)

// ForwardingError says the kernel does not forward a family the
// configuration needs (the pod spec sets the sysctl; without it the DNAT
// rules would silently drop everything).
type ForwardingError struct {
	Sysctl, Value string
}

func (e *ForwardingError) Error() string {
	return fmt.Sprintf("forwarding is disabled in this network namespace: %s is %q, want 1 (set it in the pod's securityContext.sysctls)", e.Sysctl, e.Value)
}

// forwardingSysctls maps a family to the file that says whether it is
// forwarded.
var forwardingSysctls = map[int]string{
	4: "/proc/sys/net/ipv4/ip_forward",
	6: "/proc/sys/net/ipv6/conf/all/forwarding",
}

// CheckForwarding returns a *ForwardingError when a family c forwards is
// not forwarded by the kernel of the calling thread's network namespace.
// readFile is os.ReadFile outside tests.
func CheckForwarding(c Config, readFile func(string) ([]byte, error)) error {
	v4, v6 := c.Families()
	for fam, need := range map[int]bool{4: v4, 6: v6} {
		if !need {
			continue
		}
		path := forwardingSysctls[fam]
		b, err := readFile(path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if v := strings.TrimSpace(string(b)); v != "1" {
			return &ForwardingError{Sysctl: strings.ReplaceAll(strings.TrimPrefix(path, "/proc/sys/"), "/", "."), Value: v}
		}
	}
	return nil
}

// nftBackend installs and removes a Ruleset through netlink.
type nftBackend struct {
	conn *nftables.Conn
}

func newNftBackend() (*nftBackend, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("opening the nftables netlink socket: %w (on a host without nftables, set %s=%s)", err, EnvMode, ModeUserspace)
	}
	return &nftBackend{conn: c}, nil
}

// apply replaces the table of rs (a stale one of the same name, left by a
// killed forwarder, goes in the same atomic batch).
func (b *nftBackend) apply(rs Ruleset) error {
	if b.exists(rs.Table) {
		b.conn.DelTable(rs.Table)
	}
	b.conn.AddTable(rs.Table)
	for _, ch := range rs.Chains {
		b.conn.AddChain(ch)
	}
	for _, s := range rs.Sets {
		if err := b.conn.AddSet(s.Set, s.Elements); err != nil {
			return fmt.Errorf("nftables: adding map %s: %w", s.Set.Name, err)
		}
	}
	for _, r := range rs.Rules {
		b.conn.AddRule(r)
	}
	if err := b.conn.Flush(); err != nil {
		return fmt.Errorf("nftables: installing table inet %s: %w (on a host without nftables, set %s=%s)", rs.Table.Name, err, EnvMode, ModeUserspace)
	}
	return nil
}

func (b *nftBackend) exists(t *nftables.Table) bool {
	got, err := b.conn.ListTableOfFamily(t.Name, t.Family)
	return err == nil && got != nil
}

// remove deletes the table; a table already gone is not an error.
func (b *nftBackend) remove(t *nftables.Table) error {
	if !b.exists(t) {
		return nil
	}
	b.conn.DelTable(t)
	if err := b.conn.Flush(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("nftables: removing table inet %s: %w", t.Name, err)
	}
	return nil
}

// count returns the number of rules in t (to notice a table emptied or
// replaced behind our back).
func (b *nftBackend) count(rs Ruleset) (int, error) {
	n := 0
	for _, ch := range rs.Chains {
		rules, err := b.conn.GetRules(rs.Table, ch)
		if err != nil {
			return 0, err
		}
		n += len(rules)
	}
	return n, nil
}
