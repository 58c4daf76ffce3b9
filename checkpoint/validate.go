package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A header passes its checksum only by being what a writer wrote, so a value no writer could have
// produced means a file built or edited by hand, or a writer bug: it is refused by name rather
// than trusted (a negative step used to crash the resume, an absurd one to name the next checkpoint).

// MaxStep is the largest step a checkpoint holds: FileName has nine digits for it, and a larger
// step would break the name order that --resume relies on.
const MaxStep = 999_999_999

// maxMicroBatchesPerStep bounds epoch by step: a run's epoch is step·k/batches per epoch, with k =
// optimizer.accumulate_steps at most 1024 (config validates it) and at least one batch an epoch.
const maxMicroBatchesPerStep = 1024

// BestMetrics are the metrics a best checkpoint may be chosen on (config's checkpoint.best, resolved).
var BestMetrics = []string{"top1", "ema_top1"}

var (
	// versionPattern is a release version as trainer.Version writes it ("0.1.0", "1.2.0-rc1").
	versionPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)
	// netPattern is a registered net's name (graphs.Get).
	netPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	// hashPattern is config.Config.Hash: the first 8 bytes of a SHA-256, in hex.
	hashPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)
	// fileNamePattern is a periodic checkpoint's name, FileName's.
	fileNamePattern = regexp.MustCompile(`^ckpt-([0-9]{9})` + regexp.QuoteMeta(ext) + `$`)
)

// maxNameBytes bounds a tensor name (a GoMLX scope and variable name).
const maxNameBytes = 1024

// ConfigHash is the config_hash a header carries for a resolved config's YAML text (config.Config.Hash).
func ConfigHash(configYAML string) string {
	sum := sha256.Sum256([]byte(configYAML))
	return hex.EncodeToString(sum[:8])
}

// Validate checks every header field against what a writer (trainer run, trainer import) produces;
// the error names the field, the value and what was expected. Save refuses an invalid header, and
// Load a file whose header is invalid.
func (h Header) Validate() error {
	switch {
	case !versionPattern.MatchString(h.TrainerVersion):
		return fmt.Errorf("trainer_version %q: expected a release version such as 0.1.0", h.TrainerVersion)
	case !netPattern.MatchString(h.Net):
		return fmt.Errorf("net %q: expected a registered net's name (letters, digits, '.', '_', '-'; at most 64)", h.Net)
	case h.NetRevision < 0 || h.NetRevision > 1000:
		return fmt.Errorf("net_revision %d: expected 0 to 1000", h.NetRevision)
	case h.ConfigHash != "" && !hashPattern.MatchString(h.ConfigHash):
		return fmt.Errorf("config_hash %q: expected 16 lower-case hex digits", h.ConfigHash)
	case h.Config != "" && !utf8.ValidString(h.Config):
		return fmt.Errorf("config: not UTF-8 text")
	case h.Config != "" && h.ConfigHash != ConfigHash(h.Config):
		return fmt.Errorf("config_hash %q is not the hash of the config it carries (%s)", h.ConfigHash, ConfigHash(h.Config))
	case h.Step < 0 || h.Step > MaxStep:
		return fmt.Errorf("step %d: expected 0 to %d", h.Step, MaxStep)
	case h.Epoch < 0 || h.Epoch > h.Step*maxMicroBatchesPerStep:
		return fmt.Errorf("epoch %d at step %d: expected 0 to %d (an optimizer step is at most %d micro-batches)",
			h.Epoch, h.Step, h.Step*maxMicroBatchesPerStep, maxMicroBatchesPerStep)
	case h.LRScale != 0 && !validLRScale(h.LRScale):
		return fmt.Errorf("lr_scale %v: expected 1 or a power of two below it (guard.nonfinite: reduce_lr halves it), or no lr_scale",
			h.LRScale)
	case h.Metric == "" && h.Score != 0:
		return fmt.Errorf("score %v without a metric", h.Score)
	case h.Metric != "" && !slices.Contains(BestMetrics, h.Metric):
		return fmt.Errorf("metric %q: expected one of %s", h.Metric, strings.Join(BestMetrics, ", "))
	case h.Metric != "" && !(h.Score >= 0 && h.Score <= 1):
		return fmt.Errorf("score %v of %s: expected an accuracy in [0, 1]", h.Score, h.Metric)
	}
	for _, rec := range h.Tensors {
		if err := validTensorName(rec.Name); err != nil {
			return fmt.Errorf("tensor %q: %w", rec.Name, err)
		}
	}
	return nil
}

// validLRScale reports whether s is 2^-n for an integer n >= 0: the only factors reduce_lr, which
// halves, can reach.
func validLRScale(s float64) bool {
	frac, _ := math.Frexp(s)
	return s > 0 && s <= 1 && frac == 0.5
}

// validTensorName checks a variable's scope-and-name as GoMLX forms it: "/scope/.../name".
func validTensorName(name string) error {
	switch {
	case len(name) > maxNameBytes:
		return fmt.Errorf("name of %d bytes, expected at most %d", len(name), maxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("name is not UTF-8")
	case !strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//"):
		return fmt.Errorf("expected a scope and name such as /model/fc/weights")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("control character %U in the name", r)
		}
	}
	return nil
}

// checkFileName refuses a periodic checkpoint whose name is not its header's step: Save names every
// file by its step, and --resume picks the newest by name.
func checkFileName(path string, step int) error {
	m := fileNamePattern.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return nil // best.tckpt, an imported file: any name
	}
	if named, _ := strconv.Atoi(m[1]); named != step {
		return fmt.Errorf("named for step %d but its header says step %d", named, step)
	}
	return nil
}
