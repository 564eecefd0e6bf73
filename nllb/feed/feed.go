// Package feed carries the cluster's list of API servers to a node's NLLB
// through the node's persisted upstream file, so that the node needs no
// right to read EndpointSlices:
//
//   - the Writer runs in the speaker (its ServiceAccount may watch
//     EndpointSlices): it follows the default/kubernetes slices with the
//     discovery rules (ready endpoints, port https, one family, never an
//     empty set) and writes the set into the file atomically, only when
//     the content changes;
//   - the Follower runs in `herald nllb`: it reads the file every few
//     seconds and, when its content changed, applies what it lists plus
//     the node's seeds. A missing, empty or corrupt file, one listing
//     nothing of the node's family, or one refused (a symlink, FIFO,
//     device or a file over nllb.MaxUpstreamFileSize: the speaker is not
//     trusted to hang or exhaust the node's balancer), changes nothing
//     and is logged once.
//
// The file is the one `herald nllb` starts from after a restart, so the
// running set and the starting set agree.
package feed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/herald-lb/herald/nllb"
	"github.com/herald-lb/herald/nllb/discovery"
)

// RBACHint is logged when the speaker may not watch the slices.
const RBACHint = "the speaker's ServiceAccount needs list and watch on endpointslices.discovery.k8s.io in namespace default " +
	"(the Helm chart's speaker ClusterRole grants it); until then the file keeps its last set"

// Writer follows the default/kubernetes EndpointSlices and writes the set
// they list into Path.
type Writer struct {
	// Client reaches the API server (the speaker's own client).
	Client kubernetes.Interface
	// Path is the node's persisted upstream file (herald nllb --state-file).
	Path string
	// IPv6 selects the family written: the family of the node's balancer.
	IPv6 bool
	// Resync: how often the set is written again when the file lost it (0:
	// one minute). The file is rewritten only when its content differs.
	Resync time.Duration
	// Metrics, when set, counts the writes.
	Metrics *Metrics
	Logger  *slog.Logger
}

// Run writes until ctx is done.
func (w *Writer) Run(ctx context.Context) error {
	if w.Path == "" {
		return errors.New("nllb feed: no file to write")
	}
	log := w.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("path", w.Path)
	resync := w.Resync
	if resync <= 0 {
		resync = time.Minute
	}
	apply := func(ups []netip.AddrPort) error {
		wrote, err := nllb.WriteUpstreams(w.Path, ups)
		if err != nil {
			return err
		}
		if wrote {
			log.Info("nllb feed wrote the API servers into the node's upstream file", "upstreams", fmt.Sprint(ups))
			w.Metrics.updated()
		}
		return nil
	}
	log.Info("nllb feed: following the API servers' EndpointSlices into the node's upstream file", "ipv6", w.IPv6)
	dw := &discovery.Watcher{Client: w.Client, IPv6: w.IPv6, Apply: apply, Resync: resync, RBACHint: RBACHint, Logger: log}
	return dw.Run(ctx)
}

// DefaultPollInterval is how often the Follower reads the file.
const DefaultPollInterval = 2 * time.Second

// Follower applies the upstream set a file lists, plus the seeds, whenever
// the file's content changes. The file is read with nllb.ReadUpstreamFile:
// a symlink, FIFO, device or oversized file is refused (logged, the
// current upstreams stay) instead of hanging or exhausting the reader.
type Follower struct {
	// Path is the persisted upstream file.
	Path string
	// Seeds stay in every applied set (see discovery.Merge).
	Seeds []netip.AddrPort
	// SeedsFunc, when set, gives the seeds instead of Seeds at every read
	// (seeds that change: a re-resolved server name); a change re-merges
	// the file's last list even when the file did not change.
	SeedsFunc func() []netip.AddrPort
	// IPv6 keeps the file's IPv6 upstreams, else its IPv4 ones: the family
	// of the node's balancer.
	IPv6 bool
	// Current is the set in force when following starts (the balancer's
	// starting set): a file that lists it changes nothing.
	Current []netip.AddrPort
	// Interval between two reads (default DefaultPollInterval).
	Interval time.Duration
	// Apply installs a new set; a failure is logged and tried again at the
	// next read.
	Apply func([]netip.AddrPort) error
	// Metrics, when set, counts the applied sets.
	Metrics *Metrics
	Logger  *slog.Logger

	seen    []byte // content handled last (nil: none yet)
	problem string // the problem logged last ("": none)
	applied []netip.AddrPort
	own     []netip.AddrPort // the file's last usable list (its family)
	merged  []netip.AddrPort // the seeds of the last merge
	started bool
}

