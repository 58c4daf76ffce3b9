//go:build linux

package runlock

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLockIsExclusiveAndNamesItsHolder: a second Acquire (even in the same process: flock belongs to
// the open file) is refused with the holder's pid, host and start; a clean release frees the lock and
// leaves no stale record.
func TestLockIsExclusiveAndNamesItsHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.Stale != nil {
		t.Errorf("fresh lock file reports a stale holder %v", l.Stale)
	}
	_, err = Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) || held.Holder == nil || held.Holder.PID != os.Getpid() || held.Holder.Host != hostname() {
		t.Fatalf("second Acquire: %v; want a HeldError naming pid %d", err, os.Getpid())
	}
	for _, want := range []string{"pid " + strconv.Itoa(os.Getpid()), "on host " + hostname(), "since ", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := Acquire(path)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	defer again.Release()
	if again.Stale != nil {
		t.Errorf("after a clean release: stale holder %v", again.Stale)
	}
}

// TestLockOfAKilledProcessIsTakenOver: a process killed while holding the lock leaves its record; the
// next Acquire takes the lock and reports the dead holder.
func TestLockOfAKilledProcessIsTakenOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "RUNLOCK_HOLD="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		cmd.Process.Kill()
		t.Fatalf("helper: %q, %v", line, err)
	}
	if _, err := Acquire(path); err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("while the helper holds it: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	l, err := Acquire(path)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	defer l.Release()
	if l.Stale == nil || l.Stale.PID != cmd.Process.Pid {
		t.Errorf("stale holder %v; want pid %d", l.Stale, cmd.Process.Pid)
	}
}

// TestHelperHoldLock is the holder process of TestLockOfAKilledProcessIsTakenOver.
func TestHelperHoldLock(t *testing.T) {
	path := os.Getenv("RUNLOCK_HOLD")
	if path == "" {
		t.Skip("helper process")
	}
	if _, err := Acquire(path); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
}

// TestLockHeldByAnInheritorOfADeadHolder: a held lock whose record names a pid no longer running on
// this host is not taken over (a process still holds it) and the error says so.
func TestLockHeldByAnInheritorOfADeadHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	dead := deadPID(t)
	if err := writeHolder(l.f, &Holder{PID: dead, Host: hostname(), Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) || !held.Gone || !strings.Contains(err.Error(), "not running") {
		t.Errorf("lock held by an inheritor of dead pid %d: %v", dead, err)
	}
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if alive(cmd.Process.Pid) {
		t.Skip("the exited helper's pid is already reused")
	}
	return cmd.Process.Pid
}

// TestLockFileThatIsALinkIsRefused: a run.lock that is a symbolic link or a hard link to a user's
// file outside the run directory is refused, and that file is neither truncated nor overwritten.
func TestLockFileThatIsALinkIsRefused(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "thesis.txt")
	const content = "a user's data\n"
	if err := os.WriteFile(outside, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sym, hard := filepath.Join(dir, "run.lock"), filepath.Join(dir, "hard.lock")
	if err := os.Symlink(outside, sym); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, hard); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{{sym, "symbolic link"}, {hard, "hard link"}} {
		l, err := Acquire(c.path)
		if err == nil {
			l.Release()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("Acquire(%s): %v; want it refused as a %s", c.path, err, c.want)
		}
		if got, _ := os.ReadFile(outside); string(got) != content {
			t.Errorf("after Acquire(%s) the outside file holds %q", c.path, got)
		}
	}
}
