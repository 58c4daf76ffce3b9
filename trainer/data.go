package trainer

import (
	"fmt"
	"runtime"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/data"
)

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
	want := s.net.Spec.InputShape
	if size := s.cfg.Net.ImageSize; size > 0 {
		want[0], want[1] = size, size
	}
	if !train && d.EvalImageSize > 0 {
		want[0], want[1] = d.EvalImageSize, d.EvalImageSize
	}
	mean, std := d.Normalisation()
	opts := data.LoaderOptions{BatchSize: batch, Shuffle: train, DropLast: train, Seed: uint64(s.cfg.Seed),
		Mean: mean, Std: std, Workers: d.Workers, Prefetch: d.Prefetch, Uint8: s.cfg.NormalizeOnDevice(train),
		Replica: replica, Replicas: replicas}
	d.BadInput(&opts) // data.on_bad_record, data.max_image_pixels
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
		if src, err = data.OpenSource(d.Source, path, split, data.SourceOptions{NumClasses: s.numClasses(),
			Dataset: d.DatasetName(), Dir: d.Dir}); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
	// A head wider than the data trains outputs no label ever names (and a narrower one cannot score
	// every label): both mean the recipe and the data disagree.
	if classes := s.numClasses(); src.NumClasses() != classes {
		return nil, fmt.Errorf("data.source %q (%s split) has %d classes, net %s has %d outputs: set net.num_classes: %d",
			d.Source, split, src.NumClasses(), s.cfg.Net.Label(), classes, src.NumClasses())
	}
	interp, _ := data.ParseInterp(d.Augment.Interpolation)
	tf := &data.Transform{Size: want[0], Channels: want[2], Train: train, Interp: interp, CropPct: d.EvalCropPct,
		MaxPixels: int64(d.MaxImagePixels)}
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
				d.Source, h, w, c, s.net.Spec.Name, want[0], want[1], want[2])
		}
	}
	if want[0] != want[1] {
		return nil, fmt.Errorf("net %q expects %dx%d images: the image sources produce square ones", s.net.Spec.Name, want[0], want[1])
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

// skippedRecords counts the bad records every replica's loader has skipped so far
// (data.on_bad_record: skip).
func (f trainFeed) skippedRecords() int64 {
	var n int64
	for _, l := range f.loaders {
		n += l.Skipped()
	}
	return n
}
