//go:build e2e

// Package kind implements e2e.Cluster on the kind setup that e2e/kind/kind.sh brings up: a kind cluster whose
// nodes are containers on the herald-kind Docker network, a GoBGP router container peering with every node, a
// client container on the same network and an external client behind the router. Herald is installed with
// `helm install` of charts/herald.
//
// The clients are seen through their containers' network namespaces (the lab's namespace client, pointed at
// /proc/PID/ns/net), the router through `docker exec ... gobgp`, node faults through Docker: `docker network
// disconnect`/`connect` cuts and restores a node's link, `docker pause` freezes a whole node.
package kind

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
	"github.com/herald-lb/herald/e2e/lab"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Kind is the running kind setup. It implements e2e.Cluster.
type Kind struct {
	env     map[string]string
	cfg     *rest.Config
	kube    kubernetes.Interface
	nodes   []e2e.Node
	network string
	routers []e2e.Router
	client  e2e.ClientHost
	ext     e2e.ClientHost
	ranges  e2e.Ranges
	images  e2e.Images
}

var _ e2e.Cluster = (*Kind)(nil)

// Open reads the facts kind.sh wrote (envFile; "" asks `kind.sh env`) and connects to the cluster.
func Open(envFile string) (*Kind, error) {
	var raw []byte
	var err error
	if envFile != "" {
		raw, err = os.ReadFile(envFile)
	} else {
		var script string
		if script, err = e2e.SourceFile("e2e/kind/kind.sh"); err == nil {
			raw, err = exec.Command(script, "env").Output()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kind env (is the kind setup up? e2e/kind/kind.sh up): %w", err)
	}
	env, err := parseEnv(raw)
	if err != nil {
		return nil, err
	}
	k := &Kind{env: env, network: env["NETWORK"]}
	if k.cfg, err = clientcmd.BuildConfigFromFlags("", env["KUBECONFIG"]); err != nil {
		return nil, err
	}
	k.cfg.QPS, k.cfg.Burst = 50, 100
	if k.kube, err = kubernetes.NewForConfig(k.cfg); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(env["NODES"])
	if err != nil {
		return nil, fmt.Errorf("kind env: NODES: %w", err)
	}
	for i := 1; i <= n; i++ {
		node, err := parseNode(env[fmt.Sprintf("NODE_%d", i)])
		if err != nil {
			return nil, fmt.Errorf("kind env: NODE_%d: %w", i, err)
		}
		k.nodes = append(k.nodes, node)
	}
	if err := k.readPodCIDRs(); err != nil {
		return nil, err
	}
	if k.ranges, err = parseRanges(env); err != nil {
		return nil, err
	}
	k.images = e2e.Images{Echo: env["ECHO_IMAGE"], Herald: env["HERALD_IMAGE"]}
	nodeASN, _ := strconv.ParseUint(env["NODE_ASN"], 10, 32)
	routerASN, _ := strconv.ParseUint(env["ROUTER_ASN"], 10, 32)
	rname, raddrs, err := parseHost(env["ROUTER"])
	if err != nil {
		return nil, fmt.Errorf("kind env: ROUTER: %w", err)
	}
	k.routers = []e2e.Router{lab.GoBGPRouter(func(ctx context.Context, args ...string) ([]byte, error) {
		return docker(ctx, append([]string{"exec", rname, "gobgp"}, args...)...)
	}, uint32(routerASN), uint32(nodeASN), raddrs)}
	if k.client, err = k.openClient(env["CLIENT"]); err != nil {
		return nil, fmt.Errorf("kind env: CLIENT: %w", err)
	}
	if k.ext, err = k.openClient(env["EXT"]); err != nil {
		return nil, fmt.Errorf("kind env: EXT: %w", err)
	}
	return k, nil
}

// parseEnv reads KEY=VALUE lines.
func parseEnv(raw []byte) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("kind env: bad line %q", line)
		}
		env[k] = v
	}
	return env, sc.Err()
}

// parseNode reads a NODE_i line: "name ipv4 [ipv6] mac" (the node's container on the kind network; the IPv6
// address only on a dual-stack cluster).
func parseNode(line string) (e2e.Node, error) {
	f := strings.Fields(line)
	if len(f) != 3 && len(f) != 4 {
		return e2e.Node{}, fmt.Errorf("want 3 or 4 fields, got %q", line)
	}
	node := e2e.Node{Name: f[0], Interface: "eth0"}
	var err error
	if node.IPv4, err = netip.ParseAddr(f[1]); err != nil || !node.IPv4.Is4() {
		return e2e.Node{}, fmt.Errorf("bad IPv4 address %q", f[1])
	}
	if len(f) == 4 {
		if node.IPv6, err = netip.ParseAddr(f[2]); err != nil || !node.IPv6.Is6() {
			return e2e.Node{}, fmt.Errorf("bad IPv6 address %q", f[2])
		}
	}
	if node.MAC, err = net.ParseMAC(f[len(f)-1]); err != nil {
		return e2e.Node{}, fmt.Errorf("bad MAC %q", f[len(f)-1])
	}
	return node, nil
}

