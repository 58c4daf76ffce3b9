// Package atomicfile writes files so that a reader, or a crash at any moment, sees either the old
// content or the complete new one, never a partial file: checkpoints, weight files, plots.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write stores data at path through a temporary file in the same directory: write, fsync, rename over
// path, fsync the directory so the rename itself is durable.
func Write(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
