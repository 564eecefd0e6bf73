package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/herald-lb/herald/nllb"
)

// scriptedLookup answers with the addresses (or error) set last.
type scriptedLookup struct {
	mu    sync.Mutex
	addrs []netip.Addr
	err   error
	calls int
}

func (s *scriptedLookup) set(err error, addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err, s.addrs = err, nil
	for _, a := range addrs {
		s.addrs = append(s.addrs, netip.MustParseAddr(a))
	}
}

func (s *scriptedLookup) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if host != "api.example" {
		return nil, fmt.Errorf("unexpected lookup of %q", host)
	}
	return slices.Clone(s.addrs), s.err
}

// TestSeedResolver: a server name looked up again replaces the seeds it
// resolved to (the extra seeds stay); a failed lookup or one with no
// address keeps them and is logged once; the same answer changes nothing;
// a server given by address is never looked up.
func TestSeedResolver(t *testing.T) {
	u, _ := url.Parse("https://api.example:6443")
	var logs bytes.Buffer
	sl := &scriptedLookup{}
	extra := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.9:6443")}
	r := newSeedResolver(u, extra, []netip.AddrPort{netip.MustParseAddrPort("10.0.0.11:6443")}, sl.lookup,
		slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	seeds := func() string { return fmt.Sprint(r.Seeds()) }
	if !r.named() || seeds() != "[10.0.0.11:6443 192.0.2.9:6443]" {
		t.Fatalf("start: named %v, seeds %s", r.named(), seeds())
	}
	for _, st := range []struct {
		name    string
		err     error
		addrs   []string
		changed bool
		want    string
	}{
		{"same answer", nil, []string{"10.0.0.11"}, false, "[10.0.0.11:6443 192.0.2.9:6443]"},
		{"moved", nil, []string{"10.0.0.21", "10.0.0.22"}, true, "[10.0.0.21:6443 10.0.0.22:6443 192.0.2.9:6443]"},
		{"DNS down", errors.New("server misbehaving"), nil, false, "[10.0.0.21:6443 10.0.0.22:6443 192.0.2.9:6443]"},
		{"DNS still down: not logged again", errors.New("server misbehaving"), nil, false, "[10.0.0.21:6443 10.0.0.22:6443 192.0.2.9:6443]"},
		{"no address", nil, nil, false, "[10.0.0.21:6443 10.0.0.22:6443 192.0.2.9:6443]"},
		{"back, one address", nil, []string{"10.0.0.22"}, true, "[10.0.0.22:6443 192.0.2.9:6443]"},
		{"an extra seed's address: once", nil, []string{"192.0.2.9"}, true, "[192.0.2.9:6443]"},
	} {
		sl.set(st.err, st.addrs...)
		if got := r.resolve(ctx); got != st.changed || seeds() != st.want {
			t.Errorf("%s: changed %v, seeds %s; want %v, %s", st.name, got, seeds(), st.changed, st.want)
		}
	}
	if n := strings.Count(logs.String(), "server misbehaving"); n != 1 {
		t.Errorf("the lookup failure logged %d times, want once:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "resolves to no address"); n != 1 {
		t.Errorf("the empty answer logged %d times, want once", n)
	}

	byIP, _ := url.Parse("https://10.0.0.11:6443")
	sl2 := &scriptedLookup{}
	r2 := newSeedResolver(byIP, nil, []netip.AddrPort{netip.MustParseAddrPort("10.0.0.11:6443")}, sl2.lookup, slog.New(slog.DiscardHandler))
	if r2.named() {
		t.Error("an IP server counted as a name")
	}
	if err := r2.Run(ctx, time.Millisecond, nil); err != nil || sl2.calls != 0 {
		t.Errorf("Run on an IP server: %v, %d lookups", err, sl2.calls)
	}
}

// TestRunFollowsTheSeedName: node.Run (following the upstream file, the
// default) with a kubeconfig naming api.example: when the name moves to
// another address, the balancer's set follows within a few intervals —
// the old seed leaves, the new one comes in, the file's list stays — and a
// DNS failure afterwards changes nothing.
func TestRunFollowsTheSeedName(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "kubelet.conf")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["k"] = &clientcmdapi.Cluster{Server: "https://api.example:6443", CertificateAuthorityData: []byte("unused")}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "node"}
	cfg.CurrentContext = "node"
	if err := clientcmd.WriteToFile(*cfg, in); err != nil {
		t.Fatal(err)
	}
	sl := &scriptedLookup{}
	sl.set(nil, "192.0.2.11")
	o := DefaultOptions()
	o.KubeconfigIn = in
	o.StateFile = filepath.Join(dir, "u.json")
	if err := nllb.SaveUpstreams(o.StateFile, []netip.AddrPort{netip.MustParseAddrPort("192.0.2.50:6443")}); err != nil {
		t.Fatal(err)
	}
	o.StateFilePoll = 20 * time.Millisecond
	o.SeedResolveInterval = 30 * time.Millisecond
	o.APIServerPort = 0
	o.HealthMode = HealthTCP
	o.Lookup = sl.lookup
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	set := func() string {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, mf := range mfs {
			if mf.GetName() == "herald_nllb_upstream_healthy" {
				for _, m := range mf.GetMetric() {
					out = append(out, m.GetLabel()[0].GetValue())
				}
			}
		}
		slices.Sort(out)
		return fmt.Sprint(out)
	}
	wait := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for set() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: set %s, want %s", what, set(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("start: the file and the seed", "[192.0.2.11:6443 192.0.2.50:6443]")
	sl.set(nil, "192.0.2.12")
	wait("the name moved", "[192.0.2.12:6443 192.0.2.50:6443]")
	sl.set(errors.New("no DNS"))
	time.Sleep(200 * time.Millisecond)
	if got := set(); got != "[192.0.2.12:6443 192.0.2.50:6443]" {
		t.Errorf("after a DNS failure: %s", got)
	}
	if err := nllb.SaveUpstreams(o.StateFile, []netip.AddrPort{netip.MustParseAddrPort("192.0.2.51:6443")}); err != nil {
		t.Fatal(err)
	}
	wait("a new file keeps the moved seed", "[192.0.2.12:6443 192.0.2.51:6443]")
	if _, err := os.Stat(o.StateFile); err != nil {
		t.Fatal(err)
	}
}
