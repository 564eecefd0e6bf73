//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// dualStack tells whether the cluster runs both IP families (the lab does unless started with LAB_IPV6=0).
func dualStack() bool {
	for _, n := range cluster.Nodes() {
		if !n.PodCIDRv6.IsValid() {
			return false
		}
	}
	return len(cluster.Nodes()) > 0
}

// addrPlus is the address n after a.
func addrPlus(a netip.Addr, n int) netip.Addr {
	for range n {
		a = a.Next()
	}
	return a
}

// IPv6 and dual-stack LoadBalancer Services answer the lan client over both families through kube-proxy, and an
// IPv6 ClusterIP reaches backends on other nodes through the nodes' IPv6 pod routes. As in
// TestLoadBalancerThroughKubeProxy, the test writes the Service status and routes each address from the client to
// a node itself (no controller, no speaker).
func TestDualStackThroughKubeProxy(t *testing.T) {
	if !dualStack() {
		t.Skip("the cluster is single-stack IPv4 (lab started with LAB_IPV6=0)")
	}
	ctx := testContext(t, 3*time.Minute)
	withoutShared(t, ctx) // these suites run with no Herald installed
	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)

	// Addresses .4/.5 of the BGP range and ::2, ::4, ::5 of the IPv6 one: not used by the demo or other suites.
	v4 := func(n int) netip.Addr { return addrPlus(cluster.Ranges().BGP.Masked().Addr(), n) }
	v6 := func(n int) netip.Addr { return addrPlus(cluster.Ranges().BGPv6.Masked().Addr(), n) }
	policy := func(p corev1.IPFamilyPolicy) *corev1.IPFamilyPolicy { return &p }
	v4v6 := []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	cases := []struct {
		name     string
		policy   *corev1.IPFamilyPolicy
		families []corev1.IPFamily // requested
		want     []corev1.IPFamily // what the API server must set
		lb       []netip.Addr
	}{
		{"ipv6", policy(corev1.IPFamilyPolicySingleStack), []corev1.IPFamily{corev1.IPv6Protocol},
			[]corev1.IPFamily{corev1.IPv6Protocol}, []netip.Addr{v6(2)}},
		{"prefer-dual-stack", policy(corev1.IPFamilyPolicyPreferDualStack), nil, v4v6, []netip.Addr{v4(4), v6(4)}},
		{"require-dual-stack-v6-first", policy(corev1.IPFamilyPolicyRequireDualStack),
			[]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol},
			[]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, []netip.Addr{v6(5), v4(5)}},
	}
	nodes := cluster.Nodes()
	var v6ClusterIP netip.Addr
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := lbService(t, ctx, ns, c.name, c.policy, c.families, c.lb...)
			if !slices.Equal(svc.Spec.IPFamilies, c.want) || len(svc.Spec.ClusterIPs) != len(c.want) {
				t.Fatalf("Service families %v, cluster IPs %v; want families %v", svc.Spec.IPFamilies, svc.Spec.ClusterIPs, c.want)
			}
			for j, fam := range c.want {
				ip, err := netip.ParseAddr(svc.Spec.ClusterIPs[j])
				if err != nil || ip.Is6() != (fam == corev1.IPv6Protocol) {
					t.Fatalf("cluster IP %d %q is not %s", j, svc.Spec.ClusterIPs[j], fam)
				}
				if ip.Is6() && c.name == "ipv6" {
					v6ClusterIP = ip
				}
			}
			// Each address through another node: every node's kube-proxy serves every family.
			for j, ip := range c.lb {
				node := nodes[(i+j)%len(nodes)]
				checkEchoThrough(t, ctx, ip, node.Name)
			}
		})
	}

	t.Run("ipv6-cluster-ip", func(t *testing.T) {
		if !v6ClusterIP.IsValid() {
			t.Skip("no IPv6 cluster IP (the ipv6 case failed)")
		}
		// From the client through the last node's kube-proxy (a source outside the cluster CIDR is
		// masqueraded), to backends on every node: those on other nodes are reached by the IPv6 pod routes.
		via := nodes[len(nodes)-1]
		undo, err := cluster.Client().RouteVia(ctx, netip.PrefixFrom(v6ClusterIP, 128), via.Name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = undo() })
		url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(v6ClusterIP, 80))
		seen := map[string]bool{}
		waitFor(t, ctx, fmt.Sprintf("answers from %s from backends on %d nodes", url, min(2, len(nodes))), func() (bool, error) {
			if _, node, ok := echoGet(url); ok {
				seen[node] = true
			}
			return len(seen) >= min(2, len(nodes)), nil
		})
		t.Logf("IPv6 cluster IP %s via %s: backends on %v", v6ClusterIP, via.Name, keys(seen))
	})
}

// checkEchoThrough routes ip from the client through node, then checks that the echo Service answers HTTP and
// at least 90 % of a 1-second UDP stream on it.
func checkEchoThrough(t *testing.T, ctx context.Context, ip netip.Addr, node string) {
	t.Helper()
	undo, err := cluster.Client().RouteVia(ctx, netip.PrefixFrom(ip, ip.BitLen()), node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = undo() })
	url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(ip, 80))
	var pod string
	waitFor(t, ctx, "an HTTP answer from "+url, func() (bool, error) {
		p, _, ok := echoGet(url)
		pod = p
		return ok, nil
	})
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	rep, err := cluster.Client().StreamUDP(sctx, netip.AddrPortFrom(ip, 9090), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s via %s: HTTP from %s; UDP sent %d, received %d, max gap %v", ip, node, pod, rep.Sent, rep.Received, rep.MaxGap)
	if rep.Received < rep.Sent*9/10 {
		t.Errorf("UDP %s through kube-proxy on %s: %d of %d answers", ip, node, rep.Received, rep.Sent)
	}
}

// echoGet fetches url from the client and returns the echo backend's pod and node ("echo from pod P on node N").
func echoGet(url string) (pod, node string, ok bool) {
	resp, err := cluster.Client().HTTP().Get(url)
	if err != nil {
		return "", "", false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	f := strings.Fields(string(b))
	if err != nil || len(f) < 7 || f[0] != "echo" || f[2] != "pod" || f[5] != "node" {
		return "", "", false
	}
	return f[3], f[6], true
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
