package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/trainer/trainer/internal/echo"
)

// The rules a recipe must pass that config judges by itself: ranges, enums and how keys relate. Each
// error reads "key: what was wrong, what was expected"; Load prefixes the file. The rules that need
// the registered nets, the data sources, weights URLs or backend names are recipe.Check's.

// keyError is one broken rule: the key it is about and what was wrong (Load names the file that set
// the key). nonFinite marks a NaN or infinity, after which the key's range checks stay quiet.
type keyError struct {
	key, msg  string
	nonFinite bool
}

func (e *keyError) Error() string { return e.key + ": " + e.msg }

// checks collects the errors of a validation, in the order the rules run.
type checks []error

// check records "key: message" when ok is false, unless the key's value was refused as not finite.
func (cs *checks) check(ok bool, key, format string, args ...any) {
	if !ok && !cs.nonFinite(key) {
		*cs = append(*cs, &keyError{key: key, msg: fmt.Sprintf(format, args...)})
	}
}

// nonFinite reports whether key was refused for holding NaN or an infinity.
func (cs *checks) nonFinite(key string) bool {
	return slices.ContainsFunc(*cs, func(e error) bool {
		ke, ok := e.(*keyError)
		return ok && ke.nonFinite && ke.key == key
	})
}

// finite refuses NaN and ±Inf in every number of the struct v (its floats, lists of floats and
// lr_mult's factors), keys named under prefix. It runs before the range checks, as the one rule they
// all share: one written `x >= 0` lets +Inf through (cutmix_alpha: .inf), one written `!(x < 0)` NaN.
func (cs *checks) finite(v reflect.Value, prefix string) {
	refuse := func(key string, f float64, where string) {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			*cs = append(*cs, &keyError{key: key, msg: fmt.Sprintf("got %g%s, expected a finite number", f, where), nonFinite: true})
		}
	}
	for i := range v.NumField() {
		key, field := prefix+yamlName(v.Type().Field(i)), v.Field(i)
		switch {
		case field.Kind() == reflect.Struct:
			cs.finite(field, key+".")
		case field.Kind() == reflect.Float64:
			refuse(key, field.Float(), "")
		case field.Kind() == reflect.Slice && field.Type().Elem().Kind() == reflect.Float64:
			for j := range field.Len() {
				refuse(key, field.Index(j).Float(), fmt.Sprintf(" at position %d", j))
			}
		case field.Kind() == reflect.Map && field.Type().Elem().Kind() == reflect.Float64:
			keys := field.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				refuse(key, field.MapIndex(k).Float(), " for "+echo.Quote(k.String()))
			}
		}
	}
}

// oneOf records an error when value is not one of allowed, listing them.
func (cs *checks) oneOf(value, key string, allowed []string) {
	cs.check(slices.Contains(allowed, value), key, "got %s, expected one of: %s", echo.Quote(value), strings.Join(allowed, ", "))
}

// orList renders names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// MaxSteps is the most optimizer steps a run may have, and so the bound of epochs, steps and the
// warmup: a checkpoint's file name has nine digits for its step (checkpoint.MaxStep, which a test
// keeps equal). schedule.Length checks the product of epochs and batches per epoch against it.
const MaxSteps = 999_999_999

// MaxImageSize bounds net.image_size and data.eval_image_size, and every command's --size.
const MaxImageSize = 4096

// MaxBatchValues bounds a batch's pixel values, batch size × height × width × channels: 2^31 values
// are 8 GiB as float32 (ImageNet's batch of 1024 at 224 px is 154 million). The keys' own bounds
// allow a thousand times that, which no host holds, so the product is checked (by the recipe's
// checks, which know the net's input, and by the commands' flags) before anything is allocated.
const MaxBatchValues = 1 << 31

// BatchValues is the number of pixel values in a batch of batch images of input's [height, width,
// channels], for checking against MaxBatchValues; 64-bit, so no product of bounded keys overflows.
func BatchValues(batch int, input [3]int) int64 {
	return int64(batch) * int64(input[0]) * int64(input[1]) * int64(input[2])
}

// The loader's bounds (data.MaxBatchSize, MaxPrefetch, MaxWorkers), stated here too because config
// imports none of the packages it configures; recipe's TestLimitsAgreeWithData holds them equal.
const (
	MaxBatchSize = 1 << 16
	MaxPrefetch  = 16
	MaxWorkers   = 256
)

