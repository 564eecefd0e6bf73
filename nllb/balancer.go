// Package nllb is the node-local API-server balancer: a TCP forwarder on
// the node's loopback that spreads new connections over the healthy
// upstreams (kube-apiservers, or konnectivity servers), retries a failed
// dial on another upstream, and follows updates of the upstream set.
// Health checking lives in nllb/health, the persisted upstream set in
// persist.go, the kubeconfig rewrite in nllb/kubeconfig.
package nllb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-lb/herald/nllb/health"
)

// ErrNoUpstreams: an upstream set must not be empty.
var ErrNoUpstreams = errors.New("no upstreams")

// DefaultDialTimeout bounds one dial to one upstream.
const DefaultDialTimeout = 3 * time.Second

// Config of one balancer (one listening port).
type Config struct {
	// Name is used in logs ("apiserver", "konnectivity").
	Name string
	// Listen must be a loopback address; port 0 picks a free port (tests).
	Listen netip.AddrPort
	// Policy picks the first upstream of a new connection.
	Policy Policy
	// Upstreams is the initial set; it must not be empty.
	Upstreams []netip.AddrPort
	// DialTimeout bounds one dial (default DefaultDialTimeout).
	DialTimeout time.Duration
	// Health configures the per-upstream checks. OnChange and OnProbe are
	// called after the balancer's own hooks.
	Health health.Options
	// Metrics may be nil.
	Metrics *Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Balancer forwards the connections accepted on one loopback port.
type Balancer struct {
	name        string
	policy      Policy
	dialTimeout time.Duration
	ln          *net.TCPListener
	monitor     *health.Monitor
	metrics     *Metrics
	log         *slog.Logger
	rr          atomic.Uint64

	mu        sync.Mutex
	upstreams []netip.AddrPort                      // sorted, no duplicates, never empty
	conns     map[netip.AddrPort]map[*pair]struct{} // per upstream in the set
	closed    bool
	wg        sync.WaitGroup // connection handlers
}

// pair is one forwarded connection.
type pair struct {
	client, upstream *net.TCPConn
}

func (p *pair) close() {
	p.client.Close()
	p.upstream.Close()
}

// Listen validates cfg, listens on cfg.Listen and starts the health checks.
// Serve then accepts connections.
func Listen(cfg Config) (*Balancer, error) {
	if cfg.Name == "" {
		cfg.Name = "nllb"
	}
	if err := checkListen(cfg.Listen); err != nil {
		return nil, fmt.Errorf("nllb %s: %w", cfg.Name, err)
	}
	ups, err := normalize(cfg.Upstreams)
	if err != nil {
		return nil, fmt.Errorf("nllb %s: initial upstreams: %w", cfg.Name, err)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Balancer{
		name:        cfg.Name,
		policy:      cfg.Policy,
		dialTimeout: cfg.DialTimeout,
		metrics:     cfg.Metrics,
		log:         cfg.Logger.With("balancer", cfg.Name),
		conns:       map[netip.AddrPort]map[*pair]struct{}{},
	}
	ho := cfg.Health
	ho.Logger = b.log
	userChange, userProbe := ho.OnChange, ho.OnProbe
	ho.OnChange = func(a netip.AddrPort, s health.Status) {
		b.setHealthyMetric(a, s)
		if userChange != nil {
			userChange(a, s)
		}
	}
	ho.OnProbe = func(a netip.AddrPort, d time.Duration, err error) {
		if b.metrics != nil {
			b.metrics.checkTiming.Observe(d.Seconds())
		}
		if userProbe != nil {
			userProbe(a, d, err)
		}
	}
	if b.monitor, err = health.NewMonitor(ho); err != nil {
		return nil, fmt.Errorf("nllb %s: %w", cfg.Name, err)
	}
	b.ln, err = net.ListenTCP("tcp", net.TCPAddrFromAddrPort(cfg.Listen))
	if err != nil {
		b.monitor.Close()
		return nil, fmt.Errorf("nllb %s: listen on %s: %w", cfg.Name, cfg.Listen, err)
	}
	b.mu.Lock()
	b.setLocked(ups)
	b.mu.Unlock()
	b.log.Info("nllb listening", "address", b.ln.Addr().String(), "policy", b.policy.String(), "upstreams", fmt.Sprint(ups))
	return b, nil
}

// Addr is the address the balancer listens on.
func (b *Balancer) Addr() netip.AddrPort {
	return b.ln.Addr().(*net.TCPAddr).AddrPort()
}

// Upstreams is the current set, sorted.
func (b *Balancer) Upstreams() []netip.AddrPort {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.upstreams)
}

// Status is the health status of every upstream in the set.
func (b *Balancer) Status() map[netip.AddrPort]health.Status {
	out := map[netip.AddrPort]health.Status{}
	for _, u := range b.Upstreams() {
		out[u] = b.monitor.Status(u)
	}
	return out
}

// SetUpstreams replaces the upstream set. An empty or invalid set is
// refused (logged, and returned as an error) and the current set stays.
// Connections to upstreams that leave the set are closed; connections to
// the others are left alone, whatever their health.
func (b *Balancer) SetUpstreams(ups []netip.AddrPort) error {
	norm, err := normalize(ups)
	if err != nil {
		err = fmt.Errorf("nllb %s: upstream update %v refused: %w", b.name, ups, err)
		b.log.Warn("nllb upstream update refused; keeping the current set", "error", err.Error(), "current", fmt.Sprint(b.Upstreams()))
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("nllb %s: upstream update: %w", b.name, net.ErrClosed)
	}
	if slices.Equal(norm, b.upstreams) {
		return nil
	}
	b.log.Info("nllb upstreams changed", "old", fmt.Sprint(b.upstreams), "new", fmt.Sprint(norm))
	b.setLocked(norm)
	return nil
}

// setLocked installs a normalized set: it closes the connections of the
// upstreams that leave and updates the health monitor.
func (b *Balancer) setLocked(ups []netip.AddrPort) {
	keep := map[netip.AddrPort]bool{}
	for _, u := range ups {
		keep[u] = true
		if b.conns[u] == nil {
			b.conns[u] = map[*pair]struct{}{}
			if b.metrics != nil {
				b.metrics.healthy.WithLabelValues(u.String()).Set(0) // not checked yet
			}
		}
	}
	for u, ps := range b.conns {
		if keep[u] {
			continue
		}
		if len(ps) > 0 {
			b.log.Info("nllb closing the connections of a removed upstream", "upstream", u.String(), "connections", len(ps))
		}
		for p := range ps {
			p.close()
		}
		delete(b.conns, u)
		b.metrics.forget(u.String())
	}
	b.upstreams = ups
	b.monitor.Set(ups)
}

func (b *Balancer) setHealthyMetric(a netip.AddrPort, s health.Status) {
	if b.metrics == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.conns[a]; !ok {
		return // removed meanwhile: do not bring its series back
	}
	v := 0.0
	if s == health.Healthy {
		v = 1
	}
	b.metrics.healthy.WithLabelValues(a.String()).Set(v)
}

// Serve accepts connections until ctx is done, then closes the listener
// and every forwarded connection, stops the health checks and returns nil.
// Other accept errors (out of file descriptors, for one) are logged and
// retried after a pause that doubles up to a second: running out of
// descriptors for a moment must not take the node's API access down.
// Serve returns an error only when the listener is closed from elsewhere.
func (b *Balancer) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { b.ln.Close() })
	defer stop()
	var err error
	var pause time.Duration
	for {
		var c *net.TCPConn
		c, err = b.ln.AcceptTCP()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				break
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			b.log.Error("nllb accept failed; retrying", "error", err.Error(), "pause", pause.String())
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			continue
		}
		pause = 0
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.handle(ctx, c)
		}()
	}
	b.shutdown()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("nllb %s: accept on %s: %w", b.name, b.ln.Addr(), err)
}

