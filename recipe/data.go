package recipe

import (
	"io"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
)

// BadInput sets the loader's policy for bad records from data.on_bad_record and data.max_image_pixels.
func BadInput(d config.DataConfig, opts *data.LoaderOptions) {
	opts.SkipBadRecords = d.OnBadRecord == config.BadRecordSkip
	opts.MaxImagePixels = int64(d.MaxImagePixels)
}

// Normalisation returns data.mean and data.std, or the source's statistics when they are empty: the
// registry's grey nets' eval normalisation (MNIST's) for the MNIST sources, CIFAR-10's for cifar10,
// and the RGB nets' (ImageNet's) for the image sources.
func Normalisation(d config.DataConfig) (mean, std []float32) {
	m, s := d.Mean, d.Std
	if len(m) == 0 {
		switch d.Source {
		case "mnist", "fashion-mnist":
			m, s = graphs.MNISTEval.Mean, graphs.MNISTEval.Std
		case "cifar10":
			m, s = []float64{0.4914, 0.4822, 0.4465}, []float64{0.2470, 0.2435, 0.2616}
		default:
			m, s = graphs.ImageNetEval.Mean, graphs.ImageNetEval.Std
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
func NormalizeOnDevice(c config.Config, train bool) bool {
	a := c.Data.Augment
	switch c.Data.DeviceNormalize {
	case "true":
		return true // config.Validate refuses it with erasing or mixing
	case "false":
		return false
	}
	if train && (a.RandomErasing > 0 || a.Mixing()) {
		return false
	}
	spec, err := backend.ParseConfig(c.Backend)
	return err == nil && spec.Backend == "xla"
}

// DatasetName is the known dataset (data.KnownDatasets) the data section reads: data.dataset, or the
// source itself for the sources that are one dataset (mnist, fashion-mnist, cifar10); empty when unknown.
func DatasetName(d config.DataConfig) string {
	if d.Dataset != "" {
		return d.Dataset
	}
	if _, ok := data.LookupDataset(d.Source); ok {
		return d.Source
	}
	return ""
}

// TrainExamples counts the examples of the training split as the run's loader opens it (OpenSplit),
// reading indexes and headers only and opening no compute backend.
func TrainExamples(c config.Config) (int, error) {
	classes := c.Net.NumClasses
	if classes == 0 {
		spec, err := Net(c.Net)
		if err != nil {
			return 0, err
		}
		classes = spec.NumClasses
	}
	src, err := OpenSplit(c, "train", classes)
	if err != nil {
		return 0, err
	}
	if closer, ok := src.(io.Closer); ok {
		defer closer.Close()
	}
	return src.Len(), nil
}
