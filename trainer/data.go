package trainer

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/recipe"
)

// openLoader opens split ("train" or "test") of the configured source and builds its loader: images
// come out at the net's input size, augmented for training when data.augment asks.
func (s *session) openLoader(split string, batch int, train bool) (*data.Loader, error) {
	return s.openReplicaLoader(split, batch, train, 0, 1)
}

// openReplicaLoader is openLoader for replica r of replicas: batch is the replica's share, and the
// loader yields rows [r·batch, (r+1)·batch) of each global batch (data.LoaderOptions.Replica). The
// decode workers are shared out among the replicas' loaders (recipe.LoaderOptions).
func (s *session) openReplicaLoader(split string, batch int, train bool, replica, replicas int) (*data.Loader, error) {
	d := s.cfg.Data
	src, err := recipe.OpenSplit(s.cfg, split, s.numClasses())
	if err != nil {
		return nil, err
	}
	// A head wider than the data trains outputs no label ever names (and a narrower one cannot score
	// every label): both mean the recipe and the data disagree.
	if classes := s.numClasses(); src.NumClasses() != classes {
		return nil, fmt.Errorf("data.source %q (%s split) has %d classes, net %s has %d outputs: set net.num_classes: %d",
			d.Source, split, src.NumClasses(), s.cfg.Net.Label(), classes, src.NumClasses())
	}
	want := recipe.ImageSize(s.cfg, s.net.Spec.InputShape, train)
	opts, err := recipe.LoaderOptions(s.cfg, want, s.numClasses(), batch, train, replica, replicas)
	if err != nil {
		return nil, err
	}
	tf := opts.Transform
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
