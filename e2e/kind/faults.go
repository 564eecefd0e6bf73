//go:build e2e

package kind

import (
	"context"
	"fmt"
	"strings"

	"github.com/herald-lb/herald/e2e"
	"github.com/herald-lb/herald/e2e/lab"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var metav1GetOptions = metav1.GetOptions{}

// faults breaks the kind setup's nodes through Docker.
type faults struct{ k *Kind }

func (f faults) node(name string) (e2e.Node, error) {
	n, ok := f.k.node(name)
	if !ok {
		return e2e.Node{}, fmt.Errorf("no node %q", name)
	}
	return n, nil
}

// StopSpeaker kills the node's "speaker" container through the node's containerd (ctr inside the node).
func (f faults) StopSpeaker(ctx context.Context, node string) error {
	if _, err := f.node(node); err != nil {
		return err
	}
	ctr := func(args ...string) ([]byte, error) {
		return docker(ctx, append([]string{"exec", node, "ctr", "-n", "k8s.io"}, args...)...)
	}
	out, err := ctr("containers", "ls", "-q", "labels.\"io.kubernetes.container.name\"==speaker")
	if err != nil {
		return err
	}
	killed := 0
	for _, id := range strings.Fields(string(out)) {
		if _, err := ctr("tasks", "kill", "-s", "SIGKILL", id); err == nil {
			killed++
		}
	}
	if killed == 0 {
		return fmt.Errorf("no running speaker container on %s", node)
	}
	return nil
}

// CutLink disconnects the node's container from the kind network (its eth0 goes away). Docker removes the
// interface by the name it gave it; one that RestoreLink renamed back to eth0 it leaves behind, with its
// address: that one is deleted here, so the link is really gone and the next connect can use the address.
func (f faults) CutLink(ctx context.Context, node string) error {
	n, err := f.node(node)
	if err != nil {
		return err
	}
	if _, err := docker(ctx, "network", "disconnect", f.k.network, node); err != nil {
		return err
	}
	out, err := docker(ctx, "exec", node, "ip", "-o", "-4", "addr", "show", "to", n.IPv4.String())
	if err != nil {
		return err
	}
	if fields := strings.Fields(string(out)); len(fields) > 1 {
		_, err = docker(ctx, "exec", node, "ip", "link", "del", fields[1])
	}
	return err
}

// RestoreLink connects the node again with its addresses (Docker derives the MAC from the IPv4 address, so it
// is the same) and puts back the routes kind.sh set up on it (other nodes' pod CIDRs, the external network).
func (f faults) RestoreLink(ctx context.Context, node string) error {
	n, err := f.node(node)
	if err != nil {
		return err
	}
	out, err := docker(ctx, "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", node)
	if err != nil {
		return err
	}
	if strings.Contains(" "+string(out), " "+f.k.network+" ") {
		return nil // connected
	}
	args := []string{"network", "connect", "--ip", n.IPv4.String()}
	if n.IPv6.IsValid() {
		args = append(args, "--ip6", n.IPv6.String())
	}
	if _, err := docker(ctx, append(args, f.k.network, node)...); err != nil {
		return err
	}
	if err := f.renameLink(ctx, n); err != nil {
		return err
	}
	if err := f.defaultRoute(ctx, n); err != nil {
		return err
	}
	for _, m := range f.k.nodes {
		if m.Name == node {
			continue
		}
		if m.PodCIDR.IsValid() {
			if _, err := docker(ctx, "exec", node, "ip", "route", "replace", m.PodCIDR.String(), "via", m.IPv4.String()); err != nil {
				return err
			}
		}
		if m.PodCIDRv6.IsValid() && m.IPv6.IsValid() {
			if _, err := docker(ctx, "exec", node, "ip", "-6", "route", "replace", m.PodCIDRv6.String(), "via", m.IPv6.String()); err != nil {
				return err
			}
		}
	}
	if r := f.k.env["NODE_ROUTES"]; r != "" {
		for _, rt := range strings.Split(r, ";") {
			if rt = strings.TrimSpace(rt); rt != "" && (n.IPv6.IsValid() || !strings.Contains(rt, ":")) {
				if _, err := docker(ctx, append([]string{"exec", node, "ip", "route", "replace"}, strings.Fields(rt)...)...); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// renameLink gives the node's interface on the kind network its name back: Docker names a reconnected
// interface with the next free index (eth1, ...), but the node's LAN interface is eth0 (e2e.Node.Interface).
// Renaming takes the link down, which drops its IPv6 address and routes: they are added again.
func (f faults) renameLink(ctx context.Context, n e2e.Node) error {
	out, err := docker(ctx, "exec", n.Name, "ip", "-o", "-4", "addr", "show", "to", n.IPv4.String())
	if err != nil {
		return err
	}
	fields := strings.Fields(string(out))
	if len(fields) < 4 {
		return fmt.Errorf("%s: no interface with %s after reconnecting: %q", n.Name, n.IPv4, out)
	}
	dev, prefix := fields[1], fields[3]
	if dev == n.Interface {
		return nil
	}
	script := fmt.Sprintf("ip link set %[1]s down && ip link set %[1]s name %[2]s && ip link set %[2]s up && ip addr replace %[3]s dev %[2]s",
		dev, n.Interface, prefix)
	if n.IPv6.IsValid() {
		script += fmt.Sprintf(" && ip -6 addr replace %s/64 dev %s nodad", n.IPv6, n.Interface)
	}
	_, err = docker(ctx, "exec", n.Name, "sh", "-c", script)
	return err
}

// defaultRoute puts back the node's default route through the kind network's gateway (Docker's, as at
// creation): the node's own traffic to Service addresses (the speaker's to the API server) needs a route before
// kube-proxy's DNAT applies.
func (f faults) defaultRoute(ctx context.Context, n e2e.Node) error {
	gw := f.k.env["GATEWAY"]
	if gw == "" {
		return nil
	}
	_, err := docker(ctx, "exec", n.Name, "ip", "route", "replace", "default", "via", gw, "dev", n.Interface)
	return err
}

// Partition drops the port between the node and the others with an nftables table in the node container's
// network namespace.
func (f faults) Partition(ctx context.Context, node string, port int) (func(context.Context) error, error) {
	if _, err := f.node(node); err != nil {
		return nil, err
	}
	pid, err := containerPID(node)
	if err != nil {
		return nil, err
	}
	var others []e2e.Node
	for _, n := range f.k.nodes {
		if n.Name != node {
			others = append(others, n)
		}
	}
	return lab.PartitionNetns(ctx, fmt.Sprintf("/proc/%d/ns/net", pid), "herald_kind_partition", others, port)
}

func (f faults) PauseNode(ctx context.Context, node string) error {
	if _, err := f.node(node); err != nil {
		return err
	}
	_, err := docker(ctx, "pause", node)
	return err
}

func (f faults) ResumeNode(ctx context.Context, node string) error {
	if _, err := f.node(node); err != nil {
		return err
	}
	out, err := docker(ctx, "inspect", "-f", "{{.State.Paused}}", node)
	if err != nil || strings.TrimSpace(string(out)) != "true" {
		return err
	}
	_, err = docker(ctx, "unpause", node)
	return err
}
