//go:build unix

package feed

import (
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herald-lb/herald/internal/logbuf"
	"github.com/herald-lb/herald/nllb"
)

// TestFollowerRefusesUntrustedFiles: the speaker writes the file, so the
// Follower reads only a regular file of at most nllb.MaxUpstreamFileSize
// bytes. A FIFO without a writer, a symlink (to /dev/zero or to a good
// file) or a larger file is refused promptly: nothing is applied, the set
// in force stays, and the refusal is logged once (as a warning naming the
// file); a regular file is applied as before.
func TestFollowerRefusesUntrustedFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nllb-upstreams.json")
	good := filepath.Join(dir, "good.json")
	if err := nllb.SaveUpstreams(good, aps("10.0.0.21:6443")); err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	var applied [][]netip.AddrPort
	f := &Follower{
		Path: path, Seeds: aps("192.0.2.1:6443"), Current: aps("192.0.2.1:6443"),
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Apply: func(ups []netip.AddrPort) error {
			applied = append(applied, ups)
			return nil
		},
	}
	replace := func(make func() error) func() {
		return func() {
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if err := make(); err != nil {
				t.Fatal(err)
			}
		}
	}
	content := `{"version":1,"upstreams":["10.0.0.22:6443"]}`
	steps := []struct {
		name  string
		write func()
		want  []netip.AddrPort // nil: nothing applied
		log   string           // in a warning, when refused
	}{
		{name: "FIFO without a writer", write: replace(func() error { return syscall.Mkfifo(path, 0o600) }),
			log: "not a regular file"},
		{name: "symlink to /dev/zero", write: replace(func() error { return os.Symlink("/dev/zero", path) }),
			log: "not a regular file"},
		// The same refusal as the step before: refused, not logged again.
		{name: "symlink to a good file", write: replace(func() error { return os.Symlink(good, path) })},
		{name: "larger than nllb.MaxUpstreamFileSize", write: replace(func() error {
			return os.WriteFile(path, []byte(content+strings.Repeat(" ", nllb.MaxUpstreamFileSize)), 0o600)
		}), log: "file too large"},
		{name: "regular file: applied", write: replace(func() error { return os.WriteFile(path, []byte(content), 0o600) }),
			want: aps("10.0.0.22:6443", "192.0.2.1:6443")},
		{name: "FIFO again: the set stays", write: replace(func() error { return syscall.Mkfifo(path, 0o600) }),
			log: "not a regular file"},
	}
	for _, st := range steps {
		before, lines := len(applied), logs.Count("cannot read the upstream file")
		st.write()
		done := make(chan []netip.AddrPort, 1)
		go func() { done <- f.Check() }()
		var got []netip.AddrPort
		select {
		case got = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Check did not return within 10s: it hangs", st.name)
		}
		var now []netip.AddrPort
		if len(applied) > before {
			now = applied[len(applied)-1]
		}
		if !slices.Equal(now, st.want) || !slices.Equal(got, st.want) {
			t.Errorf("%s: applied %v (returned %v), want %v", st.name, now, got, st.want)
		}
		if st.log != "" {
			warned := logs.Lines("level=WARN", "cannot read the upstream file", st.log, path)
			if len(warned) == 0 || logs.Count("cannot read the upstream file") == lines {
				t.Errorf("%s: no new warning with %q naming %s; logs:\n%s", st.name, st.log, path, logs.String())
			}
		}
	}
}
