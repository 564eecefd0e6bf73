package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/herald-lb/herald/nllb/kubeconfig"
)

// seedResolver holds the seed upstreams — the extra seeds and the
// addresses of the kubeconfig's server — and, when the server is a name,
// looks it up again on a schedule, so a control-plane name that moves to
// other addresses is followed without a restart.
type seedResolver struct {
	server *url.URL
	extra  []netip.AddrPort
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	log    *slog.Logger

	cur     atomic.Pointer[[]netip.AddrPort]
	problem string // the lookup problem logged last ("": none)
}

func newSeedResolver(server *url.URL, extra, resolved []netip.AddrPort, lookup func(context.Context, string) ([]netip.Addr, error), log *slog.Logger) *seedResolver {
	s := &seedResolver{server: server, extra: extra, lookup: lookup, log: log}
	all := seedSet(extra, resolved)
	s.cur.Store(&all)
	return s
}

// seedSet: the seeds sorted, without duplicates.
func seedSet(extra, resolved []netip.AddrPort) []netip.AddrPort {
	all := append(slices.Clone(extra), resolved...)
	for i, a := range all {
		all[i] = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	}
	slices.SortFunc(all, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(all)
}

// Seeds are the current seeds (safe from any goroutine).
func (s *seedResolver) Seeds() []netip.AddrPort { return *s.cur.Load() }

// named: the kubeconfig's server is a name, not an address.
func (s *seedResolver) named() bool {
	_, err := netip.ParseAddr(s.server.Hostname())
	return err != nil
}

// resolve looks the server's name up once and reports whether the seeds
// changed. A failed lookup or one with no address keeps the current seeds
// (a DNS outage must not drop the address every node was installed with)
// and is logged once until a lookup succeeds.
func (s *seedResolver) resolve(ctx context.Context) bool {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	got, err := kubeconfig.SeedUpstreams(s.server, func(h string) ([]netip.Addr, error) { return s.lookup(lctx, h) })
	cancel()
	if err != nil {
		if msg := err.Error(); msg != s.problem {
			s.problem = msg
			s.log.Warn("nllb cannot resolve the kubeconfig's server again; keeping the seeds", "error", msg, "seeds", fmt.Sprint(s.Seeds()))
		}
		return false
	}
	s.problem = ""
	next := seedSet(s.extra, got)
	prev := s.Seeds()
	if slices.Equal(next, prev) {
		return false
	}
	s.cur.Store(&next)
	s.log.Info("nllb the kubeconfig's server resolves to other addresses now; seeds updated",
		"server", s.server.Host, "seeds", fmt.Sprint(next), "previous", fmt.Sprint(prev))
	return true
}

// Run resolves every interval until ctx is done, calling changed after a
// change. It does nothing for a server given by address.
func (s *seedResolver) Run(ctx context.Context, interval time.Duration, changed func()) error {
	if !s.named() || interval <= 0 {
		return nil
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if s.resolve(ctx) && changed != nil {
			changed()
		}
	}
}
