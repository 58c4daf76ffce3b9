package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/graphs"
)

// Config is one run, resolved from a YAML recipe plus --set overrides. Every key, its default and its
// meaning are listed in Defaults and documented in docs/configs.md.
type Config struct {
	Name       string           `yaml:"name"`
	Backend    string           `yaml:"backend"`
	Replicas   int              `yaml:"replicas"` // data-parallel devices (trainer/replicas.go)
	Seed       int              `yaml:"seed"`
	Epochs     int              `yaml:"epochs"`
	Steps      int              `yaml:"steps"`
	RunDir     string           `yaml:"run_dir"`
	Net        NetConfig        `yaml:"net"`
	Data       DataConfig       `yaml:"data"`
	Optimizer  OptimizerConfig  `yaml:"optimizer"`
	Schedule   ScheduleConfig   `yaml:"schedule"`
	EMA        EMAConfig        `yaml:"ema"`
	Loss       LossConfig       `yaml:"loss"`
	Eval       EvalConfig       `yaml:"eval"`
	Checkpoint CheckpointConfig `yaml:"checkpoint"`
	Log        LogConfig        `yaml:"log"`
	Guard      GuardConfig      `yaml:"guard"` // non-finite loss/gradient policy (trainer/guard.go)
}

// NetConfig picks a registered net, its size and the options every net takes.
type NetConfig struct {
	Name       string  `yaml:"name"`
	Width      float64 `yaml:"width"`
	NumClasses int     `yaml:"num_classes"`
	// ImageSize is the square input resolution; 0: the net's default.
	ImageSize int `yaml:"image_size"`
	// Precision is the compute dtype: float32 or bfloat16 (float32 master weights).
	Precision string `yaml:"precision"`
	// Dropout before the classifier and DropPath (stochastic depth, the last block's rate); −1: the
	// reference's default.
	Dropout  float64 `yaml:"dropout"`
	DropPath float64 `yaml:"drop_path"`
	// Padding of strided convolutions: "" (the reference's), symmetric or same (XLA/TF phase).
	Padding string `yaml:"padding"`
	// GELU form: "" (the reference's), erf or tanh.
	GELU string `yaml:"gelu"`
	// BNEpsilon and BNDecay override the net's BatchNorm numerics when > 0 (decay form: 0.9 is
	// PyTorch's momentum 0.1).
	BNEpsilon float64 `yaml:"bn_eps"`
	BNDecay   float64 `yaml:"bn_decay"`
}

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

// DataConfig names the dataset, how it is batched and, for image sources, augmented.
type DataConfig struct {
	// Source: mnist, fashion-mnist (idx files in Dir), imagefolder, shards, cifar10 or imagenette-bin.
	Source string `yaml:"source"`
	Dir    string `yaml:"dir"`
	// Train and Eval are the splits' paths for the image sources; empty: under Dir (DataPaths).
	Train         string `yaml:"train"`
	Eval          string `yaml:"eval"`
	BatchSize     int    `yaml:"batch_size"`
	EvalBatchSize int    `yaml:"eval_batch_size"`
	// Mean and Std normalise [0,1] pixels: one value for every channel or one per channel; empty:
	// the source's (MNIST's for mnist and fashion-mnist, CIFAR-10's, ImageNet's for the others).
	Mean []float64 `yaml:"mean"`
	Std  []float64 `yaml:"std"`
	// Workers decode in parallel (0: one per core); Prefetch batches are kept ready (0: 2).
	Workers  int `yaml:"workers"`
	Prefetch int `yaml:"prefetch"`
	// EvalCropPct: eval resizes the shorter side to image_size/eval_crop_pct, then center-crops.
	EvalCropPct float64 `yaml:"eval_crop_pct"`
	// EvalImageSize evaluates at another resolution than net.image_size (RSB-A3 trains at 160 and
	// evaluates at 224); 0: the training size. Convolutional nets only.
	EvalImageSize int           `yaml:"eval_image_size"`
	Augment       AugmentConfig `yaml:"augment"`
	// DeviceNormalize: true sends the batches to the device as uint8 pixels and normalises them in the
	// step and eval graphs (a quarter of the bytes, the same floats); false normalises on the host;
	// auto is true on xla backends and false on the pure-Go one (trainer/data.go, docs/data.md).
	DeviceNormalize Switch `yaml:"device_normalize"`
}

