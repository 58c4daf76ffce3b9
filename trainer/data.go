package trainer

import (
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/pjrt"
)

// validate checks the data keys beyond the source name and batch sizes.
func (d DataConfig) validate() []error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
		}
	}
	lenOK := func(n int) bool { return n == 0 || n == 1 || n == 3 }
	check(lenOK(len(d.Mean)) && lenOK(len(d.Std)) && (len(d.Mean) == 0) == (len(d.Std) == 0), "data.mean",
		"%d means and %d stds, expected 1 or 3 of each (one per channel), or neither (the source's)", len(d.Mean), len(d.Std))
	for _, s := range d.Std {
		check(s > 0, "data.std", "got %v, expected every value > 0", d.Std)
	}
	check(d.Workers >= 0, "data.workers", "got %d, expected >= 0 (0: one per core)", d.Workers)
	check(d.Prefetch >= 0, "data.prefetch", "got %d, expected >= 0 (0: 2)", d.Prefetch)
	check(d.EvalCropPct > 0 && d.EvalCropPct <= 1, "data.eval_crop_pct", "got %g, expected in (0, 1]", d.EvalCropPct)
	a := d.Augment
	sc := a.RandomResizedCropScale
	check(len(sc) == 0 || (len(sc) == 2 && sc[0] > 0 && sc[0] <= sc[1] && sc[1] <= 1), "data.augment.random_resized_crop_scale",
		"got %v, expected [min, max] with 0 < min <= max <= 1, or empty (off)", sc)
	r := a.RandomResizedCropRatio
	check(len(r) == 2 && r[0] > 0 && r[0] <= r[1], "data.augment.random_resized_crop_ratio",
		"got %v, expected [min, max] with 0 < min <= max", r)
	_, err := data.ParseInterp(a.Interpolation)
	check(err == nil, "data.augment.interpolation", "got %q, expected bilinear or bicubic", a.Interpolation)
	check(a.HFlip >= 0 && a.HFlip <= 1, "data.augment.hflip", "got %g, expected a probability in [0, 1]", a.HFlip)
	check(a.MixupAlpha >= 0, "data.augment.mixup_alpha", "got %g, expected >= 0 (0: off; timm recipes 0.1-0.8)", a.MixupAlpha)
	check(a.CutmixAlpha >= 0, "data.augment.cutmix_alpha", "got %g, expected >= 0 (0: off; timm recipes 1.0)", a.CutmixAlpha)
	check(a.MixupProb >= 0 && a.MixupProb <= 1, "data.augment.mixup_prob", "got %g, expected a probability in [0, 1]", a.MixupProb)
	check(a.MixupSwitchProb >= 0 && a.MixupSwitchProb <= 1, "data.augment.mixup_switch_prob", "got %g, expected a probability in [0, 1]", a.MixupSwitchProb)
	check(a.RandomErasing >= 0 && a.RandomErasing <= 1, "data.augment.random_erasing", "got %g, expected a probability in [0, 1] (0: off)", a.RandomErasing)
	check(a.RandomErasingMode == "pixel" || a.RandomErasingMode == "rand" || a.RandomErasingMode == "const",
		"data.augment.random_erasing_mode", "got %q, expected pixel, rand or const", a.RandomErasingMode)
	if a.RandAugment != "" {
		_, err := data.ParseRandAugment(a.RandAugment)
		check(err == nil, "data.augment.rand_augment", "%v (empty: off)", err)
	}
	if a.AutoAugment != "" {
		_, err := data.ParseAutoAugment(a.AutoAugment)
		check(err == nil, "data.augment.auto_augment", "%v (empty: off)", err)
		check(a.RandAugment == "", "data.augment.auto_augment", "got %q with rand_augment %q: the two are exclusive, set one", a.AutoAugment, a.RandAugment)
	}
	check(a.AutoAugmentInterpolation == "" || a.AutoAugmentInterpolation == "nearest" || a.AutoAugmentInterpolation == "bilinear",
		"data.augment.auto_augment_interpolation", "got %q, expected nearest or bilinear (empty: nearest)", a.AutoAugmentInterpolation)
	check(d.DeviceNormalize == "auto" || d.DeviceNormalize == "true" || d.DeviceNormalize == "false", "data.device_normalize",
		"got %q, expected auto, true or false (auto: true on xla backends)", d.DeviceNormalize)
	if d.DeviceNormalize == "true" {
		// The training batches would cross as uint8, which cannot hold what these make.
		check(a.RandomErasing == 0, "data.device_normalize", "true, but data.augment.random_erasing %g erases in normalised "+
			"space on the host, which uint8 batches cannot carry: expected auto or false, or random_erasing 0", a.RandomErasing)
		check(!a.Mixing(), "data.device_normalize", "true, but data.augment.mixup_alpha %g / cutmix_alpha %g blend normalised "+
			"images on the host, which uint8 batches cannot carry: expected auto or false, or both alphas 0", a.MixupAlpha, a.CutmixAlpha)
	}
	check(a.RepeatedAug >= 0 && a.RepeatedAug <= 64, "data.augment.repeated_aug", "got %d, expected 0 to 64 (0 or 1: off; DeiT uses 3)", a.RepeatedAug)
	// Mixup and cutmix work on decoded batches, so every source takes them; the per-example
	// augmentations need the image sources' transform.
	augmented := len(sc) > 0 || a.HFlip > 0 || a.RandomErasing > 0 || a.RandAugment != "" || a.AutoAugment != ""
	idx := d.Source == "mnist" || d.Source == "fashion-mnist"
	check(!augmented || !idx, "data.augment", "per-example augmentation (crop, flip, erasing, rand_augment, auto_augment) applies to the image sources, not %s", d.Source)
	return errs
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

