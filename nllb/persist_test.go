package nllb

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPersistRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "herald", "upstreams.json") // the directory is created
	in := aps("10.0.0.3:6443", "10.0.0.1:6443", "[fd00::2]:6443", "10.0.0.1:6443")
	if err := SaveUpstreams(p, in); err != nil {
		t.Fatal(err)
	}
	got, err := LoadUpstreams(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := aps("10.0.0.1:6443", "10.0.0.3:6443", "[fd00::2]:6443"); !slices.Equal(got, want) {
		t.Fatalf("round trip: %v, want %v", got, want)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	// Saving the same set again does not replace the file.
	if err := SaveUpstreams(p, got); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(p)
	if !os.SameFile(st, st2) {
		t.Fatal("an unchanged set rewrote the file")
	}
	if err := SaveUpstreams(p, nil); !errors.Is(err, ErrNoUpstreams) {
		t.Fatalf("saving an empty set: %v, want ErrNoUpstreams", err)
	}
	if got, _ := LoadUpstreams(p); len(got) != 3 {
		t.Fatalf("after a refused save: %v, want the three", got)
	}
}

func TestLoadUpstreamsErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"truncated", `{"version":1,"upstreams":["10.0.0.1:64`, "unexpected end"},
		{"garbage", "\x00\x01binary", "invalid character"},
		{"other version", `{"version":2,"upstreams":["10.0.0.1:6443"]}`, "version 2"},
		{"bad address", `{"version":1,"upstreams":["apiserver:6443"]}`, "apiserver"},
		{"empty set", `{"version":1,"upstreams":[]}`, "no upstreams"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
			os.WriteFile(p, []byte(tt.content), 0o600)
			_, err := LoadUpstreams(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("LoadUpstreams = %v, want an error naming %s and %q", err, p, tt.want)
			}
		})
	}
	if _, err := LoadUpstreams(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestStartUpstreams(t *testing.T) {
	dir := t.TempDir()
	seed := aps("10.0.0.1:6443")
	good := filepath.Join(dir, "good.json")
	if err := SaveUpstreams(good, aps("10.0.0.2:6443", "10.0.0.3:6443")); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt.json")
	os.WriteFile(corrupt, []byte("{"), 0o600)
	tests := []struct {
		name, path string
		want       []string
	}{
		{"persisted plus seed", good, []string{"10.0.0.1:6443", "10.0.0.2:6443", "10.0.0.3:6443"}},
		{"missing file: seed", filepath.Join(dir, "missing.json"), []string{"10.0.0.1:6443"}},
		{"corrupt file: seed", corrupt, []string{"10.0.0.1:6443"}},
		{"no path: seed", "", []string{"10.0.0.1:6443"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StartUpstreams(tt.path, seed, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, aps(tt.want...)) {
				t.Fatalf("StartUpstreams = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := StartUpstreams(corrupt, nil, quiet); !errors.Is(err, ErrNoUpstreams) {
		t.Fatalf("corrupt file and no seed: %v, want ErrNoUpstreams", err)
	}
	got, err := StartUpstreams(good, nil, quiet)
	if err != nil || len(got) != 2 {
		t.Fatalf("persisted set, no seed: %v, %v", got, err)
	}
}

// TestLoadUpstreamsRefusesUntrustedFiles: the speaker writes the file, so
// LoadUpstreams (and StartUpstreams through it) reads only a regular file
// of at most MaxUpstreamFileSize bytes: a symlink (even to a good file), a
// FIFO without a writer, a device or a larger file is refused promptly
// with an error naming the file, and the balancer starts from the seed; a
// missing file stays fs.ErrNotExist.
func TestLoadUpstreamsRefusesUntrustedFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := SaveUpstreams(good, aps("10.0.0.2:6443")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	large := filepath.Join(dir, "large.json")
	// A valid file padded past the cap: refused on its size alone.
	content := `{"version":1,"upstreams":["10.0.0.2:6443"]}`
	if err := os.WriteFile(large, []byte(content+strings.Repeat(" ", MaxUpstreamFileSize-len(content)+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	seed := aps("10.0.0.1:6443")
	tests := []struct {
		name, path string
		want       string // "" : read, else in the error
	}{
		{"regular file", good, ""},
		{"symlink to the good file", link, "not a regular file"},
		{"symlink to /dev/zero", zero, "not a regular file"},
		{"FIFO without a writer", fifo, "not a regular file"},
		{"larger than MaxUpstreamFileSize", large, "file too large"},
		{"missing file", filepath.Join(dir, "missing.json"), "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type result struct {
				ups, start []netip.AddrPort
				err        error
			}
			done := make(chan result, 1)
			go func() {
				ups, err := LoadUpstreams(tt.path)
				start, serr := StartUpstreams(tt.path, seed, quiet)
				if serr != nil {
					err = errors.Join(err, serr)
				}
				done <- result{ups, start, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("LoadUpstreams(%s) did not return within 10s: it hangs", tt.path)
			}
			if tt.want == "" {
				if r.err != nil || !slices.Equal(r.ups, aps("10.0.0.2:6443")) || len(r.start) != 2 {
					t.Fatalf("LoadUpstreams = %v, StartUpstreams = %v, %v; want the persisted set (plus the seed)", r.ups, r.start, r.err)
				}
				return
			}
			if r.err == nil || !strings.Contains(r.err.Error(), tt.want) || !strings.Contains(r.err.Error(), tt.path) {
				t.Fatalf("LoadUpstreams = %v, %v; want an error naming %s and %q", r.ups, r.err, tt.path, tt.want)
			}
			if tt.name == "missing file" && !errors.Is(r.err, fs.ErrNotExist) {
				t.Fatalf("missing file: %v, want fs.ErrNotExist", r.err)
			}
			if !slices.Equal(r.start, seed) {
				t.Fatalf("StartUpstreams = %v, want the seed alone", r.start)
			}
		})
	}
}
