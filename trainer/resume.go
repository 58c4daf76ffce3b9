package trainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/internal/bounded"
	"github.com/trainer/trainer/internal/echo"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/trainstep"
)

// checkpointConfig returns the config of the run that wrote ckpt: the one in its header, else the run
// directory's config.yaml if its hash is the checkpoint's. ok is false when neither is available.
// Keys the stored config lacks (added to the trainer since) take their defaults.
func checkpointConfig(ckpt *checkpoint.Checkpoint) (cfg config.Config, source string, ok bool, err error) {
	text, source := []byte(ckpt.Header.Config), ckpt.Path
	if len(text) == 0 {
		source = filepath.Join(filepath.Dir(filepath.Dir(ckpt.Path)), "config.yaml")
		text, err = bounded.ReadFile(source, config.MaxRecipeBytes)
		if err != nil {
			return cfg, "", false, nil
		}
		if sum := sha256.Sum256(text); hex.EncodeToString(sum[:8]) != ckpt.Header.ConfigHash {
			return cfg, "", false, nil // a later config: not the one that wrote the checkpoint
		}
	}
	cfg = config.Defaults()
	if err := yaml.Unmarshal(text, &cfg); err != nil {
		return cfg, "", false, fmt.Errorf("config of checkpoint %s (from %s): %w", ckpt.Path, source, err)
	}
	return cfg, source, true, nil
}

// resumeConfig compares the config that wrote ckpt with the session's and returns the accepted
// changes, or an error listing every change that is not on the allow-list (config.Resumable).
func (s *session) resumeConfig(ckpt *checkpoint.Checkpoint) ([]config.Change, error) {
	old, source, ok, err := checkpointConfig(ckpt)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Only a checkpoint at step 0 (`trainer import`, which fine-tuning starts from) may come
		// without its config; a run's checkpoint whose config is lost cannot be checked.
		if ckpt.Header.Step == 0 || ckpt.Header.ConfigHash == s.cfg.Hash() {
			return nil, nil
		}
		return nil, fmt.Errorf("checkpoint %s: written with config hash %s (this config: %s), and neither the "+
			"checkpoint nor %s holds that config, so the changed keys cannot be checked; resume with the original config",
			ckpt.Path, ckpt.Header.ConfigHash, s.cfg.Hash(), filepath.Join(filepath.Dir(filepath.Dir(ckpt.Path)), "config.yaml"))
	}
	changes := config.Changes(old, s.cfg)
	var refused []string
	for _, c := range changes {
		if !config.Resumable(c.Key) {
			refused = append(refused, "  "+c.String())
		}
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("resume from %s: the config differs from the one that wrote it (%s) in keys a resumed "+
			"run cannot change:\n%s\nkeys that may change on resume: %s; to train another recipe from these weights, "+
			"start a new run (--set name=...)", ckpt.Path, source, strings.Join(refused, "\n"), strings.Join(config.ResumableKeys(), ", "))
	}
	return changes, nil
}

// resumeRecord is the metrics.jsonl record of a resume.
func resumeRecord(ckpt *checkpoint.Checkpoint, changes []config.Change, dropped int) map[string]any {
	changed := map[string]any{}
	for _, c := range changes {
		changed[c.Key] = map[string]any{"from": c.From, "to": c.To}
	}
	return map[string]any{"type": "resume", "step": ckpt.Header.Step, "from": ckpt.Path, "changed": changed,
		"dropped_records": dropped}
}

// truncateMetrics rewrites the log at path (atomically) without the records of steps after step,
// which an interrupted run wrote past its last checkpoint and the resumed run writes again, and without
// a torn last line; it returns how many lines it dropped. A missing log is not an error.
func truncateMetrics(path string, step int) (dropped int, err error) {
	data, err := bounded.ReadFile(path, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("metrics log %s: %w", path, err)
	}
	var kept bytes.Buffer
	lines := bytes.SplitAfter(data, []byte("\n"))
	last := len(lines) - 1 // the last line that holds anything: the only one a crash can tear
	for last > 0 && len(bytes.TrimSpace(lines[last])) == 0 {
		last--
	}
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var record struct {
			Step *float64 `json:"step"`
		}
		damaged := !bytes.HasSuffix(line, []byte("\n")) || json.Unmarshal(line, &record) != nil
		if damaged && i != last {
			// Not what an interrupted append leaves: someone's edit or a disk fault, reported rather
			// than silently deleted with the records after the checkpoint.
			return 0, fmt.Errorf("metrics log %s: line %d is not a JSON record (%s), and it is not the last line, "+
				"which a crash may leave torn: repair or delete that line, then resume", path, i+1, echo.Value(string(bytes.TrimSpace(line))))
		}
		if damaged || (record.Step != nil && *record.Step > float64(step)) {
			dropped++
			continue
		}
		kept.Write(line)
	}
	if dropped == 0 {
		return 0, nil
	}
	if err := atomicfile.Write(path, kept.Bytes()); err != nil {
		return 0, fmt.Errorf("metrics log %s: %w", path, err)
	}
	return dropped, nil
}

