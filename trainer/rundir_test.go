package trainer

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/internal/runlock"
)

// TestOneRunAtATimePerDirectory: while a run trains, another run in its directory (fresh or resumed) is
// refused naming the holder's pid and host, and writes nothing; the lock is released at the end.
func TestOneRunAtATimePerDirectory(t *testing.T) {
	cfg := smallRun(t, "busy")
	cfg.Steps = 1_000_000
	cfg.Log.EverySteps = 1
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Run(cfg, RunOptions{Out: io.Discard, Stop: stop})
		done <- err
	}()
	metrics := filepath.Join(cfg.Dir(), "metrics.jsonl")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if data, _ := os.ReadFile(metrics); bytes.Contains(data, []byte(`"type":"train"`)) {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			t.Fatal("the first run never logged a step")
		}
	}
	host, _ := os.Hostname()
	stopAtOnce := make(chan struct{}) // were the second run let in, it would stop after one step
	close(stopAtOnce)
	for _, opts := range []RunOptions{{Out: io.Discard, Stop: stopAtOnce}, {Out: io.Discard, Resume: true, Stop: stopAtOnce}} {
		_, err := Run(cfg, opts)
		if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) ||
			!strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), LockName) {
			t.Errorf("second run (resume %v) in a busy directory: %v", opts.Resume, err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lock, err := runlock.Acquire(filepath.Join(cfg.Dir(), LockName))
	if err != nil {
		t.Fatalf("after the run: %v", err)
	}
	defer lock.Release()
	if lock.Stale != nil {
		t.Errorf("a run that ended left a stale lock record: %v", lock.Stale)
	}
	for _, r := range metricsRecords(t, cfg.Dir()) {
		if r["type"] == "resume" {
			t.Error("the refused resume wrote a record")
		}
	}
}

// TestStaleLockIsTakenOverAndTemporariesRemoved: the lock record of a process that died is taken over
// (and said), and the temporary files of its unfinished atomic writes are removed.
func TestStaleLockIsTakenOverAndTemporariesRemoved(t *testing.T) {
	cfg := smallRun(t, "stale")
	cfg.Steps = 2
	cfg.Schedule = config.ScheduleConfig{Name: "constant"}
	ckptDir := filepath.Join(cfg.Dir(), "checkpoints")
	if err := os.MkdirAll(ckptDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no `true` to make a dead pid:", err)
	}
	if syscall.Kill(dead.Process.Pid, 0) == nil {
		t.Skip("the dead pid is already reused")
	}
	record := `{"pid":` + strconv.Itoa(dead.Process.Pid) + `,"host":"h","started":"2025-01-02T03:04:05Z"}`
	strays := []string{filepath.Join(ckptDir, ".ckpt-000000005.tckpt.1234.tmp"), filepath.Join(cfg.Dir(), ".config.yaml.99.tmp")}
	for path, data := range map[string]string{filepath.Join(cfg.Dir(), LockName): record, strays[0]: "partial", strays[1]: "x"} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	if _, err := Run(cfg, RunOptions{Out: &out}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"taking over the lock of pid " + strconv.Itoa(dead.Process.Pid), "removed 2 temporary file(s)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, p := range strays {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left in place: %v", p, err)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(cfg.Dir(), LockName)); len(data) != 0 {
		t.Errorf("lock file after the run: %q; want it empty", data)
	}
}

