package nllb

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/herald-lb/herald/nllb/internal/atomicfile"
)

// stateVersion is the format version of the persisted upstream set.
const stateVersion = 1

// MaxUpstreamFileSize caps the persisted upstream file that ReadUpstreamFile
// accepts: the file lists API-server endpoints (at most ~55 bytes each), so a
// real one holds a few hundred bytes; 1 MiB is far above any cluster.
const MaxUpstreamFileSize = 1 << 20

// persisted is the file's JSON shape.
type persisted struct {
	Version   int      `json:"version"`
	Upstreams []string `json:"upstreams"`
}

// SaveUpstreams writes the upstream set to path atomically (temporary file,
// fsync, rename), mode 0600, and only when the file's content would change;
// a missing directory is created.
// An empty set is refused.
func SaveUpstreams(path string, ups []netip.AddrPort) error {
	_, err := WriteUpstreams(path, ups)
	return err
}

// WriteUpstreams is SaveUpstreams reporting whether it wrote (false: the
// file already held that set).
func WriteUpstreams(path string, ups []netip.AddrPort) (bool, error) {
	norm, err := normalize(ups)
	if err != nil {
		return false, fmt.Errorf("save upstreams to %s: %w", path, err)
	}
	p := persisted{Version: stateVersion}
	for _, u := range norm {
		p.Upstreams = append(p.Upstreams, u.String())
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return false, fmt.Errorf("save upstreams to %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("save upstreams: %w", err)
	}
	wrote, err := atomicfile.WriteIfChanged(path, append(data, '\n'), 0o600)
	if err != nil {
		return false, fmt.Errorf("save upstreams: %w", err)
	}
	return wrote, nil
}

// ReadUpstreamFile returns the content of the persisted upstream file. The
// speaker writes the file (herald speaker --nllb-state-file), so it is read
// without trusting it: path must be a regular file, not a symlink, FIFO or
// device, of at most MaxUpstreamFileSize bytes (see atomicfile.ReadRegular).
// A missing file is an error wrapping fs.ErrNotExist; every error names
// path.
func ReadUpstreamFile(path string) ([]byte, error) {
	return atomicfile.ReadRegular(path, MaxUpstreamFileSize)
}

// LoadUpstreams reads the set SaveUpstreams wrote (with ReadUpstreamFile).
// A missing file is an error wrapping fs.ErrNotExist; a file that is
// refused, does not parse, has another version, an invalid address or no
// upstream is an error naming the file.
func LoadUpstreams(path string) ([]netip.AddrPort, error) {
	data, err := ReadUpstreamFile(path)
	if err != nil {
		return nil, fmt.Errorf("load upstreams: %w", err)
	}
	ups, err := ParseUpstreams(data)
	if err != nil {
		return nil, fmt.Errorf("load upstreams from %s: %w", path, err)
	}
	return ups, nil
}

// ParseUpstreams reads the content of a persisted set: sorted, without
// duplicates. Content that does not parse, has another version, an invalid
// address or no upstream is an error.
func ParseUpstreams(data []byte) ([]netip.AddrPort, error) {
	var p persisted
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	if p.Version != stateVersion {
		return nil, fmt.Errorf("format version %d, want %d", p.Version, stateVersion)
	}
	ups := make([]netip.AddrPort, 0, len(p.Upstreams))
	for _, s := range p.Upstreams {
		u, err := netip.ParseAddrPort(s)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: %w", s, err)
		}
		ups = append(ups, u)
	}
	return normalize(ups)
}

// StartUpstreams is the set a starting balancer uses: the persisted set
// plus the seed (the server of the node's kubeconfig). The seed stays in
// so that a node whose persisted set is stale still has the address it was
// installed with; the persisted set is what lets a restarted node reach
// the other API servers when the seed is the one that is down. A missing
// or unreadable file is logged and the seed alone is used.
func StartUpstreams(path string, seed []netip.AddrPort, log *slog.Logger) ([]netip.AddrPort, error) {
	var ups []netip.AddrPort
	if path != "" {
		saved, err := LoadUpstreams(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			log.Info("nllb no persisted upstream set yet; starting from the seed", "path", path, "seed", fmt.Sprint(seed))
		case err != nil:
			log.Warn("nllb persisted upstream set unusable; starting from the seed", "error", err.Error(), "seed", fmt.Sprint(seed))
		default:
			ups = saved
		}
	}
	all, err := normalize(append(ups, seed...))
	if err != nil {
		return nil, fmt.Errorf("starting upstreams (persisted %v, seed %v): %w", ups, seed, err)
	}
	return all, nil
}
