package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// What a resolved config implies: values derived from several keys, or a key's meaning under auto and
// empty settings, computed here once for every reader (recipe resolves what needs the world).

// YAML renders the resolved config, as written to runs/<name>/config.yaml.
func (c Config) YAML() []byte {
	out, err := yaml.Marshal(c)
	if err != nil {
		panic(err) // a plain struct of scalars always marshals
	}
	return out
}

// Hash identifies the resolved config (used to tie checkpoints to the run that wrote them).
func (c Config) Hash() string {
	sum := sha256.Sum256(c.YAML())
	return hex.EncodeToString(sum[:8])
}

// Dir is the run directory, runs/<name>.
func (c Config) Dir() string { return filepath.Join(c.RunDir, c.Name) }

// Mixing reports whether batches are mixed (mixup or cutmix), which makes the targets soft.
func (a AugmentConfig) Mixing() bool { return a.MixupAlpha > 0 || a.CutmixAlpha > 0 }

// optimizerDefaults are the values −1 stands for, per optimizer (one entry per name of Optimizers); a
// key absent from an optimizer's map does not belong to it.
var optimizerDefaults = map[string]map[string]float64{
	"sgd":        {"momentum": 0.9},
	"adamw":      {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
	"lamb":       {"beta1": 0.9, "beta2": 0.999, "eps": 1e-6},
	"rmsprop_tf": {"rho": 0.9, "momentum": 0.9, "eps": 1e-3},
}

// Resolved returns the config with every −1 hyperparameter replaced by the optimizer's default.
func (o OptimizerConfig) Resolved() OptimizerConfig {
	defs := optimizerDefaults[o.Name]
	for key, field := range o.hyperparameters() {
		if *field == -1 {
			*field = defs[key]
		}
	}
	return o
}

// optimizerHyperparameters are the optional keys, in the order validation reports them.
var optimizerHyperparameters = []string{"momentum", "beta1", "beta2", "eps", "rho"}

// hyperparameters maps the optional keys to their fields.
func (o *OptimizerConfig) hyperparameters() map[string]*float64 {
	return map[string]*float64{"momentum": &o.Momentum, "beta1": &o.Beta1, "beta2": &o.Beta2, "eps": &o.Epsilon, "rho": &o.Rho}
}

// PeakLR is the learning rate at the end of warmup: optimizer.lr, scaled by the global batch when
// optimizer.lr_base_batch is set.
func (c Config) PeakLR() float64 {
	if c.Optimizer.LRBaseBatch <= 0 {
		return c.Optimizer.LR
	}
	return c.Optimizer.LR * float64(c.Data.BatchSize*max(c.Optimizer.AccumulateSteps, 1)) / float64(c.Optimizer.LRBaseBatch)
}

// BestMetric resolves checkpoint.best: the eval metric the best checkpoint is chosen on, or "".
func (c Config) BestMetric() string {
	switch c.Checkpoint.Best {
	case "none":
		return ""
	case "auto", "":
		if c.EMA.Decay > 0 {
			return "ema_top1"
		}
		return "top1"
	}
	return c.Checkpoint.Best
}

// ReplicaBatch is the number of examples each replica's loader yields per step.
func (c Config) ReplicaBatch() int { return c.Data.BatchSize / max(c.Replicas, 1) }

// WarmupLength is the warmup in optimizer steps: schedule.warmup_steps, or warmup_epochs at perEpoch
// optimizer steps per epoch.
func (s ScheduleConfig) WarmupLength(perEpoch float64) int {
	if s.WarmupSteps > 0 {
		return s.WarmupSteps
	}
	// Saturated, not converted past the int range, where it would wrap negative and pass for no warmup.
	w := math.Round(s.WarmupEpochs * perEpoch)
	if !(w < maxWarmup) {
		return maxWarmup
	}
	return max(int(w), 0)
}

// RunWarmup is the warmup a run of total optimizer steps runs: WarmupLength, or, when that is not
// shorter than the run (a quick try, --set steps=40, of a recipe that warms up over epochs), a tenth
// of the run (at least one step), so that the short run still reaches its peak lr and decays from it.
// A pure function of the config and the run's length, so a resumed run and a plot shorten alike.
func (s ScheduleConfig) RunWarmup(perEpoch float64, total int) int {
	w := s.WarmupLength(perEpoch)
	if w > 0 && w >= total {
		return max(1, total/10)
	}
	return w
}

// WarmupNote is the line a run prints when RunWarmup shortens the recipe's warmup; "" otherwise.
func (s ScheduleConfig) WarmupNote(perEpoch float64, total int) string {
	w := s.WarmupLength(perEpoch)
	if got := s.RunWarmup(perEpoch, total); got != w {
		key := "warmup_epochs " + strconv.FormatFloat(s.WarmupEpochs, 'g', -1, 64)
		if s.WarmupSteps > 0 {
			key = "warmup_steps " + strconv.Itoa(s.WarmupSteps)
		}
		return fmt.Sprintf("note: schedule.%s is %d steps, not shorter than this %d-step run:\n"+
			"  warming up over %d steps (a tenth of the run) instead", key, w, total, got)
	}
	return ""
}

// maxWarmup is where WarmupLength saturates: longer than any run (MaxSteps), so CheckScheduleLength
// sees a warmup at least as long as the run.
const maxWarmup = 1 << 52

// SkipsNonFinite reports whether the policy holds back a non-finite step's update (skip, reduce_lr),
// which the step graph then gates.
func (g GuardConfig) SkipsNonFinite() bool {
	return g.NonFinite == GuardSkip || g.NonFinite == GuardReduceLR
}

// DataPaths returns the paths of the train and eval splits of an image source: data.train and
// data.eval when set, else under data.dir: DIR/train and DIR/val (imagefolder, shards), DIR for both
// (cifar10), DIR/train.bin and DIR/val.bin (imagenette-bin).
func (d DataConfig) DataPaths() (train, eval string) {
	train, eval = d.Train, d.Eval
	def := func(p *string, name string) {
		if *p == "" && d.Dir != "" {
			*p = filepath.Join(d.Dir, name)
		}
	}
	switch d.Source {
	case "cifar10":
		def(&train, "")
		def(&eval, "")
	case "imagenette-bin":
		def(&train, "train.bin")
		def(&eval, "val.bin")
	default:
		def(&train, "train")
		def(&eval, "val")
	}
	return train, eval
}
