//go:build linux && (amd64 || arm64)

package data

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/trainer/trainer/internal/bounded"
)

// readImageFile reads the regular file at filepath.Join(root, name) into buf (grown to its size)
// with the system calls package os makes (stat the path, open, fstat, pread, close) but without its
// allocations (the joined path, the File, two FileInfos, a C string per call): the NUL-terminated
// path is built in buf itself, which the file's bytes then overwrite. The checks and the errors are
// readImageFileOS's: a path that is not a regular file is refused before it is opened, the open
// file is checked again, a file that shrank while it was read is an EOF.
func readImageFile(root, name string, buf []byte) ([]byte, error) {
	buf = joinPath(buf[:0], root, name)
	var st unix.Stat_t
	_, _, errno := syscallEINTR(unix.SYS_NEWFSTATAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&st)), 0)
	if errno != 0 {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(root, name), Err: errno}
	}
	if m := fileMode(st.Mode); !m.IsRegular() {
		return nil, bounded.Regular(filepath.Join(root, name), m)
	}
	fd, _, errno := syscallEINTR(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&buf[0])), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errno != 0 {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(root, name), Err: errno}
	}
	defer unix.Syscall(unix.SYS_CLOSE, fd, 0, 0)
	if _, _, errno := unix.Syscall(unix.SYS_FSTAT, fd, uintptr(unsafe.Pointer(&st)), 0); errno != 0 {
		return nil, &fs.PathError{Op: "stat", Path: filepath.Join(root, name), Err: errno}
	}
	if m := fileMode(st.Mode); !m.IsRegular() {
		return nil, bounded.Regular(filepath.Join(root, name), m)
	}
	n := int(st.Size)
	buf = slices.Grow(buf[:0], n)[:n]
	for off := 0; off < n; {
		chunk := min(n-off, 1<<30) // os reads at most 1 GiB a call too
		got, _, errno := syscallEINTR(unix.SYS_PREAD64, fd, uintptr(unsafe.Pointer(&buf[off])), uintptr(chunk), uintptr(off))
		if errno != 0 || got == 0 {
			path := filepath.Join(root, name)
			var err error = io.EOF
			if errno != 0 {
				err = &fs.PathError{Op: "read", Path: path, Err: errno}
			}
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		off += int(got)
	}
	return buf, nil
}

// atFDCWD is the current directory's pseudo descriptor, a variable so that it converts to uintptr.
var atFDCWD = unix.AT_FDCWD

// syscallEINTR is unix.Syscall6 of four arguments, repeated while it is interrupted (as package os
// does).
func syscallEINTR(trap, a1, a2, a3, a4 uintptr) (r1, r2 uintptr, errno unix.Errno) {
	for {
		r1, r2, errno = unix.Syscall6(trap, a1, a2, a3, a4, 0, 0)
		if errno != unix.EINTR {
			return r1, r2, errno
		}
	}
}

// joinPath appends filepath.Join(root, name) and a NUL to buf. Names from a folder's listing are
// already clean, and filepath.Clean returns a clean root without allocating, so the usual case joins
// the two in buf; anything else takes filepath.Join's allocation.
func joinPath(buf []byte, root, name string) []byte {
	cleanRoot := filepath.Clean(root)
	switch {
	case root == "" || name == "" || filepath.Clean(name) != name || filepath.IsAbs(name) || name == "." || name == ".." || strings.HasPrefix(name, "../"):
		buf = append(buf, filepath.Join(root, name)...)
	case cleanRoot == "/":
		buf = append(append(buf, '/'), name...)
	case cleanRoot == ".":
		buf = append(buf, name...)
	default:
		buf = append(append(append(buf, cleanRoot...), '/'), name...)
	}
	return append(buf, 0)
}

// fileMode is the fs.FileMode type bits package os derives from a stat's st_mode.
func fileMode(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	}
	return fs.ModeIrregular
}