// TestDirectoryWithOnlyABestCheckpoint: a run killed before its first periodic checkpoint leaves only
// best.tckpt; a fresh run there is refused (its metrics stay), and --resume continues from best.tckpt.
func TestDirectoryWithOnlyABestCheckpoint(t *testing.T) {
	cfg := constantRun(t, "bestonly", 10)
	res, err := Run(cfg, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	paths, _ := checkpoint.List(filepath.Join(res.Dir, "checkpoints"))
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	logBefore, _ := os.ReadFile(filepath.Join(res.Dir, "metrics.jsonl"))
	if _, err := Run(cfg, RunOptions{Out: io.Discard}); err == nil || !strings.Contains(err.Error(), checkpoint.BestName) ||
		!strings.Contains(err.Error(), "--resume") {
		t.Errorf("fresh run over a best.tckpt: %v", err)
	}
	if logAfter, _ := os.ReadFile(filepath.Join(res.Dir, "metrics.jsonl")); !bytes.Equal(logBefore, logAfter) {
		t.Error("the refused fresh run changed metrics.jsonl")
	}
	longer := cfg
	longer.Steps = 12
	var out strings.Builder
	resumed, err := Run(longer, RunOptions{Out: &out, Resume: true})
	if err != nil {
		t.Fatalf("--resume with only best.tckpt: %v", err)
	}
	best := filepath.Join(res.Dir, "checkpoints", checkpoint.BestName)
	if resumed.Step != 12 || !strings.Contains(out.String(), "from "+best+" (step 10)") {
		t.Errorf("resumed to step %d, output:\n%s\nwant a resume from %s at step 10", resumed.Step, out.String(), best)
	}
}

// TestRunSaysWhereItWritesAndHowToResume: the start names the run directory and the metrics log; an
// interrupted run prints the command that resumes it.
func TestRunSaysWhereItWritesAndHowToResume(t *testing.T) {
	cfg := smallRun(t, "where")
	stop := make(chan struct{})
	close(stop)
	var out strings.Builder
	const command = "trainer run recipes/x.yaml --set name=where --resume"
	if _, err := Run(cfg, RunOptions{Out: &out, Stop: stop, ResumeCommand: command}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run directory " + cfg.Dir(), "metrics log " + filepath.Join(cfg.Dir(), "metrics.jsonl"),
		"resume with: " + command} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunNames: a new run of a name whose directory holds a run takes the next number above the
// highest one (deleted or empty ones in between are not reused, so the newest has the highest
// number); --resume takes the highest that holds a run; other names sharing the prefix do not count.
func TestRunNames(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string, files ...string) {
		t.Helper()
		for _, f := range files {
			p := filepath.Join(root, dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		os.MkdirAll(filepath.Join(root, dir), 0o755)
	}
	check := func(when, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %q, want %q", when, got, want)
		}
	}
	check("no run yet: fresh", FreshRunName(root, "m"), "m")
	check("no run yet: newest", NewestRunName(root, "m"), "m")
	mk("m", LockName) // a lock alone (a run that never started) holds no run
	check("only a lock: fresh", FreshRunName(root, "m"), "m")
	mk("m", "config.yaml")
	check("one run: fresh", FreshRunName(root, "m"), "m-2")
	check("one run: newest", NewestRunName(root, "m"), "m")
	mk("m-3", "checkpoints/"+checkpoint.FileName(10))
	mk("m-4")                  // empty: holds no run
	mk("m-7x", "config.yaml")  // not a number
	mk("m-07", "config.yaml")  // a leading zero: another name
	mk("m-x-9", "config.yaml") // another name
	mk("mm-12", "config.yaml") // another name
	check("runs 1 and 3: fresh", FreshRunName(root, "m"), "m-4")
	check("runs 1 and 3: newest", NewestRunName(root, "m"), "m-3")
	mk("m-10", "metrics.jsonl")
	check("runs 1, 3, 10: fresh", FreshRunName(root, "m"), "m-11")
	check("runs 1, 3, 10: newest", NewestRunName(root, "m"), "m-10")

	for _, c := range []struct {
		path, want string
		ok         bool
	}{
		{filepath.Join(root, "m-3", "checkpoints", checkpoint.FileName(10)), "m-3", true},
		{filepath.Join(root, "m", "checkpoints", "best.tckpt"), "m", true},
		{filepath.Join(root, "mm-12", "checkpoints", "best.tckpt"), "", false},
		{filepath.Join(root, "imported.tckpt"), "", false},
		{filepath.Join(t.TempDir(), "m", "checkpoints", "best.tckpt"), "", false},
	} {
		got, ok := RunNameOf(root, "m", c.path)
		if got != c.want || ok != c.ok {
			t.Errorf("RunNameOf(%s) = %q, %v; want %q, %v", c.path, got, ok, c.want, c.ok)
		}
	}
}
