// Package runlock gives one process at a time a run directory: an exclusive lock on a file in it that
// also records who holds it (pid, host, start time), so a second process is refused by name.
package runlock

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Holder is who holds (or last held) a lock: the lock file's JSON body.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on host %s (since %s)", h.PID, h.Host, h.Started.Local().Format(time.DateTime))
}

// HeldError says the lock is held by another process.
type HeldError struct {
	Path   string
	Holder *Holder // nil when the lock file does not say (being written, or not this format)
	// Gone says the holder's pid is not running on this host; the lock is then held by a process
	// that inherited the lock file, and is not taken over.
	Gone bool
	// Advisory says no lock could be taken (the file system or platform has none): the holder was
	// judged by its record alone.
	Advisory bool
}

func (e *HeldError) Error() string {
	who := "another process (the lock file does not say which)"
	if e.Holder != nil {
		who = e.Holder.String()
	}
	msg := fmt.Sprintf("in use by %s: lock file %s", who, e.Path)
	switch {
	case e.Gone:
		msg += "; that pid is not running, but a process it started still holds the lock"
	case e.Advisory:
		msg += "; this file system takes no locks, so only the file's record says so: delete the lock file if that run has ended"
	}
	return msg
}

// Lock is a held lock; Release gives it up.
type Lock struct {
	f    *os.File
	path string
	// Stale is the record left by a previous holder that ended without releasing the lock (killed,
	// crashed, its host rebooted), taken over by this one; nil if there was none.
	Stale *Holder
}

// self is this process's record.
func self() Holder {
	return Holder{PID: os.Getpid(), Host: hostname(), Started: time.Now().UTC().Truncate(time.Second)}
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}

// readHolder reads the record in a lock file; nil when it is empty or not a record.
func readHolder(f *os.File) *Holder {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
	if err != nil || len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	var h Holder
	if json.Unmarshal(data, &h) != nil || h.PID <= 0 {
		return nil
	}
	return &h
}

// writeHolder replaces the lock file's record with h (or empties it for nil) and syncs it.
func writeHolder(f *os.File, h *Holder) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if h != nil {
		data, _ := json.Marshal(h)
		if _, err := f.WriteAt(append(data, '\n'), 0); err != nil {
			return err
		}
	}
	return f.Sync()
}
