package trainer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/internal/echo"
	"github.com/trainer/trainer/internal/runlock"
)

// A run directory, runs/<name>/, holds config.yaml (the resolved config), metrics.jsonl,
// checkpoints/ and run.lock, which one process at a time holds while it trains there.

// LockName is the run directory's lock file: an flock held while a run trains there, whose JSON
// body says who holds it (docs/checkpoints.md).
const LockName = "run.lock"

// runDir is the run directory opened for training: where the run starts and its metrics log.
type runDir struct {
	dir       string
	lock      *runlock.Lock
	startStep int
	resumed   *checkpoint.Checkpoint // the checkpoint continued from, if any
	// finished says the resumed checkpoint is already at (or past) the run's end: nothing to do.
	finished bool
	metrics  *metricsLog
}

// close releases the metrics log and the lock.
func (rd *runDir) close() {
	if rd.metrics != nil {
		rd.metrics.Close()
	}
	_ = rd.lock.Release()
}

// openRunDir prepares cfg.Dir() for a run of total steps: it takes the directory's lock (and cleans
// what a killed process left), resumes from a checkpoint when opts ask (checking it is complete for
// the config, loading it and printing what changed) or refuses to train over another run's
// checkpoints, writes the resolved config and opens the metrics log without the records past the
// starting step. A resumed run that has already reached total comes back finished, with nothing
// written.
func (s *session) openRunDir(opts RunOptions, out io.Writer, total int) (rd *runDir, err error) {
	dir := s.cfg.Dir()
	ckptDir := filepath.Join(dir, "checkpoints")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := runlock.Acquire(filepath.Join(dir, LockName))
	if err != nil {
		if held := (*runlock.HeldError)(nil); errors.As(err, &held) {
			return nil, fmt.Errorf("run directory %s is %w; one run at a time trains in a directory", dir, err)
		}
		return nil, fmt.Errorf("run directory %s: %w", dir, err)
	}
	rd = &runDir{dir: dir, lock: lock}
	defer func() {
		if err != nil {
			rd.close()
		}
	}()
	if lock.Stale != nil {
		fmt.Fprintf(out, "run directory %s: taking over the lock of %s, which ended without releasing it\n", dir, lock.Stale)
	}
	if removed := removeTemporaries(dir, ckptDir); len(removed) > 0 {
		fmt.Fprintf(out, "removed %d temporary file(s) of writes a killed process left: %s\n", len(removed),
			echo.List(removed, 3))
	}
	var accepted []config.Change // config changes on resume, all on the allow-list (config.Resumable)
	switch {
	case opts.ResumeFrom != "" || opts.Resume:
		ckpt, err := s.resumePoint(ckptDir, opts.ResumeFrom)
		if err != nil {
			return rd, err
		}
		if accepted, err = s.resumeConfig(ckpt); err != nil {
			return rd, err
		}
		if err := s.checkComplete(ckpt, false); err != nil {
			return rd, err
		}
		rd.resumed, rd.startStep = ckpt, ckpt.Header.Step
		if rd.startStep >= total {
			rd.finished = true
			return rd, nil
		}
		s.load(ckpt)
		fmt.Fprintf(out, "resuming %s from %s (step %d)\n", s.cfg.Name, ckpt.Path, rd.startStep)
		if filepath.Base(ckpt.Path) == checkpoint.BestName && opts.ResumeFrom == "" {
			fmt.Fprintf(out, "(the run stopped before its first periodic checkpoint: %s is its only state)\n", checkpoint.BestName)
		}
		for _, c := range accepted {
			fmt.Fprintf(out, "config change accepted on resume: %s\n", c)
		}
	default:
		if held := checkpointFiles(ckptDir); len(held) > 0 {
			return rd, fmt.Errorf("run directory %s already holds checkpoints (%s): pass --resume to continue it, "+
				"or choose another run name (--set name=...), or delete the directory", dir, echo.List(held, 3))
		}
		if err := s.loadPretrained(out); err != nil { // net.pretrained: a fresh run starts from it
			return rd, err
		}
	}
	if err := os.MkdirAll(ckptDir, 0o755); err != nil {
		return rd, err
	}
	if err := atomicfile.Write(filepath.Join(dir, "config.yaml"), s.cfg.YAML()); err != nil {
		return rd, fmt.Errorf("writing resolved config: %w", err)
	}
	// Records past the starting step were written by an interrupted run and are about to be written
	// again: drop them (a fresh run starts the log anew).
	metricsPath := filepath.Join(dir, "metrics.jsonl")
	dropped, err := truncateMetrics(metricsPath, rd.startStep)
	if err != nil {
		return rd, err
	}
	if rd.metrics, err = openMetrics(metricsPath); err != nil {
		return rd, err
	}
	if rd.resumed != nil {
		if err := rd.metrics.write(resumeRecord(rd.resumed, accepted, dropped)); err != nil {
			return rd, err
		}
	}
	return rd, nil
}

