package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/herald-lb/herald/nllb/health"
)

// reloadingProber is the readyz prober of a node: it rebuilds its TLS
// configuration and token whenever the kubeconfig or a file it names (CA,
// client certificate and key, token file) changes, so the checks follow
// the kubelet's client certificate rotation (kubelet-client-current.pem is
// replaced) without a restart. When a rebuild fails (a file caught in the
// middle of a rotation) the previous prober goes on and the next probe
// tries again.
type reloadingProber struct {
	path, serverHost string

	mu    sync.Mutex
	files []string // the files the current prober was built from
	stamp string
	p     *health.ReadyzProber
}

func newReloadingProber(path, serverHost string) (*reloadingProber, error) {
	r := &reloadingProber{path: path, serverHost: serverHost}
	if _, err := r.current(); err != nil {
		return nil, err
	}
	return r, nil
}

// Probe implements health.Prober.
func (r *reloadingProber) Probe(ctx context.Context, addr netip.AddrPort) error {
	p, err := r.current()
	if err != nil {
		return err
	}
	return p.Probe(ctx, addr)
}

func (r *reloadingProber) current() (*health.ReadyzProber, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil && stamp(r.files) == r.stamp {
		return r.p, nil
	}
	p, files, err := readyzProber(r.path, r.serverHost)
	if err != nil {
		if r.p != nil {
			return r.p, nil // keep the last good one; the next probe retries
		}
		return nil, err
	}
	r.p, r.files, r.stamp = p, files, stamp(files)
	return p, nil
}

// stamp identifies the files' current versions (modification time and
// size, through symbolic links).
func stamp(files []string) string {
	var b strings.Builder
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s %d %d;", f, st.ModTime().UnixNano(), st.Size())
		} else {
			fmt.Fprintf(&b, "%s missing;", f)
		}
	}
	return b.String()
}

// readyzProber takes the CA, client certificate and token of the node's
// kubeconfig, and verifies every upstream against the name the kubeconfig
// verifies (its tls-server-name, else its server's host), as the clients
// going through the balancer will. It also returns the files it read.
func readyzProber(path, serverHost string) (*health.ReadyzProber, []string, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, nil, fmt.Errorf("node kubeconfig %s: %w", path, err)
	}
	files := []string{path}
	for _, f := range []string{rc.CAFile, rc.CertFile, rc.KeyFile, rc.BearerTokenFile} {
		if f != "" {
			files = append(files, f)
		}
	}
	tc, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("node kubeconfig %s: TLS settings: %w", path, err)
	}
	if tc == nil {
		return nil, nil, fmt.Errorf("node kubeconfig %s: no TLS settings; the readyz check needs them (use the tcp mode otherwise)", path)
	}
	if tc.InsecureSkipVerify {
		return nil, nil, fmt.Errorf("node kubeconfig %s skips TLS verification; the readyz check will not", path)
	}
	if tc.ServerName == "" {
		tc.ServerName = serverHost
	}
	token := rc.BearerToken
	if rc.BearerTokenFile != "" {
		b, err := os.ReadFile(rc.BearerTokenFile)
		if err != nil {
			return nil, nil, fmt.Errorf("node kubeconfig %s: token file: %w", path, err)
		}
		token = strings.TrimSpace(string(b))
	}
	p, err := health.NewReadyzProber(tc.Clone(), token)
	if err != nil {
		return nil, nil, err
	}
	return p, files, nil
}
