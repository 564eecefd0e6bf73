// Package atomicfile replaces a file's content so that a reader (or a
// crash) sees either the old content or the new one, never a mix, and
// reads such a file without trusting its writer (ReadRegular).
package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data and mode: a temporary file in the same
// directory is written, synced and renamed over path, then the directory
// is synced so the rename survives a crash.
func Write(path string, data []byte, mode fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: open directory for sync: %w", path, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}

// WriteIfChanged writes like Write unless path already holds exactly data
// with mode; it reports whether it wrote. A file with the right content but
// another mode only gets its mode changed.
func WriteIfChanged(path string, data []byte, mode fs.FileMode) (bool, error) {
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, data):
		st, err := os.Stat(path)
		if err != nil {
			return false, fmt.Errorf("stat %s: %w", path, err)
		}
		if st.Mode().Perm() != mode.Perm() {
			if err := os.Chmod(path, mode.Perm()); err != nil {
				return false, fmt.Errorf("chmod %s: %w", path, err)
			}
		}
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := Write(path, data, mode); err != nil {
		return false, err
	}
	return true, nil
}