// checkpointFiles lists the checkpoints in ckptDir, periodic ones and best.tckpt, by file name.
func checkpointFiles(ckptDir string) []string {
	var names []string
	paths, _ := checkpoint.List(ckptDir)
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	if _, err := os.Stat(filepath.Join(ckptDir, checkpoint.BestName)); err == nil {
		names = append(names, checkpoint.BestName)
	}
	return names
}

// removeTemporaries deletes the temporary files of atomic writes (internal/atomicfile names them
// ".NAME.*.tmp" beside their target) that a killed process left in dirs, returning their names. Only
// the lock holder calls it, so no write of another run is in flight.
func removeTemporaries(dirs ...string) []string {
	var removed []string
	for _, dir := range dirs {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			name := e.Name()
			if e.Type().IsRegular() && strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp") {
				if os.Remove(filepath.Join(dir, name)) == nil {
					removed = append(removed, name)
				}
			}
		}
	}
	return removed
}

// finishedResult reports a resumed run that had already reached its end (of total steps): nothing to
// do, and nothing was written, so its final checkpoint keeps every tensor it had.
func (rd *runDir) finishedResult(res Result, total int, out io.Writer) Result {
	name, step := filepath.Base(rd.dir), rd.startStep
	if step == total {
		fmt.Fprintf(out, "run %s already finished at step %d (of %d); nothing to do — raise epochs/steps with --set to continue\n",
			name, step, total)
	} else {
		fmt.Fprintf(out, "run %s is at step %d, past the %d steps its config trains; nothing to do — raise epochs/steps "+
			"with --set to continue\n", name, step, total)
	}
	res.Step, res.Checkpoint, res.AlreadyFinished = step, rd.resumed.Path, true
	return res
}

// HoldsRun reports whether dir holds a run: a resolved config, a metrics log or a checkpoint that a
// new run there would mix with or overwrite.
func HoldsRun(dir string) bool {
	for _, name := range []string{"config.yaml", "metrics.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return len(checkpointFiles(filepath.Join(dir, "checkpoints"))) > 0
}

// runNumber returns n when entry is name-n (n ≥ 2, decimal, no leading zero), the name a repeated run of
// name takes; 1 for name itself; 0 for anything else.
func runNumber(name, entry string) int {
	if entry == name {
		return 1
	}
	rest, ok := strings.CutPrefix(entry, name+"-")
	if !ok || rest == "" || rest[0] == '0' || len(rest) > 9 {
		return 0
	}
	n := 0
	for _, r := range rest {
		if r < '0' || r > '9' {
			return 0
		}
		n = n*10 + int(r-'0')
	}
	if n < 2 {
		return 0
	}
	return n
}

// latestRun returns the highest number among name's runs under runDir (1 for name itself, n for
// name-n) whose directory holds a run, or 0 when none does.
func latestRun(runDir, name string) int {
	latest := 0
	entries, _ := os.ReadDir(runDir)
	for _, e := range entries {
		if n := runNumber(name, e.Name()); n > latest && e.IsDir() && HoldsRun(filepath.Join(runDir, e.Name())) {
			latest = n
		}
	}
	return latest
}

func numberedRun(name string, n int) string {
	if n <= 1 {
		return name
	}
	return fmt.Sprintf("%s-%d", name, n)
}

// FreshRunName is the name a new run of name takes under runDir, as timm and YOLO number repeated
// experiments: name itself while runDir/name holds no run, else name-N for N one above the highest
// run of that name, so that nothing an earlier run wrote is touched and the newest run has the
// highest number.
func FreshRunName(runDir, name string) string {
	return numberedRun(name, latestRun(runDir, name)+1)
}

// NewestRunName is the run of name that --resume continues: the highest-numbered of name, name-2,
// name-3, ... under runDir that holds a run (name itself when none does).
func NewestRunName(runDir, name string) string {
	return numberedRun(name, latestRun(runDir, name))
}

// RunNameOf returns the run of name (name or name-N) whose checkpoints/ holds the checkpoint path,
// and false when the checkpoint belongs to no such run under runDir (an imported one, another
// recipe's).
func RunNameOf(runDir, name, path string) (string, bool) {
	abs, err1 := filepath.Abs(path)
	root, err2 := filepath.Abs(runDir)
	if err1 != nil || err2 != nil {
		return "", false
	}
	ckptDir := filepath.Dir(abs)
	run := filepath.Dir(ckptDir)
	if filepath.Base(ckptDir) != "checkpoints" || filepath.Dir(run) != root || runNumber(name, filepath.Base(run)) == 0 {
		return "", false
	}
	return filepath.Base(run), true
}
