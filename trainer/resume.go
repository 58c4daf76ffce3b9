package trainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/trainstep"
)

// checkpointConfig returns the config of the run that wrote ckpt: the one in its header, else the run
// directory's config.yaml if its hash is the checkpoint's. ok is false when neither is available.
// Keys the stored config lacks (added to the trainer since) take their defaults.
func checkpointConfig(ckpt *checkpoint.Checkpoint) (cfg config.Config, source string, ok bool, err error) {
	text, source := []byte(ckpt.Header.Config), ckpt.Path
	if len(text) == 0 {
		source = filepath.Join(filepath.Dir(filepath.Dir(ckpt.Path)), "config.yaml")
		text, err = os.ReadFile(source)
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
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("metrics log %s: %w", path, err)
	}
	var kept bytes.Buffer
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var record struct {
			Step *float64 `json:"step"`
		}
		if !bytes.HasSuffix(line, []byte("\n")) || json.Unmarshal(line, &record) != nil ||
			(record.Step != nil && *record.Step > float64(step)) {
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

// resumePoint loads the checkpoint to continue from and checks it belongs to this net.
func (s *session) resumePoint(ckptDir, from string) (*checkpoint.Checkpoint, error) {
	var ckpt *checkpoint.Checkpoint
	var err error
	if from != "" {
		ckpt, err = checkpoint.Load(from)
	} else {
		var ok bool
		ckpt, ok, err = checkpoint.Latest(ckptDir)
		if err == nil && !ok {
			return nil, fmt.Errorf("--resume: no checkpoint in %s", ckptDir)
		}
	}
	if err != nil {
		return nil, err
	}
	if ckpt.Header.Net != s.cfg.Net.Name {
		return nil, fmt.Errorf("checkpoint %s: net %q, the config trains %q", ckpt.Path, ckpt.Header.Net, s.cfg.Net.Name)
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

// runDir is the run directory opened for training: where the run starts and its metrics log.
type runDir struct {
	startStep int
	resumed   *checkpoint.Checkpoint // the checkpoint continued from, if any
	metrics   *metricsLog
}

// openRunDir prepares cfg.Dir() for the run: it resumes from a checkpoint when opts ask (loading it and
// printing what changed), refuses to train over another run's checkpoints otherwise, writes the
// resolved config and opens the metrics log without the records past the starting step.
func (s *session) openRunDir(opts RunOptions, out io.Writer) (rd runDir, err error) {
	dir := s.cfg.Dir()
	ckptDir := filepath.Join(dir, "checkpoints")
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
		rd.resumed, rd.startStep = ckpt, ckpt.Header.Step
		s.load(ckpt)
		fmt.Fprintf(out, "resuming %s from %s (step %d)\n", s.cfg.Name, ckpt.Path, rd.startStep)
		for _, c := range accepted {
			fmt.Fprintf(out, "config change accepted on resume: %s\n", c)
		}
	default:
		if paths, _ := checkpoint.List(ckptDir); len(paths) > 0 {
			return rd, fmt.Errorf("run directory %s already holds checkpoints: pass --resume to continue it, "+
				"or choose another run name (--set name=...), or delete the directory", dir)
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
			rd.metrics.Close()
			return rd, err
		}
	}
	return rd, nil
}