// Switch is a key that takes auto, true or false (YAML booleans or strings).
type Switch string

// AugmentConfig is the training augmentation of the image sources (off by default).
type AugmentConfig struct {
	// RandomResizedCropScale [min, max] turns RandomResizedCrop on (torchvision: [0.08, 1]); empty: off,
	// training then resizes and center-crops as eval does.
	RandomResizedCropScale []float64 `yaml:"random_resized_crop_scale"`
	RandomResizedCropRatio []float64 `yaml:"random_resized_crop_ratio"`
	// Interpolation of every resize: bilinear or bicubic.
	Interpolation string `yaml:"interpolation"`
	// HFlip is the probability of a horizontal flip.
	HFlip float64 `yaml:"hflip"`
	// MixupAlpha and CutmixAlpha are the α of timm's batch-level mixup and cutmix (0: off); either on
	// gives the step soft targets with loss.label_smoothing folded in. MixupProb is the probability
	// that a batch is mixed, MixupSwitchProb that of cutmix rather than mixup when both are on.
	MixupAlpha      float64 `yaml:"mixup_alpha"`
	CutmixAlpha     float64 `yaml:"cutmix_alpha"`
	MixupProb       float64 `yaml:"mixup_prob"`
	MixupSwitchProb float64 `yaml:"mixup_switch_prob"`
	// RandomErasing is the probability of timm's random erasing of one box (0: off), filled as
	// RandomErasingMode says: pixel (normal noise per value), rand (per channel) or const (zeros).
	RandomErasing     float64 `yaml:"random_erasing"`
	RandomErasingMode string  `yaml:"random_erasing_mode"`
	// RandAugment is timm's RandAugment config string, e.g. rand-m9-mstd0.5-inc1 (empty: off), run
	// after the crop and flip, before normalisation.
	RandAugment string `yaml:"rand_augment"`
	// AutoAugment is torchvision's AutoAugment policy (imagenet; empty: off), run where RandAugment
	// runs; exclusive with it. AutoAugmentInterpolation samples its geometric ops nearest (the
	// transform's default) or bilinear (torchvision's references/classification/train.py).
	AutoAugment              string `yaml:"auto_augment"`
	AutoAugmentInterpolation string `yaml:"auto_augment_interpolation"`
	// RepeatedAug k > 1 shows each training image k times per epoch, each copy augmented on its own and
	// dealt to another replica (timm's repeated augmentation, DeiT's recipe); an epoch keeps N images.
	RepeatedAug int `yaml:"repeated_aug"`
}

// Mixing reports whether batches are mixed (mixup or cutmix), which makes the targets soft.
func (a AugmentConfig) Mixing() bool { return a.MixupAlpha > 0 || a.CutmixAlpha > 0 }

// OptimizerConfig is the update law, its hyperparameters and what happens to the gradient before it
// (clipping, accumulation). Hyperparameters at −1 take the chosen optimizer's default (Resolved); one
// that the optimizer does not have must stay at −1 (false for the flags), so a recipe cannot carry a
// setting that silently does nothing.
type OptimizerConfig struct {
	Name string  `yaml:"name"`
	LR   float64 `yaml:"lr"`
	// LRBaseBatch, when > 0, makes LR a rate per LRBaseBatch images: the peak is
	// LR × global batch / LRBaseBatch, the global batch being data.batch_size × AccumulateSteps.
	LRBaseBatch int     `yaml:"lr_base_batch"`
	Momentum    float64 `yaml:"momentum"`
	Nesterov    bool    `yaml:"nesterov"`
	Beta1       float64 `yaml:"beta1"`
	Beta2       float64 `yaml:"beta2"`
	Epsilon     float64 `yaml:"eps"`
	Rho         float64 `yaml:"rho"`
	LROutside   bool    `yaml:"lr_outside"`
	WeightDecay float64 `yaml:"weight_decay"`
	// ClipGradNorm scales the gradient by min(1, c/(‖g‖+1e−6)), one norm over every parameter; 0: off.
	ClipGradNorm float64 `yaml:"clip_grad_norm"`
	// AccumulateSteps k: each optimizer step averages the gradients of k micro-batches of data.batch_size.
	AccumulateSteps int `yaml:"accumulate_steps"`
}

