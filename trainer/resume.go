package trainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/internal/atomicfile"
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
