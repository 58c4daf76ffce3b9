package trainer

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/data"
)

// replicaSimulation, set only by tests, lets replicas > 1 run on a one-device backend: the replica
// loaders' shards are concatenated, in device order, into the global batch and run by the
// single-device step, which is what XLA's partitioner computes over R devices (the book's data-parallel theorem).
// It tests the multi-device feed (R loaders in lockstep, their split, resume) where no R devices
// exist; only the last hop, runReplicas handing shard r to device r, is then left out.
var replicaSimulation bool

// trainFeed is the training input: one loader, or with replicas R > 1 one loader per replica,
// iterated in lockstep (replica r's batch is rows [r·n, (r+1)·n) of the global batch).
type trainFeed struct{ loaders []*data.Loader }

func (s *session) newTrainFeed() (trainFeed, error) {
	r := max(s.cfg.Replicas, 1)
	f := trainFeed{loaders: make([]*data.Loader, r)}
	for i := range r {
		l, err := s.openReplicaLoader("train", s.cfg.ReplicaBatch(), true, i, r)
		if err != nil {
			return f, err
		}
		f.loaders[i] = l
	}
	return f, nil
}

// stepsPerEpoch is the number of (global) micro-batches of an epoch; every replica has as many.
func (f trainFeed) stepsPerEpoch() int { return f.loaders[0].StepsPerEpoch() }

// iterate starts every replica's loader at (epoch, step).
func (f trainFeed) iterate(epoch, step int) *feedIterator {
	it := &feedIterator{its: make([]*data.Iterator, len(f.loaders)), batches: make([]data.Batch, len(f.loaders))}
	for i, l := range f.loaders {
		it.its[i] = l.Iterate(epoch, step)
	}
	return it
}

// feedIterator yields one micro-step's batches, one per replica.
type feedIterator struct {
	its     []*data.Iterator
	batches []data.Batch
}

// next returns the replicas' batches of the next step (valid until the following call), or false at
// the end of the epoch or on an error (err).
func (it *feedIterator) next() ([]data.Batch, bool) {
	for i, r := range it.its {
		b, ok := r.Next()
		if !ok {
			return nil, false
		}
		it.batches[i] = b
	}
	return it.batches, true
}

func (it *feedIterator) err() error {
	var errs []error
	for i, r := range it.its {
		if err := r.Err(); err != nil {
			if len(it.its) > 1 {
				err = fmt.Errorf("replica %d: %w", i, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (it *feedIterator) close() {
	for _, r := range it.its {
		r.Close()
	}
}

// runShards runs one (micro-)step on the replicas' batches: with one replica the single-device step;
// with R, the data-parallel step with shard r on device r, or, under replicaSimulation, the shards
// joined into the global batch on one device.
func (ts *trainStep) runShards(images, labels []*tensors.Tensor, sc stepScalars) (loss, correct float64, err error) {
	switch {
	case len(images) == 1:
		return ts.run(images[0], labels[0], sc)
	case replicaSimulation:
		x, err := concatRows(images)
		if err != nil {
			return 0, 0, err
		}
		y, err := concatRows(labels)
		if err != nil {
			return 0, 0, err
		}
		defer x.FinalizeAll()
		defer y.FinalizeAll()
		return ts.run(x, y, sc)
	default:
		return ts.runReplicas(images, labels, sc)
	}
}

// concatRows joins tensors of one dtype along their first axis.
func concatRows(parts []*tensors.Tensor) (*tensors.Tensor, error) {
	shape := parts[0].Shape().Clone()
	rows := 0
	for _, p := range parts {
		if p.DType() != shape.DType || p.Rank() != shape.Rank() {
			return nil, fmt.Errorf("replica shards of different shapes: %s and %s", shape, p.Shape())
		}
		rows += p.Shape().Dimensions[0]
	}
	shape.Dimensions[0] = rows
	out := tensors.FromShape(shape)
	var err error
	if merr := out.MutableBytes(func(dst []byte) {
		off := 0
		for _, p := range parts {
			if cerr := p.ConstBytes(func(src []byte) { off += copy(dst[off:], src) }); cerr != nil {
				err = cerr
			}
		}
	}); merr != nil {
		return nil, merr
	}
	return out, err
}
