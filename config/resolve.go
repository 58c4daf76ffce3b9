package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/pjrt"
)

// What a resolved config implies: values derived from several keys, or a key's meaning under auto and
// empty settings, computed here once for every reader.

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

// Options resolves the net options for graphs.
func (n NetConfig) Options(seed int) (graphs.Options, error) {
	padding, err := graphs.ParsePadding(n.Padding)
	if err != nil {
		return graphs.Options{}, fmt.Errorf("net.padding: %w", err)
	}
	gelu, err := graphs.ParseGELU(n.GELU)
	if err != nil {
		return graphs.Options{}, fmt.Errorf("net.gelu: %w", err)
	}
	opts := graphs.Options{
		NumClasses: n.NumClasses, Width: n.Width, ImageSize: n.ImageSize, Precision: n.Precision,
		Padding: padding, GELU: gelu, BNEpsilon: n.BNEpsilon, BNDecay: n.BNDecay, Seed: uint64(seed),
	}
	if n.Dropout >= 0 {
		rate := n.Dropout
		opts.DropoutRate = &rate
	}
	if n.DropPath >= 0 {
		rate := n.DropPath
		opts.DropPathRate = &rate
	}
	return opts, nil
}

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

// maxWarmup is where WarmupLength saturates: longer than any run (MaxSteps), so CheckScheduleLength
// sees a warmup at least as long as the run.
const maxWarmup = 1 << 52

// SkipsNonFinite reports whether the policy holds back a non-finite step's update (skip, reduce_lr),
// which the step graph then gates.
func (g GuardConfig) SkipsNonFinite() bool {
	return g.NonFinite == GuardSkip || g.NonFinite == GuardReduceLR
}

// BadInput sets the loader's policy for bad records from data.on_bad_record and data.max_image_pixels.
func (d DataConfig) BadInput(opts *data.LoaderOptions) {
	opts.SkipBadRecords = d.OnBadRecord == BadRecordSkip
	opts.MaxImagePixels = int64(d.MaxImagePixels)
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

// Normalisation returns data.mean and data.std, or the source's statistics when they are empty.
func (d DataConfig) Normalisation() (mean, std []float32) {
	m, s := d.Mean, d.Std
	if len(m) == 0 {
		switch d.Source {
		case "mnist", "fashion-mnist":
			m, s = []float64{0.1307}, []float64{0.3081}
		case "cifar10":
			m, s = []float64{0.4914, 0.4822, 0.4465}, []float64{0.2470, 0.2435, 0.2616}
		default:
			m, s = data.ImageNetMean, data.ImageNetStd
		}
	}
	for i := range m {
		mean, std = append(mean, float32(m[i])), append(std, float32(s[i]))
	}
	return mean, std
}

// NormalizeOnDevice resolves data.device_normalize for the training or the eval batches: whether they
// cross to the device as uint8 pixels that the graph normalises (trainstep.NormalizePixels). auto is
// true on the xla backends, where it cuts the bytes sent per step by four, and false on the pure-Go
// backend, where host and device share the memory and the graph's lookup costs more than the host's
// (docs/data.md has the measurements); under auto, training batches with random erasing or
// mixup/cutmix, which need the normalised floats on the host, stay float32 (eval still gets uint8).
func (c Config) NormalizeOnDevice(train bool) bool {
	a := c.Data.Augment
	switch c.Data.DeviceNormalize {
	case "true":
		return true // Validate refuses it with erasing or mixing
	case "false":
		return false
	}
	if train && (a.RandomErasing > 0 || a.Mixing()) {
		return false
	}
	spec, err := pjrt.ParseConfig(c.Backend)
	return err == nil && spec.Backend == "xla"
}
