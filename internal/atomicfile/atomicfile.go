// Package atomicfile writes files so that a reader, or a crash at any moment, sees either the old
// content or the complete new one, never a partial file: checkpoints, weight files, plots, per-image results.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/trainer/trainer/internal/bounded"
)

// Write stores data at path through a temporary file in the same directory: write, fsync, rename over
// path, fsync the directory so the rename itself is durable. The file gets mode 0666 less the process
// umask (0644 under the usual 022), as os.Create would give it.
//
// Only a regular file is replaced: a path that names a symbolic link, a device (--out /dev/null), a
// pipe or a directory is refused, since the rename would put a regular file in its place rather than
// write through it.
func Write(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// File is a file being written in place of path, for content streamed in pieces: nothing appears at
// path until Commit, and Abort leaves path as it was.
type File struct {
	*os.File
	path string
}

// Create starts writing the file that Commit will put at path, as Write does for a whole buffer; like
// Write it refuses a path that is not a regular file.
func Create(path string) (*File, error) {
	if err := replaceable(path); err != nil {
		return nil, err
	}
	tmp, err := createTemp(filepath.Dir(path), "."+filepath.Base(path)+".", ".tmp")
	if err != nil {
		return nil, err
	}
	return &File{File: tmp, path: path}, nil
}

// Abort closes and removes the temporary file; path is untouched.
func (f *File) Abort() {
	f.File.Close()
	os.Remove(f.Name())
}

// Commit syncs the temporary file, renames it over path and syncs the directory; on an error the
// temporary file is removed and path is untouched.
func (f *File) Commit() error {
	defer os.Remove(f.Name()) // fails harmlessly after the rename
	if err := f.Sync(); err != nil {
		f.File.Close()
		return err
	}
	if err := f.File.Close(); err != nil {
		return err
	}
	if err := replaceable(f.path); err != nil { // it may have changed while the content streamed
		return err
	}
	if err := os.Rename(f.Name(), f.path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(f.path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// createTemp is os.CreateTemp with mode 0666 (the kernel applies the umask) instead of 0600: the
// temporary file becomes the user's file, readable as any file they create.
func createTemp(dir, prefix, suffix string) (*os.File, error) {
	for range 10000 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"+suffix), Err: fs.ErrExist}
}

// ErrNotReplaceable is wrapped by Write's error for a path that exists and is not a regular file.
var ErrNotReplaceable = errors.New("only a regular file is replaced")

// replaceable refuses a path that exists and is not a regular file (a link is not followed).
func replaceable(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && st.Mode().IsRegular()) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s is %s, not written: %w (name a new file, or remove it first)", path, bounded.Kind(st.Mode()), ErrNotReplaceable)
}