func (b *Balancer) shutdown() {
	b.ln.Close()
	b.mu.Lock()
	b.closed = true
	for _, ps := range b.conns {
		for p := range ps {
			p.close()
		}
	}
	b.mu.Unlock()
	b.monitor.Close()
	b.wg.Wait()
}

func (b *Balancer) start() uint64 {
	if b.policy == RoundRobin {
		return b.rr.Add(1) - 1
	}
	return rand.Uint64()
}

// handle dials the upstreams in dialOrder until one answers, then
// forwards. When none answers the client connection is closed.
func (b *Balancer) handle(ctx context.Context, client *net.TCPConn) {
	order := dialOrder(b.Upstreams(), b.monitor.Status, b.start())
	d := net.Dialer{Timeout: b.dialTimeout}
	for _, u := range order {
		c, err := d.DialContext(ctx, "tcp", u.String())
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			b.countDialError(u)
			b.log.Warn("nllb dial failed; trying another upstream", "upstream", u.String(), "client", client.RemoteAddr().String(), "error", err.Error())
			continue
		}
		p := &pair{client: client, upstream: c.(*net.TCPConn)}
		if !b.track(u, p) {
			c.Close() // removed while we dialled: try the others
			continue
		}
		b.forward(p)
		b.untrack(u, p)
		return
	}
	if ctx.Err() == nil {
		b.log.Warn("nllb no upstream accepted the connection; closing it", "client", client.RemoteAddr().String(), "tried", fmt.Sprint(order))
	}
	client.Close()
}

// countDialError counts a failed dial of an upstream still in the set (a
// removed one's series must not come back).
func (b *Balancer) countDialError(u netip.AddrPort) {
	if b.metrics == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.conns[u]; ok {
		b.metrics.dialErrors.WithLabelValues(u.String()).Inc()
	}
}

func (b *Balancer) track(u netip.AddrPort, p *pair) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ps, ok := b.conns[u]
	if !ok || b.closed {
		return false
	}
	ps[p] = struct{}{}
	if b.metrics != nil {
		b.metrics.total.WithLabelValues(u.String()).Inc()
		b.metrics.active.WithLabelValues(u.String()).Inc()
	}
	return true
}

func (b *Balancer) untrack(u netip.AddrPort, p *pair) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ps, ok := b.conns[u]; ok {
		if _, ok := ps[p]; ok {
			delete(ps, p)
			if b.metrics != nil {
				b.metrics.active.WithLabelValues(u.String()).Dec()
			}
		}
	}
}

// forward copies both ways until both directions ended. io.Copy between two
// *net.TCPConn uses splice(2) on Linux (TCPConn.ReadFrom), so the bytes do
// not pass through user space. When one side ends its sending (EOF), the
// other side's sending is shut down (CloseWrite) and the opposite direction
// goes on: half-closed connections work. An error in either direction
// closes both connections.
func (b *Balancer) forward(p *pair) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(p.upstream, p.client)
	}()
	pipe(p.client, p.upstream)
	<-done
	p.close()
}

func pipe(dst, src *net.TCPConn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	dst.CloseWrite()
}
