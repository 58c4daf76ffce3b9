//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package runlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Acquire creates the lock file at path exclusively; where there is no flock to tell a live holder
// from a dead one, an existing file is always reported, and deleting it is the user's decision.
func Acquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		var holder *Holder
		if old, err := os.Open(path); err == nil {
			holder = readHolder(old)
			old.Close()
		}
		return nil, &HeldError{Path: path, Holder: holder, Advisory: true}
	}
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	me := self()
	if err := writeHolder(f, &me); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
}

// Release removes the lock file.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Close()
	l.f = nil
	return os.Remove(l.path)
}