func (f *Follower) seeds() []netip.AddrPort {
	if f.SeedsFunc != nil {
		return f.SeedsFunc()
	}
	return f.Seeds
}

// Run reads the file at once and then every Interval until ctx is done.
func (f *Follower) Run(ctx context.Context) error {
	if f.Path == "" || f.Apply == nil {
		return errors.New("nllb file follower: a path and an apply function are required")
	}
	iv := f.Interval
	if iv <= 0 {
		iv = DefaultPollInterval
	}
	f.logger().Info("nllb following the node's upstream file", "path", f.Path, "interval", iv.String(), "seeds", fmt.Sprint(f.Seeds))
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		f.Check()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (f *Follower) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.Default()
	}
	return f.Logger
}

// Check reads the file once and applies its set when the content changed
// since the last read and the set differs from the one in force. It
// returns the set it applied (nil: none).
func (f *Follower) Check() []netip.AddrPort {
	if !f.started {
		f.started = true
		f.applied = slices.Clone(f.Current)
		f.merged = slices.Clone(f.seeds())
	}
	seeds := f.seeds()
	log := f.logger().With("path", f.Path)
	data, err := nllb.ReadUpstreamFile(f.Path) // refuses a symlink, FIFO, device or huge file
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.report(log, slog.LevelInfo, "nllb upstream file not written yet (the speaker's feed writes it); keeping the current upstreams", nil)
		f.seen = nil
		if !slices.Equal(seeds, f.merged) {
			// The seeds changed: the last list (if any) with the new seeds.
			return f.apply(log, f.own, seeds, nil)
		}
		return nil
	case err != nil:
		f.report(log, slog.LevelWarn, "nllb cannot read the upstream file; keeping the current upstreams", err)
		return nil
	}
	if f.seen != nil && bytes.Equal(data, f.seen) {
		if f.own == nil || slices.Equal(seeds, f.merged) {
			return nil
		}
		// The seeds changed: the last list with the new seeds.
		return f.apply(log, f.own, seeds, data)
	}
	ups, err := nllb.ParseUpstreams(data)
	if err != nil {
		f.seen = data
		f.report(log, slog.LevelWarn, "nllb upstream file unusable; keeping the current upstreams", err)
		return nil
	}
	own := Family(ups, f.IPv6)
	if len(own) == 0 {
		f.seen = data
		f.report(log, slog.LevelWarn, "nllb upstream file lists no upstream of the balancer's family; keeping the current upstreams",
			fmt.Errorf("listed %v, ipv6 %v", ups, f.IPv6))
		return nil
	}
	return f.apply(log, own, seeds, data)
}

// apply installs the file's list own plus seeds unless that is the set in
// force; data is the content it came from.
func (f *Follower) apply(log *slog.Logger, own, seeds []netip.AddrPort, data []byte) []netip.AddrPort {
	set := discovery.Merge(own, seeds)
	if len(own) == 0 {
		// No list from the cluster yet: the seeds alone.
		set = discovery.Merge(seeds, nil)
	}
	if len(set) == 0 {
		return nil
	}
	if slices.Equal(set, f.applied) {
		f.seen, f.problem, f.own, f.merged = data, "", own, seeds
		return nil
	}
	if err := f.Apply(set); err != nil {
		// seen stays: the next read tries again.
		f.report(log, slog.LevelError, "nllb cannot apply the upstream file's set; retrying at the next read", err)
		return nil
	}
	f.seen, f.problem, f.applied, f.own, f.merged = data, "", set, own, seeds
	f.Metrics.updated()
	log.Info("nllb upstreams from the node's upstream file applied", "upstreams", fmt.Sprint(set), "listed", fmt.Sprint(own),
		"seeds", fmt.Sprint(seeds))
	return set
}

// report logs a problem once until another problem or a good read.
func (f *Follower) report(log *slog.Logger, level slog.Level, msg string, err error) {
	key := msg
	if err != nil {
		key += ": " + err.Error()
	}
	if key == f.problem {
		return
	}
	f.problem = key
	if err != nil {
		log.Log(context.Background(), level, msg, "error", err.Error())
		return
	}
	log.Log(context.Background(), level, msg)
}

// Family keeps the upstreams of one family (IPv6 when ipv6, else IPv4).
func Family(ups []netip.AddrPort, ipv6 bool) []netip.AddrPort {
	var out []netip.AddrPort
	for _, u := range ups {
		if a := u.Addr().Unmap(); a.Is6() == ipv6 {
			out = append(out, netip.AddrPortFrom(a, u.Port()))
		}
	}
	return out
}