// parseHost reads "container addr..." lines (ROUTER, CLIENT, EXT).
func parseHost(line string) (string, []netip.Addr, error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return "", nil, fmt.Errorf("want a name and addresses, got %q", line)
	}
	var as []netip.Addr
	for _, s := range f[1:] {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return "", nil, err
		}
		as = append(as, a)
	}
	return f[0], as, nil
}

func parseRanges(env map[string]string) (e2e.Ranges, error) {
	var r e2e.Ranges
	for _, x := range []struct {
		dst *netip.Prefix
		key string
	}{{&r.L2, "LB_L2_RANGE"}, {&r.L2v6, "LB_L2_RANGE6"}, {&r.BGP, "LB_BGP_RANGE"}, {&r.BGPv6, "LB_BGP_RANGE6"}} {
		if env[x.key] == "" && strings.HasSuffix(x.key, "6") {
			continue // an IPv4-only cluster: no IPv6 ranges
		}
		p, err := netip.ParsePrefix(env[x.key])
		if err != nil {
			return r, fmt.Errorf("kind env: %s: %w", x.key, err)
		}
		*x.dst = p
	}
	return r, nil
}

// readPodCIDRs fills the nodes' pod CIDRs from the API server (the controller manager allocated them).
func (k *Kind) readPodCIDRs() error {
	for i, n := range k.nodes {
		node, err := k.kube.CoreV1().Nodes().Get(context.Background(), n.Name, metav1GetOptions)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		for _, c := range node.Spec.PodCIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return fmt.Errorf("node %s: pod CIDR %q: %w", n.Name, c, err)
			}
			if p.Addr().Is4() {
				k.nodes[i].PodCIDR = p
			} else {
				k.nodes[i].PodCIDRv6 = p
			}
		}
	}
	return nil
}

func (k *Kind) openClient(line string) (e2e.ClientHost, error) {
	name, as, err := parseHost(line)
	if err != nil {
		return nil, err
	}
	pid, err := containerPID(name)
	if err != nil {
		return nil, err
	}
	return lab.NetnsClient(fmt.Sprintf("/proc/%d/ns/net", pid), as, k.node), nil
}

// containerPID is the PID of a running container's first process (its namespaces are the container's).
func containerPID(name string) (int, error) {
	out, err := docker(context.Background(), "inspect", "-f", "{{.State.Pid}}", name)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("container %s: no running process (pid %q)", name, strings.TrimSpace(string(out)))
	}
	return pid, nil
}

// docker runs the docker CLI and returns its stdout.
func docker(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func (k *Kind) Name() string                   { return "kind" }
func (k *Kind) Kube() kubernetes.Interface     { return k.kube }
func (k *Kind) RESTConfig() *rest.Config       { return rest.CopyConfig(k.cfg) }
func (k *Kind) Nodes() []e2e.Node              { return append([]e2e.Node(nil), k.nodes...) }
func (k *Kind) Routers() []e2e.Router          { return append([]e2e.Router(nil), k.routers...) }
func (k *Kind) Client() e2e.ClientHost         { return k.client }
func (k *Kind) ExternalClient() e2e.ClientHost { return k.ext }
func (k *Kind) Faults() e2e.Faults             { return faults{k} }
func (k *Kind) Ranges() e2e.Ranges             { return k.ranges }
func (k *Kind) Images() e2e.Images             { return k.images }
func (k *Kind) Env() map[string]string         { return k.env }

func (k *Kind) node(name string) (e2e.Node, bool) {
	for _, n := range k.nodes {
		if n.Name == name {
			return n, true
		}
	}
	return e2e.Node{}, false
}

// Lacks: the kind setup's one router is gobgpd, which has neither TCP MD5 passwords set from its CLI nor BFD.
func (k *Kind) Lacks(f e2e.Feature) string {
	switch f {
	case e2e.FeatureFRR:
		return "its one router is GoBGP (gobgpd); FRR runs only in the lab"
	case e2e.FeatureBFD:
		return "gobgpd, its one router, has no BFD"
	case e2e.FeatureNodePause:
		return ""
	case e2e.FeatureImageImport:
		return "the suites do not load images into kind's nodes (kind load image-archive would)"
	}
	return "unknown feature"
}

// InstallHerald is `helm upgrade --install` of charts/herald with the values kind.sh generated and
// HERALD_HELM_ARGS (the chart always brings the speakers); remove is `helm uninstall`.
func (k *Kind) InstallHerald(ctx context.Context, speakers bool) (func(context.Context) error, error) {
	helm := func(ctx context.Context, args ...string) error {
		cmd := exec.CommandContext(ctx, k.env["HELM"], append([]string{"--kubeconfig", k.env["KUBECONFIG"]}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	args := []string{"upgrade", "--install", "herald", k.env["CHART"], "--namespace", "herald-system",
		"--create-namespace", "-f", k.env["HERALD_VALUES"]}
	args = append(args, strings.Fields(os.Getenv("HERALD_HELM_ARGS"))...) // a suite's values, as in the lab
	if err := helm(ctx, append(args, "--wait", "--timeout", "180s")...); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return helm(ctx, "uninstall", "herald", "--namespace", "herald-system", "--wait", "--timeout", "120s")
	}, nil
}
