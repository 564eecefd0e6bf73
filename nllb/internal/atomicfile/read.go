package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by ReadRegular's error for a path that is not a
// regular file.
var ErrNotRegular = errors.New("not a regular file (a symlink, FIFO or device is refused)")

// ErrTooLarge is wrapped by ReadRegular's error for a file longer than its
// limit.
var ErrTooLarge = errors.New("file too large")

// ReadRegular reads a file that another, less trusted process writes (with
// Write): path must name a regular file itself, not a symlink (even to a
// regular file), a FIFO, a socket, a directory or a device, and hold at
// most limit bytes. It opens without following a final symlink and without
// blocking (a FIFO with no writer does not hang the open), checks the
// opened descriptor with fstat, and reads at most limit+1 bytes, so that a
// symlink to /dev/zero, a FIFO or a huge file neither hangs nor exhausts the
// reader. Every error names path; a missing file is an error wrapping
// fs.ErrNotExist as with os.ReadFile, a refused one wraps ErrNotRegular or
// ErrTooLarge.
func ReadRegular(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|safeOpenFlags, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			// O_NOFOLLOW and the final component is a symlink.
			return nil, fmt.Errorf("open %s: %w: a symlink (%w)", path, ErrNotRegular, errors.Unwrap(err))
		}
		return nil, err // *fs.PathError naming path
	}
	defer f.Close()
	st, err := f.Stat() // fstat of the opened descriptor: no race with a rename
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("open %s: %w: %s", path, ErrNotRegular, describe(st.Mode()))
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("read %s: %w: %d bytes, at most %d accepted", path, ErrTooLarge, st.Size(), limit)
	}
	// The file may grow after fstat: never read more than limit+1 bytes.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("read %s: %w: over %d bytes", path, ErrTooLarge, limit)
	}
	return data, nil
}

// describe names a non-regular file type.
func describe(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	}
	return "file mode " + m.String()
}
