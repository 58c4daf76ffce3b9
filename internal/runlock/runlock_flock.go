//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package runlock

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Acquire takes the lock file at path (creating it): an exclusive, non-blocking flock. A free lock
// whose file still names a holder was left by a process that died; Lock.Stale reports it. A lock held
// by another process is a *HeldError naming it. On a file system without flock (some network file
// systems), the record alone decides: a holder on this host whose pid is gone is taken over, any
// other holder is reported.
func Acquire(path string) (*Lock, error) {
	// O_NOFOLLOW: a lock file that is a link (to a user's file outside the run directory) must not
	// be truncated and overwritten through the link.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("lock file %s is a symbolic link: refused (the trainer makes it as a plain file; remove the link)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	if err := ownFile(f, path); err != nil {
		f.Close()
		return nil, err
	}
	advisory := false
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
	case errors.Is(err, unix.EWOULDBLOCK):
		holder := readHolder(f)
		f.Close()
		return nil, &HeldError{Path: path, Holder: holder, Gone: holder != nil && holder.Host == hostname() && !alive(holder.PID)}
	case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
		advisory = true
	default:
		f.Close()
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	prev := readHolder(f)
	if advisory && prev != nil && (prev.Host != hostname() || alive(prev.PID)) {
		f.Close()
		return nil, &HeldError{Path: path, Holder: prev, Advisory: true}
	}
	me := self()
	if err := writeHolder(f, &me); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	return &Lock{f: f, path: path, Stale: prev}, nil
}

// Release empties the record (a clean end leaves no stale holder behind) and unlocks. The file
// stays: removing it would let a process that opened it just before lock a file no longer there.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := writeHolder(l.f, nil)
	if cerr := l.f.Close(); err == nil { // closing drops the flock
		err = cerr
	}
	l.f = nil
	return err
}

// alive reports whether pid is a running process on this host (one of another user's counts).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// ownFile refuses a lock file that is not a regular file, or that has another name (a hard link to
// a file elsewhere): its record is rewritten and emptied, which would change the other file too.
func ownFile(f *os.File, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("lock file %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("lock file %s is not a regular file: refused (remove it)", path)
	}
	if st.Nlink > 1 {
		return fmt.Errorf("lock file %s has %d names (a hard link to another file): refused (remove it)", path, st.Nlink)
	}
	return nil
}
