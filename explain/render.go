package explain

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/herald-lb/herald/internal/termsafe"
)

// Write prints a ServiceReport for people: the cause first, then the
// conditions, each address with every node's part, and the recent
// warnings. wide adds the sessions' prefixes and BFD state and the
// events' times (now is when they are measured from). Every text from an
// object is printed through termsafe.Escape.
func Write(out io.Writer, r ServiceReport, wide bool, now time.Time) error {
	ew := &errWriter{w: out}
	ew.printf("Service:   %s\n", termsafe.Escape(r.Service))
	ew.printf("Cause:     %s\n", termsafe.Escape(r.Cause))
	ew.printf("Allocated: %s\n", condText(r.Allocated))
	ew.printf("Announced: %s\n", condText(r.Announced))
	if r.ExternalTrafficPolicy != "" {
		ew.printf("Policy:    externalTrafficPolicy %s\n", termsafe.Escape(r.ExternalTrafficPolicy))
	}
	for _, a := range r.Addresses {
		ew.printf("\n%s (pool %s, %s): %s\n", termsafe.Escape(a.Address), termsafe.Escape(orDash(a.Pool)), termsafe.Escape(a.Mode), addressLine(a))
		if len(a.Nodes) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		cols := []string{"  NODE"}
		l2, bgp := a.Mode == "L2" || a.Mode == "L2+BGP", a.Mode == "BGP" || a.Mode == "L2+BGP"
		if l2 {
			cols = append(cols, "L2")
		}
		if bgp {
			cols = append(cols, "BGP", "SESSIONS")
		}
		cols = append(cols, "WHY")
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		for _, n := range a.Nodes {
			row := []string{"  " + termsafe.Escape(n.Node)}
			if l2 {
				row = append(row, termsafe.Escape(n.L2))
			}
			if bgp {
				row = append(row, termsafe.Escape(orDash(n.BGP)), sessionsText(n.Sessions, wide))
			}
			row = append(row, termsafe.Escape(orDash(n.Why)))
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.ReadySpeakers) > 0 {
		ew.printf("\nReady speakers (the plan's candidates): %s\n", termsafe.Escape(strings.Join(r.ReadySpeakers, ", ")))
	}
	if len(r.Warnings) > 0 {
		ew.printf("\nRecent warnings:\n")
		for _, e := range r.Warnings {
			when := ""
			if wide {
				when = ", " + age(now.Sub(e.Last)) + " ago"
			}
			ew.printf("  %s (x%d, %s%s): %s\n", termsafe.Escape(e.Reason), e.Count, termsafe.Escape(orDash(e.From)), when, termsafe.Escape(e.Message))
		}
	}
	return ew.err
}

// WriteStatus prints a StatusReport for people, every text from an object
// through termsafe.Escape.
func WriteStatus(out io.Writer, r StatusReport, wide bool) error {
	ew := &errWriter{w: out}
	ew.printf("POOLS\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tKIND\tSERVING\tSERVICES\tIPV4 USED\tIPV6 USED")
	for _, p := range r.Pools {
		v4, v6 := "-", "-"
		if p.Kind == "addresses" {
			v4, v6 = used(p.AssignedIPv4, p.AvailableIPv4), used(p.AssignedIPv6, p.AvailableIPv6)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", termsafe.Escape(p.Name), termsafe.Escape(p.Kind), termsafe.Escape(p.Serving), p.Services, v4, v6)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Waiting) > 0 {
		ew.printf("\nWAITING FOR AN ADDRESS\n")
		for _, g := range r.Waiting {
			ew.printf("  %s: %d Service(s): %s%s\n    %s\n", termsafe.Escape(g.Reason), g.Count, termsafe.Escape(strings.Join(g.Services, ", ")), more(g.Count, len(g.Services)), termsafe.Escape(g.Message))
		}
	}
	if len(r.Unannounced) > 0 {
		ew.printf("\nNOT ANNOUNCED\n")
		for i, u := range r.Unannounced {
			if i == maxListed && !wide {
				ew.printf("  ... and %d more (-o wide lists them all)\n", len(r.Unannounced)-maxListed)
				break
			}
			ew.printf("  %s (%s): %s\n", termsafe.Escape(u.Address), termsafe.Escape(strings.Join(u.Services, ", ")), termsafe.Escape(u.Reason))
		}
	}
	ew.printf("\nSPEAKERS\n")
	tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tPOD\tREADY\tMEMBERS\tL2 ADDRESSES\tBGP SESSIONS")
	for _, s := range r.Speakers {
		members, l2, sess := "-", "-", "-"
		if s.Reported {
			members = fmt.Sprintf("%d/%d", s.Members, s.ReadySpeakers)
			l2 = strconv.Itoa(s.L2Addresses)
			sess = sessionsText(s.Sessions, wide)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", termsafe.Escape(s.Node), termsafe.Escape(orDash(s.Pod)), yesNo(s.Ready), members, l2, sess)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Configuration) > 0 {
		ew.printf("\nCONFIGURATION WITH PROBLEMS\n")
		for _, c := range r.Configuration {
			ew.printf("  %s %s (serving: %s)\n", termsafe.Escape(c.Kind), termsafe.Escape(c.Name), servingText(c.Serving))
			for _, p := range c.Problems {
				ew.printf("    %s\n", termsafe.Escape(p))
			}
		}
	}
	return ew.err
}

func servingText(s string) string {
	switch s {
	case "current":
		return "as written"
	case "last-valid":
		return "its last valid spec"
	}
	return "not in use"
}

// addressLine says how an address is announced; its texts are escaped.
func addressLine(a AddressReport) string {
	switch {
	case a.Mode == "ServiceLB":
		return "the own address of " + termsafe.Escape(orDash(strings.Join(a.ServiceLBNodes, ", ")))
	case !a.Announced:
		return "NOT ANNOUNCED (" + termsafe.Escape(a.Reason) + ")"
	}
	var parts []string
	if a.L2Node != "" {
		p := "answered by " + termsafe.Escape(a.L2Node)
		if len(a.Interfaces) > 0 {
			p += " on " + termsafe.Escape(strings.Join(a.Interfaces, ", "))
		}
		parts = append(parts, p)
	}
	if len(a.BGPNodes) > 0 {
		parts = append(parts, "advertised by "+countNodes(len(a.BGPNodes)))
	}
	return strings.Join(parts, "; ")
}

// sessionsText lists sessions as "peer:State", with the prefixes and BFD
// state when wide; its texts are escaped.
func sessionsText(ss []SessionReport, wide bool) string {
	if len(ss) == 0 {
		return "-"
	}
	var parts []string
	for _, s := range ss {
		p := termsafe.Escape(s.Peer) + ":" + termsafe.Escape(s.State)
		if wide {
			p += fmt.Sprintf("(%s,%d", termsafe.Escape(s.Address), s.Prefixes)
			if s.BFD != "" {
				p += ",bfd " + termsafe.Escape(s.BFD)
			}
			p += ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// condText says a condition; its texts are escaped.
func condText(c *Condition) string {
	if c == nil {
		return "(not written)"
	}
	s := termsafe.Escape(c.Status) + " " + termsafe.Escape(c.Reason)
	if c.Message != "" {
		s += ": " + termsafe.Escape(c.Message)
	}
	return s
}

func used(assigned, available int64) string {
	total := assigned + available
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d (%d%%)", assigned, total, assigned*100/total)
}

func more(total, shown int) string {
	if total > shown {
		return fmt.Sprintf(" and %d more", total-shown)
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dh", int(d.Hours()))
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