// optimizerDefaults are the values −1 stands for, per optimizer; a key absent from an optimizer's map
// does not belong to it.
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

// ScheduleConfig shapes the learning rate over the run; every position is counted in optimizer steps
// (an accumulation of k micro-batches is one step), epochs being fractions of steps per epoch.
type ScheduleConfig struct {
	Name string `yaml:"name"`
	// Linear warmup from WarmupStartLR to the peak over WarmupEpochs or WarmupSteps (at most one set).
	WarmupEpochs  float64 `yaml:"warmup_epochs"`
	WarmupSteps   int     `yaml:"warmup_steps"`
	WarmupStartLR float64 `yaml:"warmup_start_lr"`
	// MinLR is the cosine's floor.
	MinLR float64 `yaml:"min_lr"`
	// DecayRate and DecayEpochs: step multiplies by the rate every DecayEpochs; exponential is
	// rate^(epoch/DecayEpochs) (floored exponent with Staircase); multistep multiplies by the rate at
	// each of Milestones (epochs).
	DecayRate   float64   `yaml:"decay_rate"`
	DecayEpochs float64   `yaml:"decay_epochs"`
	Staircase   bool      `yaml:"staircase"`
	Milestones  []float64 `yaml:"milestones"`
}

// EMAConfig is the exponential moving average of the weights (and of the BatchNorm statistics).
type EMAConfig struct {
	// Decay is the EMA's decay; 0: no EMA.
	Decay float64 `yaml:"decay"`
	// Warmup caps the decay at (1+t)/(10+t) for optimizer step t, as TensorFlow's num_updates does.
	Warmup bool `yaml:"warmup"`
}

// LossConfig is the training loss.
type LossConfig struct {
	// Name: softmax_ce (softmax cross-entropy) or bce (binary cross-entropy with logits, per class).
	Name           string  `yaml:"name"`
	LabelSmoothing float64 `yaml:"label_smoothing"`
	// BCEDivisor: elements divides the summed BCE by batch × classes (timm, RSB-A3); batch by batch.
	BCEDivisor string `yaml:"bce_divisor"`
	// BCETargetThreshold, when > 0, binarises the (smoothed) targets as target > threshold (timm).
	BCETargetThreshold float64 `yaml:"bce_target_threshold"`
}

// EvalConfig says when to evaluate.
type EvalConfig struct {
	EveryEpochs int `yaml:"every_epochs"`
}

// CheckpointConfig says when to checkpoint and how many to keep.
type CheckpointConfig struct {
	EverySteps int `yaml:"every_steps"`
	Keep       int `yaml:"keep"`
	// Best keeps checkpoints/best.tckpt at the best eval score of this metric: auto (ema_top1 when
	// EMA is on, else top1), top1, ema_top1 or none.
	Best string `yaml:"best"`
}

