//go:build unix

package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readWithin runs ReadRegular in a goroutine and fails the test when it
// does not return within a generous timeout (a FIFO or /dev/zero hangs an
// unsafe reader).
func readWithin(t *testing.T, path string, limit int64) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := ReadRegular(path, limit)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("ReadRegular(%s) did not return within 10s: it hangs", path)
		return nil, nil
	}
}

// TestReadRegular: only a regular file named by path itself, of at most
// limit bytes, is read; a symlink (even to a regular file), a FIFO without
// a writer, a device, a directory or a longer file is refused promptly with
// an error naming the path; a missing file stays fs.ErrNotExist.
func TestReadRegular(t *testing.T) {
	const limit = 64
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("upstreams"), 0o600); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	if err := os.WriteFile(full, bytes.Repeat([]byte("x"), limit), 0o600); err != nil {
		t.Fatal(err)
	}
	tooLarge := filepath.Join(dir, "too-large")
	if err := os.WriteFile(tooLarge, bytes.Repeat([]byte("x"), limit+1), 0o600); err != nil {
		t.Fatal(err)
	}
	linkRegular := filepath.Join(dir, "link-regular")
	if err := os.Symlink(regular, linkRegular); err != nil {
		t.Fatal(err)
	}
	linkZero := filepath.Join(dir, "link-dev-zero")
	if err := os.Symlink("/dev/zero", linkZero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	subdir := filepath.Join(dir, "subdir")
	if err := os.Mkdir(subdir, 0o700); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		path     string
		want     string // content, when read
		wantErr  error  // the error wrapped, when refused
		needsDev bool   // skip without /dev/zero
	}{
		{name: "regular file", path: regular, want: "upstreams"},
		{name: "regular file of exactly the limit", path: full, want: strings.Repeat("x", limit)},
		{name: "symlink to a regular file", path: linkRegular, wantErr: ErrNotRegular},
		{name: "symlink to /dev/zero", path: linkZero, wantErr: ErrNotRegular, needsDev: true},
		{name: "device /dev/zero", path: "/dev/zero", wantErr: ErrNotRegular, needsDev: true},
		{name: "FIFO without a writer", path: fifo, wantErr: ErrNotRegular},
		{name: "directory", path: subdir, wantErr: ErrNotRegular},
		{name: "larger than the limit", path: tooLarge, wantErr: ErrTooLarge},
		{name: "missing file", path: filepath.Join(dir, "missing"), wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needsDev {
				if st, err := os.Stat("/dev/zero"); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
					t.Skip("no /dev/zero character device here")
				}
			}
			data, err := readWithin(t, tt.path, limit)
			if tt.wantErr == nil {
				if err != nil || string(data) != tt.want {
					t.Fatalf("ReadRegular = %q, %v; want %q", data, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("ReadRegular = %d bytes, %v; want an error wrapping %q naming %s", len(data), err, tt.wantErr, tt.path)
			}
			if data != nil {
				t.Fatalf("refused, yet returned %d bytes", len(data))
			}
			t.Logf("refused: %v", err)
		})
	}
}
