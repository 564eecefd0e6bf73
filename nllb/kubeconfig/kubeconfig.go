// Package kubeconfig writes the copy of a node's kubeconfig that sends its
// clients through the NLLB balancer on the loopback.
//
// Each cluster's server becomes the balancer's URL and tls-server-name is
// set to the host of the original server, so the client verifies the API
// server's certificate against the same name as before: with a DNS name, a
// DNS SAN; with an IP address, an IP SAN (Go's crypto/x509 checks the IP
// SANs when the expected name is an IP literal, and crypto/tls then sends
// no SNI, as before). A tls-server-name already present is kept: it is
// what verification used. Verification is never switched off; a kubeconfig
// that already skips it is refused rather than copied.
package kubeconfig

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/herald-lb/herald/nllb/internal/atomicfile"
)

// BalancerURL is the server URL of the balancer listening on addr.
func BalancerURL(addr netip.AddrPort) string {
	return (&url.URL{Scheme: "https", Host: addr.String()}).String()
}

// Server is the one API server URL the kubeconfig's clusters name. Several
// clusters with different servers are an error: one balancer fronts one
// cluster.
func Server(data []byte) (*url.URL, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("parse kubeconfig: %w", err)
	}
	var server string
	for name, c := range cfg.Clusters {
		if server != "" && c.Server != server {
			return nil, fmt.Errorf("kubeconfig clusters name different servers (%s: %s, and %s): one balancer fronts one cluster", name, c.Server, server)
		}
		server = c.Server
	}
	if server == "" {
		return nil, fmt.Errorf("kubeconfig has no cluster with a server")
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig server %q: %w", server, err)
	}
	if u.Scheme != "https" || u.Hostname() == "" {
		return nil, fmt.Errorf("kubeconfig server %q: want an https URL with a host", server)
	}
	return u, nil
}

// Patch returns the kubeconfig data with every cluster's server replaced
// by balancerURL and tls-server-name set (see the package comment). When
// the copy is written to another directory than the original (inDir !=
// outDir), relative file references (certificate-authority,
// client-certificate, client-key, token file) are made absolute against
// inDir so they keep naming the same files. Everything else is kept: byte
// for byte (comments and formatting included) when the original is
// block-style YAML that can be edited in place, else as the same content
// written by clientcmd.
func Patch(data []byte, balancerURL, inDir, outDir string) ([]byte, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("parse kubeconfig: %w", err)
	}
	if len(cfg.Clusters) == 0 {
		return nil, fmt.Errorf("kubeconfig has no cluster")
	}
	lb, err := url.Parse(balancerURL)
	if err != nil || lb.Host == "" {
		return nil, fmt.Errorf("balancer URL %q: not a URL with a host", balancerURL)
	}
	newServer, tlsName := map[string]string{}, map[string]string{}
	for name, c := range cfg.Clusters {
		if c.InsecureSkipTLSVerify {
			return nil, fmt.Errorf("kubeconfig cluster %q skips TLS verification: refusing to route it through the balancer", name)
		}
		u, err := url.Parse(c.Server)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig cluster %q server %q: %w", name, c.Server, err)
		}
		if u.Scheme != "https" || u.Hostname() == "" {
			return nil, fmt.Errorf("kubeconfig cluster %q server %q: want an https URL with a host", name, c.Server)
		}
		if isLoopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("kubeconfig cluster %q server %q is on the loopback (already patched?): give the original kubeconfig", name, c.Server)
		}
		if c.TLSServerName == "" {
			c.TLSServerName = u.Hostname() // without brackets for IPv6
			tlsName[name] = c.TLSServerName
		}
		nu := *u
		nu.Host = lb.Host
		c.Server = nu.String()
		newServer[name] = c.Server
	}
	if filepath.Clean(inDir) != filepath.Clean(outDir) {
		base, err := filepath.Abs(inDir)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig directory %s: %w", inDir, err)
		}
		if err := clientcmd.ResolveConfigPaths(cfg, base); err != nil {
			return nil, fmt.Errorf("kubeconfig file references relative to %s: %w", base, err)
		}
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}
	// Prefer the original bytes with only the server values replaced and
	// tls-server-name lines added, when that loads to exactly the same
	// configuration as the full re-serialization.
	if edited, ok := inPlace(data, newServer, tlsName); ok && sameConfig(edited, out) {
		return edited, nil
	}
	return out, nil
}

func isLoopbackHost(h string) bool {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.IsLoopback()
	}
	return h == "localhost"
}

// PatchFile patches the kubeconfig at in and writes it to out atomically,
// with in's file mode, only when out's content would change. It reports
// whether out was written.
func PatchFile(in, out, balancerURL string) (bool, error) {
	data, err := os.ReadFile(in)
	if err != nil {
		return false, fmt.Errorf("read kubeconfig: %w", err)
	}
	st, err := os.Stat(in)
	if err != nil {
		return false, fmt.Errorf("stat kubeconfig: %w", err)
	}
	patched, err := Patch(data, balancerURL, filepath.Dir(in), filepath.Dir(out))
	if err != nil {
		return false, fmt.Errorf("kubeconfig %s: %w", in, err)
	}
	wrote, err := atomicfile.WriteIfChanged(out, patched, st.Mode().Perm())
	if err != nil {
		return false, fmt.Errorf("patched kubeconfig: %w", err)
	}
	return wrote, nil
}

// SeedUpstreams resolves the kubeconfig's server to upstream addresses
// (an IP address as is, a name through the resolver) with its port (443
// when the URL has none).
func SeedUpstreams(server *url.URL, lookup func(host string) ([]netip.Addr, error)) ([]netip.AddrPort, error) {
	port := server.Port()
	if port == "" {
		port = "443"
	}
	p, err := net.LookupPort("tcp", port)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig server %s: port: %w", server, err)
	}
	host := server.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = lookup(host); err != nil {
		return nil, fmt.Errorf("kubeconfig server %s: resolve %s: %w", server, host, err)
	}
	out := make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(p)))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("kubeconfig server %s: %s resolves to no address", server, host)
	}
	return out, nil
}
