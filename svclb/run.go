// Package svclb is the forwarder inside each ServiceLB pod (`herald svclb`):
// one instance per Service port takes traffic arriving at the pod on
// SRC_PORT and forwards it to DEST_IPS:DEST_PORT, either with kernel rules
// (nftables, the default: DNAT, masquerade, a source-range filter, in a
// table of its own) or with a userspace TCP/UDP proxy.
//
// Configuration comes from the environment (ParseEnv, pure); Run does the
// work and reports readiness on a small HTTP endpoint only while traffic
// is really forwarded.
package svclb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// Exit codes of `herald svclb`.
const (
	ExitOK                 = 0 // stopped by SIGTERM/SIGINT, rules removed
	ExitFailed             = 1 // could not install rules, listen, or remove the rules on exit
	ExitUsage              = 2 // bad command-line flags
	ExitBadEnv             = 3 // an environment variable has a bad value (the message names it)
	ExitForwardingDisabled = 4 // nftables mode, and the kernel does not forward a family it needs
)

// ExitCode maps an error of ParseEnv or Run to the process exit code.
func ExitCode(err error) int {
	var ee *EnvError
	var fe *ForwardingError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ExitBadEnv
	case errors.As(err, &fe):
		return ExitForwardingDisabled
	}
	return ExitFailed
}

// Options are Run's dependencies.
type Options struct {
	Logger *slog.Logger
	// Ready, when set, is called once traffic is forwarded (tests).
	Ready func()
	// RecheckInterval is how often the nftables mode verifies that its table
	// is still complete and reinstalls it if not (default 10s).
	RecheckInterval time.Duration
}

// Run forwards as c says until ctx ends, then removes what it installed.
func Run(ctx context.Context, c Config, o Options) error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("proto", c.Proto, "srcPort", c.SrcPort, "destPort", c.DestPort, "mode", c.Mode)
	var ready atomic.Bool
	if c.ProbePort != 0 {
		stop, err := serveProbe(c.ProbePort, &ready)
		if err != nil {
			return err
		}
		defer stop()
	}
	markReady := func() {
		ready.Store(true)
		if o.Ready != nil {
			o.Ready()
		}
	}
	switch c.Mode {
	case ModeUserspace:
		p, err := listenProxy(c, log)
		if err != nil {
			return fmt.Errorf("userspace mode: listening on %s port %d: %w", c.Proto, c.SrcPort, err)
		}
		log.Info("forwarding (userspace proxy)", "destinations", c.DestIPs, "sourceRanges", c.SrcRanges)
		markReady()
		p.serve(ctx)
		ready.Store(false)
		log.Info("stopped")
		return nil
	default:
		return runNftables(ctx, c, o, log, markReady, &ready)
	}
}

func runNftables(ctx context.Context, c Config, o Options, log *slog.Logger, markReady func(), ready *atomic.Bool) error {
	if err := CheckForwarding(c, os.ReadFile); err != nil {
		return err
	}
	b, err := newNftBackend()
	if err != nil {
		return err
	}
	rs := BuildRuleset(c)
	if err := b.apply(rs); err != nil {
		return err
	}
	want := len(rs.Rules)
	log.Info("forwarding (nftables)", "table", "inet "+rs.Table.Name, "rules", want, "destinations", c.DestIPs, "sourceRanges", c.SrcRanges)
	markReady()

	every := o.RecheckInterval
	if every <= 0 {
		every = 10 * time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			ready.Store(false)
			if err := b.remove(rs.Table); err != nil {
				return err
			}
			log.Info("stopped, table removed", "table", "inet "+rs.Table.Name)
			return nil
		case <-tick.C:
			n, err := b.count(rs)
			if err == nil && n == want {
				continue
			}
			log.Warn("table changed behind our back, reinstalling", "table", "inet "+rs.Table.Name, "rules", n, "want", want, "error", err)
			if err := b.apply(BuildRuleset(c)); err != nil {
				ready.Store(false)
				log.Error("reinstalling failed; not ready", "error", err)
				continue
			}
			ready.Store(true)
		}
	}
}

// serveProbe answers /healthz (the process runs) and /readyz (traffic is
// forwarded) on every address of the pod.
func serveProbe(port int, ready *atomic.Bool) (stop func(), err error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("probe endpoint: listening on port %d: %w", port, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "not forwarding yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}