// maxName bounds the run name, a directory name (NAME_MAX).
const maxName = 255

// Validate checks ranges, names and how keys relate (recipe.Validate adds the rules that need the
// world). A PJRT backend's devices are checked when it opens (backend.CheckDevices).
func (c Config) Validate() error { return c.ValidateWithDevices(0) }

// ValidateWithDevices is Validate for a backend known to have devices devices, which bounds replicas;
// 0: unknown (recipe.Check reads the pure-Go backend's devices=R from its name).
func (c Config) ValidateWithDevices(devices int) error {
	var cs checks
	cs.finite(reflect.ValueOf(c), "")
	cs.check(c.Name != "" && len(c.Name) <= maxName && !strings.ContainsAny(c.Name, `/\`) && c.Name != "." && c.Name != "..",
		"name", "got %s, expected a plain name usable as a directory (at most %d bytes)", echo.Quote(c.Name), maxName)
	cs.check(c.Backend != "", "backend", "expected a backend: go, xla:cpu, xla:cuda, xla:tpu or a plugin path")
	cs.check(c.Seed >= 0, "seed", "got %d, expected >= 0", c.Seed)
	cs.check(c.Epochs >= 0 && c.Epochs <= MaxSteps, "epochs", "got %d, expected in [0, %d]", c.Epochs, MaxSteps)
	cs.check(c.Steps >= 0 && c.Steps <= MaxSteps, "steps", "got %d, expected in [0, %d] (0: run whole epochs)", c.Steps, MaxSteps)
	cs.check(c.Epochs > 0 || c.Steps > 0, "epochs", "epochs and steps are both 0: nothing to train")
	cs.check(c.RunDir != "", "run_dir", "expected a directory")
	c.Net.validate(&cs)
	cs.check(c.Data.BatchSize >= 1 && c.Data.BatchSize <= MaxBatchSize, "data.batch_size", "got %d, expected in [1, %d]", c.Data.BatchSize, MaxBatchSize)
	cs.check(c.Data.EvalBatchSize >= 1 && c.Data.EvalBatchSize <= MaxBatchSize, "data.eval_batch_size", "got %d, expected in [1, %d]", c.Data.EvalBatchSize, MaxBatchSize)
	c.Data.validate(&cs)
	c.validateRecipe(&cs)
	c.validateReplicas(&cs, devices)
	c.validateRecipeTraps(&cs)
	cs.check(c.Eval.EveryEpochs >= 0, "eval.every_epochs", "got %d, expected >= 0 (0: only at the end)", c.Eval.EveryEpochs)
	cs.check(c.Checkpoint.EverySteps >= 0, "checkpoint.every_steps", "got %d, expected >= 0 (0: only at the end)", c.Checkpoint.EverySteps)
	cs.check(c.Checkpoint.Keep >= 1, "checkpoint.keep", "got %d, expected >= 1", c.Checkpoint.Keep)
	cs.check(c.Checkpoint.Best == "" || slices.Contains(BestMetrics, c.Checkpoint.Best),
		"checkpoint.best", "got %s, expected %s", echo.Quote(c.Checkpoint.Best), orList(BestMetrics))
	cs.check(c.Checkpoint.Best != "ema_top1" || c.EMA.Decay > 0, "checkpoint.best", "ema_top1 needs ema.decay > 0")
	cs.check(c.Log.EverySteps >= 1, "log.every_steps", "got %d, expected >= 1", c.Log.EverySteps)
	if g := c.Guard.NonFinite; g != "" { // empty: stop
		cs.oneOf(g, "guard.nonfinite", GuardPolicies)
	}
	return errors.Join(cs...)
}

// validate checks the net section.
func (n NetConfig) validate(cs *checks) {
	if n.HasSpec() {
		n.validateSpec(cs)
	}
	cs.check(n.Width > 0 && n.Width <= 16, "net.width", "got %g, expected in (0, 16]", n.Width)
	cs.check(n.NumClasses >= 0, "net.num_classes", "got %d, expected >= 0 (0: the net's default)", n.NumClasses)
	cs.check(n.ImageSize >= 0 && n.ImageSize <= MaxImageSize, "net.image_size", "got %d, expected in [0, %d] (0: the net's default)", n.ImageSize, MaxImageSize)
	cs.oneOf(n.Precision, "net.precision", Precisions)
	cs.check(n.Dropout == -1 || (n.Dropout >= 0 && n.Dropout < 1), "net.dropout", "got %g, expected in [0, 1) or -1 (the net's default)", n.Dropout)
	cs.check(n.DropPath == -1 || (n.DropPath >= 0 && n.DropPath < 1), "net.drop_path", "got %g, expected in [0, 1) or -1 (the net's default)", n.DropPath)
	cs.check(n.BNEpsilon >= 0 && n.BNEpsilon < 1, "net.bn_eps", "got %g, expected in [0, 1) (0: the net's default)", n.BNEpsilon)
	cs.check(n.BNDecay >= 0 && n.BNDecay < 1, "net.bn_decay", "got %g, expected in [0, 1) (0: the net's default)", n.BNDecay)
	n.validatePretrained(cs)
}

// validateSpec checks a NetSpec and the net keys that do not apply to one (a spec writes its widths,
// dropout rates and paddings per layer).
func (n NetConfig) validateSpec(cs *checks) {
	cs.check(n.Name == "", "net.name", "got %s with net.spec: expected one of them (a registered net, or a spec)", echo.Quote(n.Name))
	cs.check(n.Width == 1, "net.width", "got %g with net.spec: a spec's widths are as written; expected 1", n.Width)
	cs.check(n.Dropout == -1, "net.dropout", "got %g with net.spec: a spec sets its dropout layers' rates; expected -1", n.Dropout)
	cs.check(n.DropPath == -1, "net.drop_path", "got %g with net.spec: a spec has no drop path; expected -1", n.DropPath)
	cs.check(n.Padding == "", "net.padding", "got %s with net.spec: a spec's convolutions name their padding; expected it unset", echo.Quote(n.Padding))
	cs.check(!n.ZeroInitLast, "net.zero_init_last", "true with net.spec: it applies to the registered ResNets; expected false")
	cs.check(!n.FP32Head, "net.fp32_head", "true with net.spec: it applies to the registered ResNets; expected false")
}

// validatePretrained checks net.pretrained's digest (recipe.Check its URL); whether the file exists
// and fits the net is checked when a run starts from it.
func (n NetConfig) validatePretrained(cs *checks) {
	if n.PretrainedSHA256 != "" {
		cs.check(len(n.PretrainedSHA256) == 64 && strings.Trim(n.PretrainedSHA256, "0123456789abcdef") == "",
			"net.pretrained_sha256", "got %s, expected 64 lower-case hex digits", echo.Quote(n.PretrainedSHA256))
		cs.check(n.Pretrained != "", "net.pretrained_sha256", "set without net.pretrained")
	}
}

// validateRecipe checks the optimizer, schedule, EMA and loss sections.
func (c Config) validateRecipe(cs *checks) {
	o := c.Optimizer
	defs, known := optimizerDefaults[o.Name]
	cs.check(known, "optimizer.name", "got %s, expected one of: %s", echo.Quote(o.Name), strings.Join(Optimizers, ", "))
	cs.check(o.LR > 0 && o.LR <= 100, "optimizer.lr", "got %g, expected in (0, 100]", o.LR)
	cs.check(o.LRBaseBatch >= 0, "optimizer.lr_base_batch", "got %d, expected >= 0 (0: optimizer.lr is the peak as given)", o.LRBaseBatch)
	if known {
		for _, key := range optimizerHyperparameters {
			value := *o.hyperparameters()[key]
			if _, ok := defs[key]; !ok {
				cs.check(value == -1, "optimizer."+key, "got %g, but optimizer %s has no %s (leave it at -1)", value, o.Name, key)
				continue
			}
			switch key {
			case "eps":
				// TF-slim's RMSProp runs ε = 1.0 inside the root (MobileNetV2's recipe).
				cs.check(value == -1 || (value > 0 && value <= 10), "optimizer.eps", "got %g, expected in (0, 10] or -1 (%s's default %g)", value, o.Name, defs[key])
			default:
				cs.check(value == -1 || (value >= 0 && value < 1), "optimizer."+key, "got %g, expected in [0, 1) or -1 (%s's default %g)", value, o.Name, defs[key])
			}
		}
		cs.check(!o.Nesterov || o.Name == "sgd", "optimizer.nesterov", "only sgd has a Nesterov form, the optimizer is %s", o.Name)
		cs.check(!o.Nesterov || o.Resolved().Momentum > 0, "optimizer.nesterov", "Nesterov needs optimizer.momentum > 0")
		cs.check(!o.LROutside || o.Name == "rmsprop_tf", "optimizer.lr_outside", "only rmsprop_tf has this form, the optimizer is %s", o.Name)
	}
	cs.check(o.WeightDecay >= 0 && o.WeightDecay < 1, "optimizer.weight_decay", "got %g, expected in [0, 1)", o.WeightDecay)
	cs.check(o.ClipGradNorm >= 0, "optimizer.clip_grad_norm", "got %g, expected >= 0 (0: no clipping)", o.ClipGradNorm)
	cs.check(o.AccumulateSteps >= 1 && o.AccumulateSteps <= 1024, "optimizer.accumulate_steps", "got %d, expected in [1, 1024]", o.AccumulateSteps)
	seen := map[string]bool{}
	for _, p := range o.Freeze {
		_, err := path.Match(p, "")
		cs.check(p != "" && err == nil, "optimizer.freeze", "pattern %s: expected a glob over state_dict keys (*, ?, [...])", echo.Quote(p))
		cs.check(!seen[p], "optimizer.freeze", "pattern %s listed twice", echo.Quote(p))
		seen[p] = true
	}
	for _, p := range slices.Sorted(maps.Keys(o.LRMult)) {
		_, err := path.Match(p, "")
		cs.check(p != "" && err == nil, "optimizer.lr_mult", "pattern %s: expected a glob over state_dict keys (*, ?, [...])", echo.Quote(p))
		f := o.LRMult[p]
		cs.check(f > 0 && f <= 1000, "optimizer.lr_mult", "%s: factor %g, expected in (0, 1000] (to train nothing there, use optimizer.freeze)", echo.Quote(p), f)
	}

	s := c.Schedule
	cs.oneOf(s.Name, "schedule.name", Schedules)
	cs.check(s.WarmupEpochs >= 0 && s.WarmupEpochs <= MaxSteps, "schedule.warmup_epochs", "got %g, expected in [0, %d]", s.WarmupEpochs, MaxSteps)
	cs.check(s.WarmupSteps >= 0 && s.WarmupSteps <= MaxSteps, "schedule.warmup_steps", "got %d, expected in [0, %d]", s.WarmupSteps, MaxSteps)
	cs.check(s.WarmupEpochs == 0 || s.WarmupSteps == 0, "schedule.warmup_steps", "set warmup_steps or warmup_epochs, not both")
	cs.check(s.WarmupStartLR >= 0 && s.WarmupStartLR <= c.PeakLR(), "schedule.warmup_start_lr", "got %g, expected in [0, peak lr %g]", s.WarmupStartLR, c.PeakLR())
	cs.check(s.MinLR >= 0 && s.MinLR <= c.PeakLR(), "schedule.min_lr", "got %g, expected in [0, peak lr %g]", s.MinLR, c.PeakLR())
	cs.check(s.MinLR == 0 || s.Name == "cosine", "schedule.min_lr", "only the cosine schedule has a floor, the schedule is %s", echo.Cut(s.Name))
	decays := s.Name == "step" || s.Name == "multistep" || s.Name == "exponential"
	if decays {
		cs.check(s.DecayRate > 0 && s.DecayRate <= 1, "schedule.decay_rate", "got %g, expected in (0, 1] for the %s schedule", s.DecayRate, s.Name)
	} else {
		cs.check(s.DecayRate == 0, "schedule.decay_rate", "the %s schedule has no decay rate (leave it at 0)", echo.Cut(s.Name))
	}
	if s.Name == "step" || s.Name == "exponential" {
		cs.check(s.DecayEpochs > 0, "schedule.decay_epochs", "got %g, expected > 0 for the %s schedule", s.DecayEpochs, s.Name)
	} else {
		cs.check(s.DecayEpochs == 0, "schedule.decay_epochs", "the %s schedule has no decay_epochs (leave it at 0)", echo.Cut(s.Name))
	}
	cs.check(!s.Staircase || s.Name == "exponential", "schedule.staircase", "only the exponential schedule has a staircase form")
	if s.Name == "multistep" {
		ok := len(s.Milestones) > 0
		for i, m := range s.Milestones {
			ok = ok && m > 0 && (i == 0 || m > s.Milestones[i-1])
		}
		cs.check(ok, "schedule.milestones", "got %s, expected increasing epochs > 0", echo.Value(s.Milestones))
	} else {
		cs.check(len(s.Milestones) == 0, "schedule.milestones", "only the multistep schedule has milestones")
	}

	cs.check(c.EMA.Decay >= 0 && c.EMA.Decay < 1, "ema.decay", "got %g, expected in [0, 1) (0: no EMA)", c.EMA.Decay)

	l := c.Loss
	cs.oneOf(l.Name, "loss.name", Losses)
	cs.check(l.LabelSmoothing >= 0 && l.LabelSmoothing < 1, "loss.label_smoothing", "got %g, expected in [0, 1)", l.LabelSmoothing)
	cs.check(slices.Contains(BCEDivisors, l.BCEDivisor), "loss.bce_divisor", "got %s, expected elements (batch × classes) or batch", echo.Quote(l.BCEDivisor))
	cs.check(l.BCETargetThreshold >= 0 && l.BCETargetThreshold < 1, "loss.bce_target_threshold", "got %g, expected in [0, 1) (0: targets kept soft)", l.BCETargetThreshold)
	cs.check(l.Name == "bce" || l.BCETargetThreshold == 0, "loss.bce_target_threshold", "applies to loss.name bce only")
}

// validate checks the data keys beyond the source name and batch sizes.
func (d DataConfig) validate(cs *checks) {
	lenOK := func(n int) bool { return n == 0 || n == 1 || n == 3 }
	cs.check(lenOK(len(d.Mean)) && lenOK(len(d.Std)) && (len(d.Mean) == 0) == (len(d.Std) == 0), "data.mean",
		"%d means and %d stds, expected 1 or 3 of each (one per channel), or neither (the source's)", len(d.Mean), len(d.Std))
	positive := !slices.ContainsFunc(d.Std, func(s float64) bool { return !(s > 0) })
	cs.check(positive, "data.std", "got %s, expected every value > 0", echo.Value(d.Std))
	cs.check(d.Workers >= 0 && d.Workers <= MaxWorkers, "data.workers", "got %d, expected in [0, %d] (0: one per core)", d.Workers, MaxWorkers)
	// Each batch ahead is allocated when an epoch starts.
	cs.check(d.Prefetch >= 0 && d.Prefetch <= MaxPrefetch, "data.prefetch", "got %d, expected in [0, %d] (0: 2)", d.Prefetch, MaxPrefetch)
	cs.check(d.EvalCropPct > 0 && d.EvalCropPct <= 1, "data.eval_crop_pct", "got %g, expected in (0, 1]", d.EvalCropPct)
	a := d.Augment
	sc := a.RandomResizedCropScale
	cs.check(len(sc) == 0 || (len(sc) == 2 && sc[0] > 0 && sc[0] <= sc[1] && sc[1] <= 1), "data.augment.random_resized_crop_scale",
		"got %s, expected [min, max] with 0 < min <= max <= 1, or empty (off)", echo.Value(sc))
	r := a.RandomResizedCropRatio
	cs.check(len(r) == 2 && r[0] > 0 && r[0] <= r[1], "data.augment.random_resized_crop_ratio",
		"got %s, expected [min, max] with 0 < min <= max", echo.Value(r))
	cs.check(a.HFlip >= 0 && a.HFlip <= 1, "data.augment.hflip", "got %g, expected a probability in [0, 1]", a.HFlip)
	cs.check(a.MixupAlpha >= 0, "data.augment.mixup_alpha", "got %g, expected >= 0 (0: off; timm recipes 0.1-0.8)", a.MixupAlpha)
	cs.check(a.CutmixAlpha >= 0, "data.augment.cutmix_alpha", "got %g, expected >= 0 (0: off; timm recipes 1.0)", a.CutmixAlpha)
	cs.check(a.MixupProb >= 0 && a.MixupProb <= 1, "data.augment.mixup_prob", "got %g, expected a probability in [0, 1]", a.MixupProb)
	cs.check(a.MixupSwitchProb >= 0 && a.MixupSwitchProb <= 1, "data.augment.mixup_switch_prob", "got %g, expected a probability in [0, 1]", a.MixupSwitchProb)
	cs.check(a.RandomErasing >= 0 && a.RandomErasing <= 1, "data.augment.random_erasing", "got %g, expected a probability in [0, 1] (0: off)", a.RandomErasing)
	cs.check(slices.Contains(ErasingModes, a.RandomErasingMode),
		"data.augment.random_erasing_mode", "got %s, expected %s", echo.Quote(a.RandomErasingMode), orList(ErasingModes))
	if a.AutoAugment != "" {
		cs.check(a.RandAugment == "", "data.augment.auto_augment", "got %s with rand_augment %s: the two are exclusive, set one", echo.Quote(a.AutoAugment), echo.Quote(a.RandAugment))
	}
	cs.check(a.AutoAugmentInterpolation == "" || slices.Contains(AutoAugmentInterpolations, a.AutoAugmentInterpolation),
		"data.augment.auto_augment_interpolation", "got %s, expected %s (empty: %s)",
		echo.Quote(a.AutoAugmentInterpolation), orList(AutoAugmentInterpolations), AutoAugmentInterpolations[0])
	cs.check(slices.Contains(Switches, string(d.DeviceNormalize)), "data.device_normalize",
		"got %s, expected %s (auto: true on xla backends)", echo.Quote(string(d.DeviceNormalize)), orList(Switches))
	if d.DeviceNormalize == "true" {
		// The training batches would cross as uint8, which cannot hold what these make.
		cs.check(a.RandomErasing == 0, "data.device_normalize", "true, but data.augment.random_erasing %g erases in normalised "+
			"space on the host, which uint8 batches cannot carry: expected auto or false, or random_erasing 0", a.RandomErasing)
		cs.check(!a.Mixing(), "data.device_normalize", "true, but data.augment.mixup_alpha %g / cutmix_alpha %g blend normalised "+
			"images on the host, which uint8 batches cannot carry: expected auto or false, or both alphas 0", a.MixupAlpha, a.CutmixAlpha)
	}
	cs.check(slices.Contains(BadRecordPolicies, d.OnBadRecord), "data.on_bad_record", "got %s, expected %s",
		echo.Quote(d.OnBadRecord), orList(BadRecordPolicies))
	cs.check(d.MaxImagePixels >= 1, "data.max_image_pixels", "got %d, expected >= 1 (default %d, Pillow's limit)",
		d.MaxImagePixels, DefaultMaxImagePixels)
	cs.check(a.RepeatedAug >= 0 && a.RepeatedAug <= 64, "data.augment.repeated_aug", "got %d, expected 0 to 64 (0 or 1: off; DeiT uses 3)", a.RepeatedAug)
}

// validateReplicas checks the replicas key and the data_parallel section against the batch and the
// backend's device count when known (see ValidateWithDevices; recipe.Check reads the pure-Go
// backend's from its name).
func (c Config) validateReplicas(cs *checks, devices int) {
	r, dp := c.Replicas, c.DataParallel
	cs.check(r >= 1 && r <= 4096, "replicas", "got %d, expected in [1, 4096] (1: one device)", r)
	cs.oneOf(dp.Mode, "data_parallel.mode", DataParallelModes)
	cs.check(dp.SyncBN || dp.Mode != DataParallelAuto, "data_parallel.sync_bn",
		"false needs data_parallel.mode spmd: XLA's partitioner (auto) computes BatchNorm over the global batch")
	if r <= 1 {
		return
	}
	cs.check(c.Data.BatchSize%r == 0, "data.batch_size",
		"got %d with replicas %d: the batch of one step is split evenly over the replicas, expected a multiple of %d", c.Data.BatchSize, r, r)
	cs.check(devices == 0 || devices >= r, "replicas", "got %d, but the backend has %d device(s)", r, devices)
}

// validateRecipeTraps refuses recipes that load and run but do not do what they say, the traps the book
// notes record. validateRecipe already refuses optimizer and schedule keys foreign to the
// chosen optimizer or schedule; this adds the checks that relate keys across sections.
//
// Some traps cannot be written in this config:
//   - the run length and the schedule length disagreeing: there is one length, `epochs` (or `steps`,
//     which replaces it), and the loop computes the schedule's total from that same number
//     (schedule.LearningRate's total), so a cosine always ends where the run ends. What can still
//     disagree are schedule positions given in epochs (step decay, milestones): CheckScheduleLength
//     checks them against the run's optimizer steps once the split is open, as the epochs of a `steps`
//     run depend on the split's size (a warmup as long as the run is shortened: RunWarmup);
//   - a global batch not divisible by replicas × accumulation: the global batch is defined as
//     data.batch_size × optimizer.accumulate_steps (data.batch_size is the micro-batch), so it always
//     divides by the accumulation; validateReplicas checks it divides by the replicas.
func (c Config) validateRecipeTraps(cs *checks) {
	s := c.Schedule
	// Settings of one section that only act with another one on: a value other than the default
	// where it cannot act is a recipe that silently does less than it says.
	cs.check(s.WarmupStartLR == 0 || s.WarmupEpochs > 0 || s.WarmupSteps > 0, "schedule.warmup_start_lr",
		"got %g without a warmup (schedule.warmup_epochs or warmup_steps): it has no effect", s.WarmupStartLR)
	cs.check(c.EMA.Warmup || c.EMA.Decay > 0, "ema.warmup", "false without an EMA (ema.decay 0): it has no effect")
	cs.check(c.Loss.BCEDivisor == "elements" || c.Loss.Name == "bce", "loss.bce_divisor",
		"got %s with loss.name %s: only bce has a divisor", echo.Quote(c.Loss.BCEDivisor), echo.Cut(c.Loss.Name))
	a := c.Data.Augment
	def := Defaults().Data.Augment
	cs.check(len(a.RandomResizedCropScale) > 0 || slices.Equal(a.RandomResizedCropRatio, def.RandomResizedCropRatio),
		"data.augment.random_resized_crop_ratio", "got %s without random_resized_crop_scale (RandomResizedCrop is off): it has no effect",
		echo.Value(a.RandomResizedCropRatio))
	cs.check(a.Mixing() || a.MixupProb == def.MixupProb, "data.augment.mixup_prob",
		"got %g with mixup_alpha and cutmix_alpha both 0: it has no effect", a.MixupProb)
	cs.check((a.MixupAlpha > 0 && a.CutmixAlpha > 0) || a.MixupSwitchProb == def.MixupSwitchProb, "data.augment.mixup_switch_prob",
		"got %g, but it chooses between mixup and cutmix and only one of mixup_alpha, cutmix_alpha is > 0: it has no effect", a.MixupSwitchProb)
	cs.check(a.RandomErasing > 0 || a.RandomErasingMode == def.RandomErasingMode, "data.augment.random_erasing_mode",
		"got %s with random_erasing 0: it has no effect", echo.Quote(a.RandomErasingMode))
	if size := c.Data.EvalImageSize; size != 0 {
		cs.check(size >= 8 && size <= MaxImageSize, "data.eval_image_size", "got %d, expected in [8, %d] (0: the training size)", size, MaxImageSize)
	}
}

// CheckScheduleLength checks the schedule's positions given in epochs against the run's length, known
// once the training split is open: total optimizer steps, perEpoch optimizer steps per epoch. It
// refuses a step or staircase decay period as long as the run (the lr would never decay) and a
// multistep milestone at or past the end (a schedule written for more epochs than the run has); a
// warmup as long as the run is shortened instead (ScheduleConfig.RunWarmup, with a note). trainer.Run and trainer.ScheduleLength call it before building anything.
func (c Config) CheckScheduleLength(total int, perEpoch float64) error {
	s := c.Schedule
	epochs := float64(total) / perEpoch
	length := fmt.Sprintf("the run is %d optimizer steps (%.4g epochs of %.4g steps)", total, epochs, perEpoch)
	var errs []error
	if (s.Name == "step" || (s.Name == "exponential" && s.Staircase)) && s.DecayEpochs >= epochs-1e-9 {
		errs = append(errs, fmt.Errorf("schedule.decay_epochs: the %s schedule decays every %g epochs, %s: the lr would never decay; "+
			"expected decay_epochs below the run's epochs", s.Name, s.DecayEpochs, length))
	}
	if s.Name == "multistep" && len(s.Milestones) > 0 {
		if last := slices.Max(s.Milestones); last >= epochs-1e-9 {
			errs = append(errs, fmt.Errorf("schedule.milestones: a milestone at epoch %g, %s: it would never be reached; "+
				"expected every milestone below the run's epochs", last, length))
		}
	}
	return errors.Join(errs...)
}
