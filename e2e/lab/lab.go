//go:build e2e

// Package lab drives the Herald lab (the e2e/lab/lab script) from Go and implements e2e.Cluster on it: nodes,
// client and routers are network namespaces on one bridge; the Kubernetes control plane runs on the host.
package lab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/herald-lb/herald/e2e"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// command is the lab driver script (e2e/lab/lab) run with args.
func command(ctx context.Context, args ...string) (*exec.Cmd, error) {
	script, err := e2e.SourceFile("e2e/lab/lab")
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, script, args...), nil
}

// Run runs the lab script with args (e.g. "up", "down"), streaming its output to the given writer.
func Run(ctx context.Context, out *os.File, args ...string) error {
	cmd, err := command(ctx, args...)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("lab %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// Lab is a running lab. It implements e2e.Cluster.
type Lab struct {
	env     map[string]string
	cfg     *rest.Config
	kube    kubernetes.Interface
	nodes   []e2e.Node
	socks   map[string]string // node name -> containerd socket
	routers []e2e.Router
	client  *client
	ext     *client
	ranges  e2e.Ranges
	images  e2e.Images
}

var (
	_ e2e.Cluster       = (*Lab)(nil)
	_ e2e.Announcer     = (*Lab)(nil)
	_ e2e.ImageImporter = (*Lab)(nil)
)

// Open connects to the running lab (as `lab up` left it).
func Open() (*Lab, error) {
	cmd, err := command(context.Background(), "env")
	if err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("lab env (is the lab up?): %w", err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	l := &Lab{env: env, socks: map[string]string{}}
	if l.cfg, err = clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"]); err != nil {
		return nil, err
	}
	l.cfg.QPS, l.cfg.Burst = 50, 100
	if l.kube, err = kubernetes.NewForConfig(l.cfg); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(env["LAB_NODES"])
	if err != nil {
		return nil, fmt.Errorf("lab env: LAB_NODES: %w", err)
	}
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("NODE_%d", i)
		node, sock, err := parseNode(env[key])
		if err != nil {
			return nil, fmt.Errorf("lab env: %s: %w", key, err)
		}
		if err := inNetns(l.nsPath(node.Name), func() error {
			ifi, err := net.InterfaceByName(node.Interface)
			if err == nil {
				node.MAC = ifi.HardwareAddr
			}
			return err
		}); err != nil {
			return nil, fmt.Errorf("node %s: reading the MAC of %s: %w", node.Name, node.Interface, err)
		}
		l.nodes = append(l.nodes, node)
		l.socks[node.Name] = sock
	}
	if l.ranges, err = parseRanges(env); err != nil {
		return nil, err
	}
	l.images.Echo = env["ECHO_IMAGE"]
	if env["HERALD_IMAGE_BUILT"] == "1" {
		l.images.Herald = env["HERALD_IMAGE"]
	}
	nodeASN, _ := strconv.ParseUint(env["NODE_ASN"], 10, 32)
	gobgpASN, _ := strconv.ParseUint(env["GOBGP_ASN"], 10, 32)
	frrASN, _ := strconv.ParseUint(env["FRR_ASN"], 10, 32)
	l.routers = []e2e.Router{
		&gobgpRouter{cli: nsGobgp(env["NS_GOBGP"], env["GOBGP_API_PORT"]), asn: uint32(gobgpASN), peerASN: uint32(nodeASN),
			addrs: addrs(env["GOBGP4"], env["GOBGP6"])},
		&frrRouter{ns: env["NS_FRR"], vtyDir: env["FRR_VTY_DIR"], asn: uint32(frrASN), peerASN: uint32(nodeASN),
			addrs: addrs(env["FRR4"], env["FRR6"])},
	}
	l.client = &client{path: l.nsPath(env["NS_CLIENT"]), addrs: addrs(env["CLIENT4"], env["CLIENT6"]), node: l.node}
	l.ext = &client{path: l.nsPath(env["NS_EXT"]), addrs: addrs(env["EXT4"], env["EXT6"]), node: l.node}
	return l, nil
}

// parseNode parses a NODE_i line of `lab env`: "name ipv4 ipv6 podcidr containerd-socket [podcidr6]" (the IPv6
// pod CIDR only in a dual-stack lab). It returns the node and its containerd socket.
func parseNode(line string) (e2e.Node, string, error) {
	f := strings.Fields(line)
	if len(f) != 5 && len(f) != 6 {
		return e2e.Node{}, "", fmt.Errorf("want 5 or 6 fields, got %q", line)
	}
	node := e2e.Node{Name: f[0], Interface: "eth0"}
	var err error
	if node.IPv4, err = netip.ParseAddr(f[1]); err != nil || !node.IPv4.Is4() {
		return e2e.Node{}, "", fmt.Errorf("bad IPv4 address %q", f[1])
	}
	if node.IPv6, err = netip.ParseAddr(f[2]); err != nil || !node.IPv6.Is6() {
		return e2e.Node{}, "", fmt.Errorf("bad IPv6 address %q", f[2])
	}
	if node.PodCIDR, err = netip.ParsePrefix(f[3]); err != nil || !node.PodCIDR.Addr().Is4() {
		return e2e.Node{}, "", fmt.Errorf("bad IPv4 pod CIDR %q", f[3])
	}
	if len(f) == 6 {
		if node.PodCIDRv6, err = netip.ParsePrefix(f[5]); err != nil || !node.PodCIDRv6.Addr().Is6() {
			return e2e.Node{}, "", fmt.Errorf("bad IPv6 pod CIDR %q", f[5])
		}
	}
	return node, f[4], nil
}

func parseRanges(env map[string]string) (e2e.Ranges, error) {
	var r e2e.Ranges
	for _, x := range []struct {
		dst *netip.Prefix
		key string
	}{{&r.L2, "LB_L2_RANGE"}, {&r.L2v6, "LB_L2_RANGE6"}, {&r.BGP, "LB_BGP_RANGE"}, {&r.BGPv6, "LB_BGP_RANGE6"}} {
		p, err := netip.ParsePrefix(env[x.key])
		if err != nil {
			return r, fmt.Errorf("lab env: %s: %w", x.key, err)
		}
		*x.dst = p
	}
	return r, nil
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}

func (l *Lab) Name() string                   { return "lab" }
func (l *Lab) Kube() kubernetes.Interface     { return l.kube }
func (l *Lab) RESTConfig() *rest.Config       { return rest.CopyConfig(l.cfg) }
func (l *Lab) Nodes() []e2e.Node              { return append([]e2e.Node(nil), l.nodes...) }
func (l *Lab) Routers() []e2e.Router          { return append([]e2e.Router(nil), l.routers...) }
func (l *Lab) Client() e2e.ClientHost         { return l.client }
func (l *Lab) ExternalClient() e2e.ClientHost { return l.ext }
func (l *Lab) Faults() e2e.Faults             { return faults{l} }
func (l *Lab) Ranges() e2e.Ranges             { return l.ranges }
func (l *Lab) Images() e2e.Images             { return l.images }
func (l *Lab) Env() map[string]string         { return l.env }
func (l *Lab) nsPath(ns string) string        { return "/var/run/netns/" + ns }
func (l *Lab) node(name string) (e2e.Node, bool) {
	for _, n := range l.nodes {
		if n.Name == name {
			return n, true
		}
	}
	return e2e.Node{}, false
}

func (l *Lab) nodeIndex(name string) (int, error) {
	for i, n := range l.nodes {
		if n.Name == name {
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("no node %q", name)
}

// InstallHerald runs `lab herald-up` (with LAB_SPEAKER=1 for the speakers); remove runs `lab herald-down`.
func (l *Lab) InstallHerald(ctx context.Context, speakers bool) (func(context.Context) error, error) {
	env := "LAB_SPEAKER=0"
	if speakers {
		env = "LAB_SPEAKER=1"
	}
	cmd, err := command(ctx, "herald-up")
	if err != nil {
		return nil, err
	}
	cmd.Env = append(os.Environ(), env)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("lab herald-up (%s): %w", env, err)
	}
	return func(ctx context.Context) error { return Run(ctx, os.Stdout, "herald-down") }, nil
}

// ImportImage imports a docker-archive tarball into every node's containerd (namespace k8s.io, where the kubelet
// looks), as `lab up` does with the lab's own images.
func (l *Lab) ImportImage(ctx context.Context, tarball string) error {
	for _, n := range l.nodes {
		out, err := exec.CommandContext(ctx, "ctr", "-a", l.socks[n.Name], "-n", "k8s.io", "images", "import",
			"--all-platforms", tarball).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing %s into %s: %w: %s", tarball, n.Name, err, out)
		}
	}
	return nil
}

// Lacks: the lab has FRR with BFD; its nodes are namespaces with host processes, which it does not freeze.
func (l *Lab) Lacks(f e2e.Feature) string {
	switch f {
	case e2e.FeatureFRR, e2e.FeatureBFD, e2e.FeatureImageImport:
		return ""
	case e2e.FeatureNodePause:
		return "its nodes are network namespaces whose processes run on the host; the lab has no way to freeze one"
	}
	return "unknown feature"
}

// Announce starts the lab's stand-in BGP speaker (gobgpd) on each node and announces the prefixes.
func (l *Lab) Announce(ctx context.Context, nodes []string, prefixes ...netip.Prefix) error {
	var idx []string
	for _, n := range nodes {
		i, err := l.nodeIndex(n)
		if err != nil {
			return err
		}
		idx = append(idx, strconv.Itoa(i))
	}
	args := []string{"announce", strings.Join(idx, ",")}
	for _, p := range prefixes {
		args = append(args, p.String())
	}
	cmd, err := command(ctx, args...)
	if err != nil {
		return err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("lab %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// StopAnnouncing stops the node's stand-in BGP speaker.
func (l *Lab) StopAnnouncing(ctx context.Context, node string) error {
	i, err := l.nodeIndex(node)
	if err != nil {
		return err
	}
	cmd, err := command(ctx, "withdraw", strconv.Itoa(i))
	if err != nil {
		return err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("lab withdraw %d: %w: %s", i, err, out)
	}
	return nil
}

// run runs a command inside a lab network namespace (nsenter, so /sys is left alone) and returns its stdout.
func run(ctx context.Context, ns string, name string, args ...string) ([]byte, error) {
	return runIn(ctx, "/var/run/netns/"+ns, name, args...)
}

// runIn runs a command inside the network namespace at path and returns its stdout.
func runIn(ctx context.Context, path string, name string, args ...string) ([]byte, error) {
	full := append([]string{"--net=" + path, "--", name}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), path, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
