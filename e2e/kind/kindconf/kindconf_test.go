package kindconf

import (
	"net/netip"
	"strings"
	"testing"
)

func pfx(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func base() Setup {
	return Setup{
		Name: "herald-kind", Family: IPv4, Workers: 2,
		PodSubnets: pfx("10.246.0.0/16"), ServiceSubnets: pfx("10.97.0.0/16"),
		NodeASN: 64500, RouterASN: 64501, RouterID: netip.MustParseAddr("172.29.1.2"),
		Nodes:       addrs("172.29.0.3", "172.29.0.2", "fd48:4b00::2"),
		HeraldImage: "localhost/herald:dev",
	}
}

// check asserts that out holds every want line and none of the notWant lines (each compared trimmed).
func check(t *testing.T, out string, want, notWant []string) {
	t.Helper()
	lines := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("missing line %q in:\n%s", w, out)
		}
	}
	for _, w := range notWant {
		if lines[w] {
			t.Errorf("unexpected line %q in:\n%s", w, out)
		}
	}
}

func TestClusterConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Setup)
		want    []string
		notWant []string
		err     string
	}{
		{name: "ipv4 published image", edit: func(s *Setup) {},
			want: []string{"name: herald-kind", "ipFamily: ipv4", "disableDefaultCNI: true", `podSubnet: "10.246.0.0/16"`,
				`serviceSubnet: "10.97.0.0/16"`, "- role: control-plane", "- role: worker", "failCgroupV1: false",
				"allowedUnsafeSysctls: [net.ipv4.ip_forward, net.ipv6.conf.all.forwarding]",
				"maxPerCore: 0"},
			notWant: []string{"kind: ClusterConfiguration", "skipPhases: [preflight, addon/coredns]"}},
		{name: "dual-stack offline image", edit: func(s *Setup) {
			s.Family, s.Offline, s.EtcdImageTag, s.NodeImage = Dual, true, "3.6.16-0", "localhost/herald-kind-node:v1"
			s.PodSubnets = pfx("10.246.0.0/16", "fd48:4bf4::/56")
			s.ServiceSubnets = pfx("10.97.0.0/16", "fd48:4b96::/112")
		}, want: []string{"ipFamily: dual", `podSubnet: "10.246.0.0/16,fd48:4bf4::/56"`,
			`serviceSubnet: "10.97.0.0/16,fd48:4b96::/112"`, "image: localhost/herald-kind-node:v1",
			`imageTag: "3.6.16-0"`, "skipPhases: [preflight, addon/coredns]"}},
		{name: "no workers", edit: func(s *Setup) { s.Workers = 0 }, notWant: []string{"- role: worker"}},
		{name: "dual-stack with one family", edit: func(s *Setup) { s.Family = Dual }, err: "pod subnets: 1, want 2"},
		{name: "IPv6 first", edit: func(s *Setup) {
			s.Family = Dual
			s.PodSubnets = pfx("fd48:4bf4::/56", "10.246.0.0/16")
			s.ServiceSubnets = pfx("10.97.0.0/16", "fd48:4b96::/112")
		}, err: "want IPv4 first"},
		{name: "unknown family", edit: func(s *Setup) { s.Family = "ipv6" }, err: `family "ipv6"`},
		{name: "offline without etcd tag", edit: func(s *Setup) { s.Offline = true }, err: "etcd image tag"},
		{name: "no name", edit: func(s *Setup) { s.Name = "" }, err: "no cluster name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(&s)
			out, err := ClusterConfig(s)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			check(t, out, tc.want, tc.notWant)
			if n := strings.Count(out, "- role: "); n != 1+s.Workers {
				t.Errorf("%d nodes, want %d", n, 1+s.Workers)
			}
			if s.NodeImage != "" && strings.Count(out, "image: "+s.NodeImage) != 1+s.Workers {
				t.Errorf("not every node has image %s", s.NodeImage)
			}
		})
	}
}

func TestGoBGPConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Setup)
		want    []string
		notWant []string
		err     string
	}{
		{name: "every node address once, sorted", edit: func(s *Setup) {
			s.Nodes = append(s.Nodes, netip.MustParseAddr("172.29.0.2"))
		}, want: []string{"as = 64501", `router-id = "172.29.1.2"`, "peer-as = 64500", "passive-mode = true",
			`prefix = "172.29.0.2/32"`, `prefix = "172.29.0.3/32"`, `prefix = "fd48:4b00::2/128"`,
			`afi-safi-name = "ipv4-unicast"`, `afi-safi-name = "ipv6-unicast"`}},
		{name: "no nodes", edit: func(s *Setup) { s.Nodes = nil }, err: "no node addresses"},
		{name: "no AS", edit: func(s *Setup) { s.RouterASN = 0 }, err: "AS numbers"},
		{name: "IPv6 router ID", edit: func(s *Setup) { s.RouterID = netip.MustParseAddr("fd48::1") }, err: "router ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(&s)
			out, err := GoBGPConfig(s)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			check(t, out, tc.want, tc.notWant)
			if n := strings.Count(out, "[[dynamic-neighbors]]"); n != 3 {
				t.Errorf("%d dynamic neighbours, want 3 (one per distinct node address)", n)
			}
			if i, j := strings.Index(out, "172.29.0.2/32"), strings.Index(out, "172.29.0.3/32"); i > j {
				t.Error("node addresses not sorted")
			}
		})
	}
}

func TestHeraldValues(t *testing.T) {
	for _, tc := range []struct {
		name, image, profile string
		want                 []string
		notWant              []string
		err                  string
	}{
		{name: "image and profile", image: "localhost/herald:dev", profile: "fast",
			want: []string{"repository: localhost/herald", "tag: dev", "pullPolicy: Never", "imagePullPolicy: Never",
				"profile: fast", "replicas: 1", "secure: false"}},
		{name: "registry with a port", image: "localhost:5000/herald:v1",
			want: []string{"repository: localhost:5000/herald", "tag: v1"}, notWant: []string{"memberlist:"}},
		{name: "no tag", image: "localhost:5000/herald", err: "want REPOSITORY:TAG"},
		{name: "empty tag", image: "herald:", err: "want REPOSITORY:TAG"},
		{name: "bad profile", image: "herald:dev", profile: "lan", err: "memberlist profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			s.HeraldImage, s.MemberlistProfile = tc.image, tc.profile
			out, err := HeraldValues(s)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			check(t, out, tc.want, tc.notWant)
		})
	}
}