// normalisation returns data.mean and data.std, or the source's statistics when they are empty.
func (d DataConfig) normalisation() (mean, std []float32) {
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

// deviceNormalize resolves data.device_normalize for the training or the eval batches: whether they
// cross to the device as uint8 pixels that the graph normalises (NormalizePixels). auto is true on
// the xla backends, where it cuts the bytes sent per step by four, and false on the pure-Go backend,
// where host and device share the memory and the graph's lookup costs more than the host's
// (docs/data.md has the measurements); under auto, training batches with random erasing or
// mixup/cutmix, which need the normalised floats on the host, stay float32 (eval still gets uint8).
func (c Config) deviceNormalize(train bool) bool {
	a := c.Data.Augment
	switch c.Data.DeviceNormalize {
	case "true":
		return true // validate refuses it with erasing or mixing
	case "false":
		return false
	}
	if train && (a.RandomErasing > 0 || a.Mixing()) {
		return false
	}
	spec, err := pjrt.ParseConfig(c.Backend)
	return err == nil && spec.Backend == "xla"
}

// openLoader opens split ("train" or "test") of the configured source and builds its loader: images
// come out at the net's input size, augmented for training when data.augment asks.
func (s *session) openLoader(split string, batch int, train bool) (*data.Loader, error) {
	return s.openReplicaLoader(split, batch, train, 0, 1)
}

// openReplicaLoader is openLoader for replica r of replicas: batch is the replica's share, and the
// loader yields rows [r·batch, (r+1)·batch) of each global batch (data.LoaderOptions.Replica). The
// decode workers are shared out among the replicas' loaders.
func (s *session) openReplicaLoader(split string, batch int, train bool, replica, replicas int) (*data.Loader, error) {
	d := s.cfg.Data
	if replicas > 1 {
		workers := d.Workers
		if workers == 0 {
			workers = runtime.NumCPU()
		}
		d.Workers = max(1, workers/replicas)
	}
	want := s.spec.InputShape
	if size := s.cfg.Net.ImageSize; size > 0 {
		want[0], want[1] = size, size
	}
	if !train && d.EvalImageSize > 0 {
		want[0], want[1] = d.EvalImageSize, d.EvalImageSize
	}
	mean, std := d.normalisation()
	opts := data.LoaderOptions{BatchSize: batch, Shuffle: train, DropLast: train, Seed: uint64(s.cfg.Seed),
		Mean: mean, Std: std, Workers: d.Workers, Prefetch: d.Prefetch, Uint8: s.cfg.deviceNormalize(train),
		Replica: replica, Replicas: replicas}
	var src data.Source
	switch d.Source {
	case "mnist", "fashion-mnist":
		ds, err := data.Open(d.Source, d.Dir, split)
		if err != nil {
			return nil, err
		}
		src = data.NewDatasetSource(ds)
	default:
		trainPath, evalPath := d.DataPaths()
		path, key := trainPath, "data.train"
		if split != "train" {
			path, key = evalPath, "data.eval"
		}
		if path == "" {
			return nil, fmt.Errorf("%s: data.source %s needs the split's path: set %s or data.dir", key, d.Source, key)
		}
		var err error
		if src, err = data.OpenSource(d.Source, path, split, data.SourceOptions{NumClasses: s.numClasses()}); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	if classes := s.numClasses(); src.NumClasses() > classes {
		return nil, fmt.Errorf("data.source %q has %d classes, net has %d outputs (net.num_classes)", d.Source, src.NumClasses(), classes)
	}
	interp, _ := data.ParseInterp(d.Augment.Interpolation)
	tf := &data.Transform{Size: want[0], Channels: want[2], Train: train, Interp: interp, CropPct: d.EvalCropPct}
	if train {
		copy(tf.Scale[:], d.Augment.RandomResizedCropScale)
		copy(tf.Ratio[:], d.Augment.RandomResizedCropRatio)
		tf.HFlip = d.Augment.HFlip
		tf.Erasing = data.RandomErasing{Prob: d.Augment.RandomErasing, Mode: d.Augment.RandomErasingMode}
		if d.Augment.RandAugment != "" {
			ra, err := data.ParseRandAugment(d.Augment.RandAugment)
			if err != nil {
				return nil, fmt.Errorf("data.augment.rand_augment: %w", err)
			}
			tf.RandAugment = &ra
		}
		if d.Augment.AutoAugment != "" {
			aa, err := data.ParseAutoAugment(d.Augment.AutoAugment)
			if err != nil {
				return nil, fmt.Errorf("data.augment.auto_augment: %w", err)
			}
			aa.Bilinear = d.Augment.AutoAugmentInterpolation == "bilinear"
			tf.AutoAugment = &aa
		}
		opts.Repeats = d.Augment.RepeatedAug
		if a := d.Augment; a.Mixing() {
			opts.Mixup = &data.Mixup{MixupAlpha: a.MixupAlpha, CutmixAlpha: a.CutmixAlpha, Prob: a.MixupProb,
				SwitchProb: a.MixupSwitchProb, LabelSmoothing: s.cfg.Loss.LabelSmoothing, NumClasses: s.numClasses()}
		}
	}
	augmented := tf.Train && (tf.Scale != [2]float64{} || tf.HFlip > 0 || tf.Erasing.Prob > 0 || tf.RandAugment != nil || tf.AutoAugment != nil)
	if fs, ok := src.(data.FixedShape); ok {
		h, w, c := fs.Shape()
		if h == want[0] && w == want[1] && c == want[2] && !augmented {
			tf = nil // stored at the net's size: used as they are
		} else if h > 0 && (d.Source == "mnist" || d.Source == "fashion-mnist") {
			return nil, fmt.Errorf("data.source %q gives %dx%dx%d images, net %q expects %dx%dx%d",
				d.Source, h, w, c, s.spec.Name, want[0], want[1], want[2])
		}
	}
	if want[0] != want[1] {
		return nil, fmt.Errorf("net %q expects %dx%d images: the image sources produce square ones", s.spec.Name, want[0], want[1])
	}
	opts.Transform = tf
	l, err := data.NewSourceLoader(src, opts)
	if err != nil {
		if opts.Uint8 {
			return nil, fmt.Errorf("%s split (uint8 batches, data.device_normalize %s): %w", split, d.DeviceNormalize, err)
		}
		return nil, fmt.Errorf("%s split: %w", split, err)
	}
	return l, nil
}

// targetsTensor is what the train step scores a batch against: the soft targets [batch, classes]
// when the loader mixes, else the integer labels [batch].
func targetsTensor(b data.Batch) *tensors.Tensor {
	if b.Targets != nil {
		return tensors.FromFlatDataAndDimensions(b.Targets, len(b.Labels), len(b.Targets)/len(b.Labels))
	}
	return tensors.FromFlatDataAndDimensions(b.Labels, len(b.Labels))
}