// resumePoint loads the checkpoint to continue from and checks it belongs to this net: from, or the
// newest periodic checkpoint in ckptDir, or, when a run was stopped before its first periodic
// checkpoint, its best.tckpt (the complete state at its best eval).
func (s *session) resumePoint(ckptDir, from string) (*checkpoint.Checkpoint, error) {
	var ckpt *checkpoint.Checkpoint
	var err error
	if from != "" {
		ckpt, err = checkpoint.Load(from)
	} else {
		var ok bool
		ckpt, ok, err = checkpoint.Latest(ckptDir)
		if err == nil && !ok {
			best := filepath.Join(ckptDir, checkpoint.BestName)
			if _, statErr := os.Stat(best); statErr != nil {
				return nil, fmt.Errorf("--resume: no checkpoint in %s", ckptDir)
			}
			ckpt, err = checkpoint.Load(best)
		}
	}
	if err != nil {
		return nil, err
	}
	if ckpt.Header.Net != s.cfg.Net.Label() {
		return nil, fmt.Errorf("checkpoint %s: net %q, the config trains %q", ckpt.Path, ckpt.Header.Net, s.cfg.Net.Label())
	}
	if err := s.net.Spec.CheckRevision(ckpt.Path, ckpt.Header.NetRevision); err != nil {
		return nil, err
	}
	return ckpt, nil
}

// load makes the checkpoint the source of every variable the graphs ask for.
func (s *session) load(ckpt *checkpoint.Checkpoint) {
	s.ctx.SetLoader(ckpt)
	s.loaded = true
	s.emaFresh = true
	for name := range ckpt.Tensors {
		if strings.HasPrefix(name, trainstep.EMAScope+"/") {
			s.emaFresh = false
			break
		}
	}
}

// imported reports whether ckpt holds weights only, as `trainer import` writes them: step 0 and no
// config. Fine-tuning from it starts the optimizer, the EMA and the RNG afresh.
func imported(ckpt *checkpoint.Checkpoint) bool {
	return ckpt.Header.Step == 0 && ckpt.Header.Config == ""
}

// checkComplete refuses a checkpoint that lacks a variable the session's train step keeps (the net's
// weights and statistics, the optimizer's slots, the EMA shadows the config asks for, the RNG state),
// or holds one in another shape: continuing from it would start that state afresh, and the run would
// no longer be the one it continues. It also refuses, on resume, a tensor the step does not keep. An
// imported checkpoint needs only the net's variables; with modelOnly (eval) so does any.
func (s *session) checkComplete(ckpt *checkpoint.Checkpoint, modelOnly bool) error {
	want, err := trainstep.Variables(s.backend, s.cfg, s.net)
	if err != nil {
		return err
	}
	modelOnly = modelOnly || imported(ckpt)
	var missing, reshaped []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if modelOnly && !strings.HasPrefix(name, "/"+graphs.ModelScope+"/") {
			continue
		}
		t, ok := ckpt.Tensors[name]
		switch {
		case !ok:
			missing = append(missing, name)
		case !t.Shape().Equal(want[name]):
			reshaped = append(reshaped, fmt.Sprintf("%s is %s, %s needs %s", name, t.Shape(), s.cfg.Net.Label(), want[name]))
		}
	}
	var extra []string
	if !modelOnly {
		// A tensor the step does not keep would never be loaded, and every checkpoint the run writes
		// would drop it: refused here, before training, not at the first write.
		for _, name := range slices.Sorted(maps.Keys(ckpt.Tensors)) {
			if _, ok := want[name]; !ok {
				extra = append(extra, name)
			}
		}
	}
	var problems []string
	if len(extra) > 0 {
		problems = append(problems, fmt.Sprintf("it holds %d tensors this config does not keep (another optimizer, EMA or net?): %s",
			len(extra), echo.List(extra, 10)))
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("it lacks %d of the %d tensors this config keeps: %s", len(missing),
			len(want), echo.List(missing, 10)))
	}
	if len(reshaped) > 0 {
		problems = append(problems, echo.List(reshaped, 10))
	}
	if len(problems) == 0 {
		return nil
	}
	what := "is incomplete for this config"
	if len(missing) == 0 && len(reshaped) == 0 {
		what = "does not match this config"
	}
	return fmt.Errorf("checkpoint %s %s: %s", ckpt.Path, what, strings.Join(problems, "; "))
}

// ResumeConfig is the config a resumed run continues with: its run directory's config.yaml (the
// resolved config the run was last started with) with only overrides, the user's explicit --set
// keys, applied again. given, the recipe file at recipePath loaded with the same overrides, locates
// the run (its name and run_dir are kept) and is otherwise only compared: where it now differs from
// the run's config in a key a resume may change (epochs, say), the run keeps its own value and a note
// says how to change it; where it differs in any other key the resume is refused, as the recipe no
// longer describes the run. Without a config.yaml (--resume-from into a new run directory) the
// given config is the config, compared with the checkpoint's when the run opens.
func ResumeConfig(recipePath string, given config.Config, overrides []string) (cfg config.Config, notes []string, err error) {
	stored := filepath.Join(given.Dir(), "config.yaml")
	if _, err := os.Stat(stored); errors.Is(err, fs.ErrNotExist) {
		return given, nil, nil
	}
	cfg, err = recipe.Load(stored, overrides)
	if err != nil {
		return cfg, nil, fmt.Errorf("resuming with the run's own config: %w", err)
	}
	cfg.Name, cfg.RunDir = given.Name, given.RunDir
	var refused []string
	for _, c := range config.Changes(cfg, given) {
		switch {
		case config.Resumable(c.Key):
			notes = append(notes, fmt.Sprintf("%s now says %s: %v; the run keeps its %v (--set %s=%v to change it)",
				recipePath, c.Key, c.To, c.From, c.Key, c.To))
		default:
			refused = append(refused, fmt.Sprintf("  %s: %v in the run, %v in the recipe", c.Key, c.From, c.To))
		}
	}
	if len(refused) > 0 {
		return cfg, nil, fmt.Errorf("resume: %s differs from the run's %s in keys a resumed run cannot change:\n%s\n"+
			"a resumed run continues with its own config: restore the recipe, or train it as a new run (--set name=...)",
			recipePath, stored, strings.Join(refused, "\n"))
	}
	return cfg, notes, nil
}