// bestMetric resolves checkpoint.best: the eval metric the best checkpoint is chosen on, or "".
func (c Config) bestMetric() string {
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

// LogConfig says how often a train record goes to metrics.jsonl and the terminal.
type LogConfig struct {
	EverySteps int `yaml:"every_steps"`
}

// Defaults is the one place where every key's default lives.
func Defaults() Config {
	return Config{
		Name:     "",
		Backend:  "go",
		Replicas: 1,
		Seed:     1,
		Epochs:   1,
		Steps:    0,
		RunDir:   "runs",
		Net: NetConfig{Name: "mnist_cnn", Width: 1, NumClasses: 0, Precision: "float32",
			Dropout: -1, DropPath: -1},
		Data: DataConfig{Source: "mnist", Dir: "", BatchSize: 128, EvalBatchSize: 1000, EvalCropPct: 0.875, DeviceNormalize: "auto",
			Augment: AugmentConfig{RandomResizedCropRatio: []float64{3.0 / 4, 4.0 / 3}, Interpolation: "bilinear",
				MixupProb: 1, MixupSwitchProb: 0.5, RandomErasingMode: "pixel"}},
		Optimizer: OptimizerConfig{Name: "sgd", LR: 0.1, Momentum: -1, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1,
			AccumulateSteps: 1},
		Schedule:   ScheduleConfig{Name: "constant"},
		EMA:        EMAConfig{Decay: 0, Warmup: true},
		Loss:       LossConfig{Name: "softmax_ce", BCEDivisor: "elements"},
		Eval:       EvalConfig{EveryEpochs: 1},
		Checkpoint: CheckpointConfig{EverySteps: 500, Keep: 3, Best: "auto"},
		Log:        LogConfig{EverySteps: 20},
		Guard:      GuardConfig{NonFinite: GuardStop},
	}
}

// LoadConfig reads a YAML recipe through viper, applies "key=value" overrides, and returns the
// validated config; every problem is reported with the file (or --set), the key and what was expected.
func LoadConfig(path string, overrides []string) (Config, error) {
	v := viper.New()
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	fromSet := map[string]bool{}
	for _, o := range overrides {
		key, raw, ok := strings.Cut(o, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if !ok || key == "" {
			return Config{}, fmt.Errorf("--set %q: expected key=value, e.g. --set optimizer.lr=0.05", o)
		}
		var value any
		if err := yaml.Unmarshal([]byte(raw), &value); err != nil {
			return Config{}, fmt.Errorf("--set %s: cannot parse value %q: %v", key, raw, err)
		}
		v.Set(key, value)
		fromSet[key] = true
	}
	cfg := Defaults()
	source := func(key string) string {
		if fromSet[key] {
			return "--set " + key
		}
		return path + ": " + key
	}
	if err := decode(reflect.ValueOf(&cfg).Elem(), v.AllSettings(), "", source); err != nil {
		return Config{}, err
	}
	if cfg.Name == "" {
		cfg.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// decode copies settings into the struct dst, strictly: unknown keys and wrong types are errors.
func decode(dst reflect.Value, settings map[string]any, prefix string, source func(string) string) error {
	fields := map[string]reflect.Value{}
	var names []string
	for i := range dst.NumField() {
		tag := dst.Type().Field(i).Tag.Get("yaml")
		fields[tag] = dst.Field(i)
		names = append(names, tag)
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		key := prefix + k
		field, ok := fields[k]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown key; expected one of: %s", source(key), joinPrefixed(prefix, names)))
			continue
		}
		if err := setField(field, settings[k], key, source); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func joinPrefixed(prefix string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return strings.Join(out, ", ")
}

// setField converts one YAML value into the field's type without guessing: an int field takes only
// integral numbers, a string field only strings, and so on.
func setField(field reflect.Value, value any, key string, source func(string) string) error {
	bad := func(want string) error {
		return fmt.Errorf("%s: expected %s, got %T %v", source(key), want, value, value)
	}
	switch field.Kind() {
	case reflect.Struct:
		m, ok := value.(map[string]any)
		if !ok {
			return bad("a mapping of keys")
		}
		return decode(field, m, key+".", source)
	case reflect.String:
		s, ok := value.(string)
		if field.Type() == reflect.TypeOf(Switch("")) {
			if b, isBool := value.(bool); isBool {
				s, ok = fmt.Sprint(b), true // device_normalize: true
			}
			if !ok {
				return bad("auto, true or false")
			}
		}
		if !ok {
			return bad("a string")
		}
		field.SetString(s)
	case reflect.Bool:
		b, ok := value.(bool)
		if !ok {
			return bad("true or false")
		}
		field.SetBool(b)
	case reflect.Int:
		switch n := value.(type) {
		case int:
			field.SetInt(int64(n))
		case int64:
			field.SetInt(n)
		case float64:
			if n != float64(int64(n)) {
				return bad("an integer")
			}
			field.SetInt(int64(n))
		default:
			return bad("an integer")
		}
	case reflect.Float64:
		switch n := value.(type) {
		case int:
			field.SetFloat(float64(n))
		case int64:
			field.SetFloat(float64(n))
		case float64:
			field.SetFloat(n)
		default:
			return bad("a number")
		}
	case reflect.Slice:
		if field.Type().Elem().Kind() != reflect.Float64 {
			return fmt.Errorf("%s: field type %s not supported by the config decoder", source(key), field.Type())
		}
		list, ok := value.([]any)
		switch value.(type) {
		case int, int64, float64: // a single number is a list of one (data.mean: 0.1307)
			list, ok = []any{value}, true
		}
		if !ok {
			return bad("a list of numbers")
		}
		out := make([]float64, len(list))
		for i, item := range list {
			switch n := item.(type) {
			case int:
				out[i] = float64(n)
			case int64:
				out[i] = float64(n)
			case float64:
				out[i] = n
			default:
				return bad("a list of numbers")
			}
		}
		field.Set(reflect.ValueOf(out))
	default:
		return fmt.Errorf("%s: field kind %s not supported by the config decoder", source(key), field.Kind())
	}
	return nil
}

// Validate checks ranges and names; each error names the key and what was expected.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
		}
	}
	oneOf := func(value, key string, allowed ...string) {
		for _, a := range allowed {
			if value == a {
				return
			}
		}
		errs = append(errs, fmt.Errorf("%s: got %q, expected one of: %s", key, value, strings.Join(allowed, ", ")))
	}
	check(c.Name != "" && !strings.ContainsAny(c.Name, `/\`) && c.Name != "." && c.Name != "..",
		"name", "got %q, expected a plain name usable as a directory", c.Name)
	check(c.Backend != "", "backend", "expected a backend: go, xla:cpu, xla:cuda, xla:tpu or a plugin path")
	check(c.Seed >= 0, "seed", "got %d, expected >= 0", c.Seed)
	check(c.Epochs >= 0, "epochs", "got %d, expected >= 0", c.Epochs)
	check(c.Steps >= 0, "steps", "got %d, expected >= 0 (0: run whole epochs)", c.Steps)
	check(c.Epochs > 0 || c.Steps > 0, "epochs", "epochs and steps are both 0: nothing to train")
	check(c.RunDir != "", "run_dir", "expected a directory")
	if _, err := graphs.Get(c.Net.Name); err != nil {
		errs = append(errs, fmt.Errorf("net.name: %v", err))
	}
	check(c.Net.Width > 0 && c.Net.Width <= 16, "net.width", "got %g, expected in (0, 16]", c.Net.Width)
	check(c.Net.NumClasses >= 0, "net.num_classes", "got %d, expected >= 0 (0: the net's default)", c.Net.NumClasses)
	check(c.Net.ImageSize >= 0 && c.Net.ImageSize <= 4096, "net.image_size", "got %d, expected in [0, 4096] (0: the net's default)", c.Net.ImageSize)
	oneOf(c.Net.Precision, "net.precision", "float32", "bfloat16")
	check(c.Net.Dropout == -1 || (c.Net.Dropout >= 0 && c.Net.Dropout < 1), "net.dropout", "got %g, expected in [0, 1) or -1 (the net's default)", c.Net.Dropout)
	check(c.Net.DropPath == -1 || (c.Net.DropPath >= 0 && c.Net.DropPath < 1), "net.drop_path", "got %g, expected in [0, 1) or -1 (the net's default)", c.Net.DropPath)
	_, padErr := graphs.ParsePadding(c.Net.Padding)
	check(padErr == nil && c.Net.Padding != "valid", "net.padding", "got %q, expected symmetric or same (empty: the net's default)", c.Net.Padding)
	_, geluErr := graphs.ParseGELU(c.Net.GELU)
	check(geluErr == nil, "net.gelu", "got %q, expected erf or tanh (empty: the net's default)", c.Net.GELU)
	check(c.Net.BNEpsilon >= 0 && c.Net.BNEpsilon < 1, "net.bn_eps", "got %g, expected in [0, 1) (0: the net's default)", c.Net.BNEpsilon)
	check(c.Net.BNDecay >= 0 && c.Net.BNDecay < 1, "net.bn_decay", "got %g, expected in [0, 1) (0: the net's default)", c.Net.BNDecay)
	oneOf(c.Data.Source, "data.source", "mnist", "fashion-mnist", "imagefolder", "shards", "cifar10", "imagenette-bin")
	check(c.Data.BatchSize >= 1, "data.batch_size", "got %d, expected >= 1", c.Data.BatchSize)
	check(c.Data.EvalBatchSize >= 1, "data.eval_batch_size", "got %d, expected >= 1", c.Data.EvalBatchSize)
	errs = append(errs, c.Data.validate()...)
	errs = append(errs, c.validateRecipe()...)
	errs = append(errs, c.validateReplicas()...)
	errs = append(errs, c.validateRecipeTraps()...)
	check(c.Eval.EveryEpochs >= 0, "eval.every_epochs", "got %d, expected >= 0 (0: only at the end)", c.Eval.EveryEpochs)
	check(c.Checkpoint.EverySteps >= 0, "checkpoint.every_steps", "got %d, expected >= 0 (0: only at the end)", c.Checkpoint.EverySteps)
	check(c.Checkpoint.Keep >= 1, "checkpoint.keep", "got %d, expected >= 1", c.Checkpoint.Keep)
	check(c.Checkpoint.Best == "" || c.Checkpoint.Best == "auto" || c.Checkpoint.Best == "top1" ||
		c.Checkpoint.Best == "ema_top1" || c.Checkpoint.Best == "none",
		"checkpoint.best", "got %q, expected auto, top1, ema_top1 or none", c.Checkpoint.Best)
	check(c.Checkpoint.Best != "ema_top1" || c.EMA.Decay > 0, "checkpoint.best", "ema_top1 needs ema.decay > 0")
	check(c.Log.EverySteps >= 1, "log.every_steps", "got %d, expected >= 1", c.Log.EverySteps)
	errs = append(errs, c.Guard.validate()...)
	return errors.Join(errs...)
}

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

// validateRecipe checks the optimizer, schedule, EMA and loss sections.
func (c Config) validateRecipe() []error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
		}
	}
	o := c.Optimizer
	defs, known := optimizerDefaults[o.Name]
	check(known, "optimizer.name", "got %q, expected one of: sgd, adamw, lamb, rmsprop_tf", o.Name)
	check(o.LR > 0 && o.LR <= 100, "optimizer.lr", "got %g, expected in (0, 100]", o.LR)
	check(o.LRBaseBatch >= 0, "optimizer.lr_base_batch", "got %d, expected >= 0 (0: optimizer.lr is the peak as given)", o.LRBaseBatch)
	if known {
		keys := []string{"momentum", "beta1", "beta2", "eps", "rho"}
		for _, key := range keys {
			value := *o.hyperparameters()[key]
			if _, ok := defs[key]; !ok {
				check(value == -1, "optimizer."+key, "got %g, but optimizer %s has no %s (leave it at -1)", value, o.Name, key)
				continue
			}
			switch key {
			case "eps":
				check(value == -1 || (value > 0 && value < 1), "optimizer.eps", "got %g, expected in (0, 1) or -1 (%s's default %g)", value, o.Name, defs[key])
			default:
				check(value == -1 || (value >= 0 && value < 1), "optimizer."+key, "got %g, expected in [0, 1) or -1 (%s's default %g)", value, o.Name, defs[key])
			}
		}
		check(!o.Nesterov || o.Name == "sgd", "optimizer.nesterov", "only sgd has a Nesterov form, the optimizer is %s", o.Name)
		check(!o.Nesterov || o.Resolved().Momentum > 0, "optimizer.nesterov", "Nesterov needs optimizer.momentum > 0")
		check(!o.LROutside || o.Name == "rmsprop_tf", "optimizer.lr_outside", "only rmsprop_tf has this form, the optimizer is %s", o.Name)
	}
	check(o.WeightDecay >= 0 && o.WeightDecay < 1, "optimizer.weight_decay", "got %g, expected in [0, 1)", o.WeightDecay)
	check(o.ClipGradNorm >= 0, "optimizer.clip_grad_norm", "got %g, expected >= 0 (0: no clipping)", o.ClipGradNorm)
	check(o.AccumulateSteps >= 1 && o.AccumulateSteps <= 1024, "optimizer.accumulate_steps", "got %d, expected in [1, 1024]", o.AccumulateSteps)

	s := c.Schedule
	check(s.Name == "constant" || s.Name == "cosine" || s.Name == "step" || s.Name == "multistep" || s.Name == "exponential",
		"schedule.name", "got %q, expected one of: constant, cosine, step, multistep, exponential", s.Name)
	check(s.WarmupEpochs >= 0, "schedule.warmup_epochs", "got %g, expected >= 0", s.WarmupEpochs)
	check(s.WarmupSteps >= 0, "schedule.warmup_steps", "got %d, expected >= 0", s.WarmupSteps)
	check(s.WarmupEpochs == 0 || s.WarmupSteps == 0, "schedule.warmup_steps", "set warmup_steps or warmup_epochs, not both")
	check(s.WarmupStartLR >= 0 && s.WarmupStartLR <= c.PeakLR(), "schedule.warmup_start_lr", "got %g, expected in [0, peak lr %g]", s.WarmupStartLR, c.PeakLR())
	check(s.MinLR >= 0 && s.MinLR <= c.PeakLR(), "schedule.min_lr", "got %g, expected in [0, peak lr %g]", s.MinLR, c.PeakLR())
	check(s.MinLR == 0 || s.Name == "cosine", "schedule.min_lr", "only the cosine schedule has a floor, the schedule is %s", s.Name)
	decays := s.Name == "step" || s.Name == "multistep" || s.Name == "exponential"
	if decays {
		check(s.DecayRate > 0 && s.DecayRate <= 1, "schedule.decay_rate", "got %g, expected in (0, 1] for the %s schedule", s.DecayRate, s.Name)
	} else {
		check(s.DecayRate == 0, "schedule.decay_rate", "the %s schedule has no decay rate (leave it at 0)", s.Name)
	}
	if s.Name == "step" || s.Name == "exponential" {
		check(s.DecayEpochs > 0, "schedule.decay_epochs", "got %g, expected > 0 for the %s schedule", s.DecayEpochs, s.Name)
	} else {
		check(s.DecayEpochs == 0, "schedule.decay_epochs", "the %s schedule has no decay_epochs (leave it at 0)", s.Name)
	}
	check(!s.Staircase || s.Name == "exponential", "schedule.staircase", "only the exponential schedule has a staircase form")
	if s.Name == "multistep" {
		ok := len(s.Milestones) > 0
		for i, m := range s.Milestones {
			ok = ok && m > 0 && (i == 0 || m > s.Milestones[i-1])
		}
		check(ok, "schedule.milestones", "got %v, expected increasing epochs > 0", s.Milestones)
	} else {
		check(len(s.Milestones) == 0, "schedule.milestones", "only the multistep schedule has milestones")
	}

	check(c.EMA.Decay >= 0 && c.EMA.Decay < 1, "ema.decay", "got %g, expected in [0, 1) (0: no EMA)", c.EMA.Decay)

	l := c.Loss
	check(l.Name == "softmax_ce" || l.Name == "bce", "loss.name", "got %q, expected one of: softmax_ce, bce", l.Name)
	check(l.LabelSmoothing >= 0 && l.LabelSmoothing < 1, "loss.label_smoothing", "got %g, expected in [0, 1)", l.LabelSmoothing)
	check(l.BCEDivisor == "elements" || l.BCEDivisor == "batch", "loss.bce_divisor", "got %q, expected elements (batch × classes) or batch", l.BCEDivisor)
	check(l.BCETargetThreshold >= 0 && l.BCETargetThreshold < 1, "loss.bce_target_threshold", "got %g, expected in [0, 1) (0: targets kept soft)", l.BCETargetThreshold)
	check(l.Name == "bce" || l.BCETargetThreshold == 0, "loss.bce_target_threshold", "applies to loss.name bce only")
	return errs
}
