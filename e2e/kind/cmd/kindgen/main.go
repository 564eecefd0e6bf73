// Command kindgen writes one of the kind setup's generated files to stdout (e2e/kind/kind.sh calls it):
//
//	kindgen cluster|gobgp|values [flags]
//
// The shapes live in package kindconf; this only turns flags into a kindconf.Setup.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/herald-lb/herald/e2e/kind/kindconf"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kindgen:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: kindgen cluster|gobgp|values [flags]")
	}
	what := args[0]
	fs := flag.NewFlagSet("kindgen "+what, flag.ContinueOnError)
	var s kindconf.Setup
	var family, pods, services, nodes, routerID string
	var nodeASN, routerASN uint
	fs.StringVar(&s.Name, "name", "herald-kind", "cluster name")
	fs.StringVar(&family, "family", "ipv4", "ipv4 or dual")
	fs.IntVar(&s.Workers, "workers", 2, "worker nodes")
	fs.StringVar(&s.NodeImage, "node-image", "", "node image (empty: kind's default)")
	fs.BoolVar(&s.Offline, "offline", false, "the node image is the offline one (etcd tag, no CoreDNS)")
	fs.StringVar(&s.EtcdImageTag, "etcd-tag", "", "etcd image tag in the offline node image")
	fs.StringVar(&pods, "pod-subnets", "", "pod subnets, IPv4 first, comma-separated")
	fs.StringVar(&services, "service-subnets", "", "service subnets, IPv4 first, comma-separated")
	fs.UintVar(&nodeASN, "node-asn", 0, "the nodes' AS")
	fs.UintVar(&routerASN, "router-asn", 0, "the router's AS")
	fs.StringVar(&routerID, "router-id", "", "the router's BGP identifier")
	fs.StringVar(&nodes, "nodes", "", "the nodes' addresses, comma-separated")
	fs.StringVar(&s.HeraldImage, "herald-image", "", "Herald's image, REPOSITORY:TAG")
	fs.StringVar(&s.MemberlistProfile, "memberlist-profile", "", "fast or default (empty: the chart's)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	s.Family = kindconf.Family(family)
	var err error
	if s.PodSubnets, err = prefixes(pods); err != nil {
		return fmt.Errorf("-pod-subnets: %w", err)
	}
	if s.ServiceSubnets, err = prefixes(services); err != nil {
		return fmt.Errorf("-service-subnets: %w", err)
	}
	for _, a := range split(nodes) {
		addr, err := netip.ParseAddr(a)
		if err != nil {
			return fmt.Errorf("-nodes: %w", err)
		}
		s.Nodes = append(s.Nodes, addr)
	}
	if routerID != "" {
		if s.RouterID, err = netip.ParseAddr(routerID); err != nil {
			return fmt.Errorf("-router-id: %w", err)
		}
	}
	s.NodeASN, s.RouterASN = uint32(nodeASN), uint32(routerASN)
	var out string
	switch what {
	case "cluster":
		out, err = kindconf.ClusterConfig(s)
	case "gobgp":
		out, err = kindconf.GoBGPConfig(s)
	case "values":
		out, err = kindconf.HeraldValues(s)
	default:
		return fmt.Errorf("unknown file %q (want cluster, gobgp or values)", what)
	}
	if err != nil {
		return err
	}
	_, err = os.Stdout.WriteString(out)
	return err
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func prefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range split(s) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
