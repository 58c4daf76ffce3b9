package recipe

import (
	"fmt"
	"runtime"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
)

// What the data section asks of the loader: the split it opens, the image size it yields and its
// options (batching, normalisation, augmentation, bad records), for the training or the eval batches
// of one replica.

// ImageSize is the [height, width, channels] the loader yields for net: its input, at net.image_size
// when set, and for eval at data.eval_image_size when set.
func ImageSize(c config.Config, net [3]int, train bool) [3]int {
	if size := c.Net.ImageSize; size > 0 {
		net[0], net[1] = size, size
	}
	if !train && c.Data.EvalImageSize > 0 {
		net[0], net[1] = c.Data.EvalImageSize, c.Data.EvalImageSize
	}
	return net
}

// OpenSplit opens split ("train" or "test") of the configured source: the idx files, or data.train /
// data.eval (or data.dir's split) of an image source; classes is the net's output count (imagenette-bin
// records carry no class count).
func OpenSplit(c config.Config, split string, classes int) (data.Source, error) {
	d := c.Data
	if idx(d) {
		ds, err := data.Open(d.Source, d.Dir, split)
		if err != nil {
			return nil, err
		}
		return data.NewDatasetSource(ds), nil
	}
	trainPath, evalPath := d.DataPaths()
	path, key := trainPath, "data.train"
	if split != "train" {
		path, key = evalPath, "data.eval"
	}
	if path == "" {
		return nil, fmt.Errorf("%s: data.source %s needs the split's path: set %s or data.dir", key, d.Source, key)
	}
	src, err := data.OpenSource(d.Source, path, split, data.SourceOptions{NumClasses: classes, Dataset: DatasetName(d), Dir: d.Dir})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return src, nil
}

// LoaderOptions are the loader's options for replica of replicas, batch examples each, yielding
// images of size (ImageSize) for a net of classes outputs: shuffling and dropping the last partial
// batch for training, the decode workers shared out among the replicas, the normalisation, the
// bad-record policy and, for training, the augmentation and mixing. Transform is set; the caller drops
// it for a source stored at size already when nothing augments.
func LoaderOptions(c config.Config, size [3]int, classes, batch int, train bool, replica, replicas int) (data.LoaderOptions, error) {
	d := c.Data
	if replicas > 1 {
		workers := d.Workers
		if workers == 0 {
			workers = runtime.NumCPU()
		}
		d.Workers = max(1, workers/replicas)
	}
	mean, std := Normalisation(d)
	opts := data.LoaderOptions{BatchSize: batch, Shuffle: train, DropLast: train, Seed: uint64(c.Seed),
		Mean: mean, Std: std, Workers: d.Workers, Prefetch: d.Prefetch, Uint8: NormalizeOnDevice(c, train),
		Replica: replica, Replicas: replicas}
	BadInput(d, &opts) // data.on_bad_record, data.max_image_pixels
	interp, _ := data.ParseInterp(d.Augment.Interpolation)
	tf := &data.Transform{Size: size[0], Channels: size[2], Train: train, Interp: interp, CropPct: d.EvalCropPct,
		FastDecode: train && d.FastDecode, MaxPixels: int64(d.MaxImagePixels)}
	if train {
		copy(tf.Scale[:], d.Augment.RandomResizedCropScale)
		copy(tf.Ratio[:], d.Augment.RandomResizedCropRatio)
		tf.HFlip = d.Augment.HFlip
		tf.Erasing = data.RandomErasing{Prob: d.Augment.RandomErasing, Mode: d.Augment.RandomErasingMode}
		if d.Augment.RandAugment != "" {
			ra, err := data.ParseRandAugment(d.Augment.RandAugment)
			if err != nil {
				return opts, fmt.Errorf("data.augment.rand_augment: %w", err)
			}
			if ra.Interpolation, err = data.ParseRAInterpolation(d.Augment.RandAugmentInterpolation); err != nil {
				return opts, fmt.Errorf("data.augment.rand_augment_interpolation: %w", err)
			}
			tf.RandAugment = &ra
		}
		if d.Augment.AutoAugment != "" {
			aa, err := data.ParseAutoAugment(d.Augment.AutoAugment)
			if err != nil {
				return opts, fmt.Errorf("data.augment.auto_augment: %w", err)
			}
			aa.Bilinear = d.Augment.AutoAugmentInterpolation == "bilinear"
			tf.AutoAugment = &aa
		}
		opts.Repeats = d.Augment.RepeatedAug
		if a := d.Augment; a.Mixing() {
			opts.Mixup = &data.Mixup{MixupAlpha: a.MixupAlpha, CutmixAlpha: a.CutmixAlpha, Prob: a.MixupProb,
				SwitchProb: a.MixupSwitchProb, LabelSmoothing: c.Loss.LabelSmoothing, NumClasses: classes}
		}
	}
	opts.Transform = tf
	return opts, nil
}
