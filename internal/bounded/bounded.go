// Package bounded opens and reads the files the program is given (recipes, checkpoints, weights,
// logs) so that none can make it allocate more than the file holds: only a regular file is
// accepted (a device such as /dev/zero, a pipe or a directory would read without end), its size is
// known from a stat before anything is allocated, and the read itself stops one byte past that
// size, so a file that grows while it is read is refused rather than followed.
package bounded

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by the errors for a path that names a device, a pipe, a socket or a
// directory (after following links).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the errors for a file larger than the caller's limit, or one that grew
// while it was read.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading if it is a regular file (links followed) and returns it with its
// size. The path is checked before the open, so a named pipe cannot block it, and the open file is
// checked again, so a path swapped in between is refused too.
func Open(path string) (*os.File, int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Op = "open" // what the caller asked for, as os.Open would say it
		}
		return nil, 0, err
	}
	if err := regular(path, st); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err = f.Stat()
	if err == nil {
		err = regular(path, st)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// regular refuses what is not a regular file, saying what it is.
func regular(path string, st fs.FileInfo) error { return Regular(path, st.Mode()) }

// Regular is Open's check of the file at path, of mode m, for a caller that stats it by other
// means: nil for a regular file, else the error that refuses it (wrapping ErrNotRegular).
func Regular(path string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is %s: %w, expected a file", path, Kind(m), ErrNotRegular)
}

// Kind names what a file of mode m is, for an error that refuses it: "a symbolic link", "a directory",
// "a device", "a named pipe", "a socket", "a special file" or "a regular file".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0, m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file"
}

// ReadFile reads the regular file at path whole, refusing one larger than limit bytes (limit <= 0:
// no limit beyond the file's own size) before allocating anything.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, size, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if limit > 0 && size > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d allowed: %w", path, size, limit, ErrTooLarge)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("%s is %d bytes, more than this platform can hold: %w", path, size, ErrTooLarge)
	}
	data := make([]byte, 0, size)
	n, err := io.Copy(&sliceWriter{&data}, io.LimitReader(f, size+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if n > size {
		return nil, fmt.Errorf("%s grew past %d bytes while it was read: %w", path, size, ErrTooLarge)
	}
	return data, nil
}

// sliceWriter appends to a slice allocated for the stat'ed size; the one byte past it (a file that
// grew) is the only growth it may see.
type sliceWriter struct{ b *[]byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}
