package trainer

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/trainstep"
)

// What tests put between the loop and its step or feed: the loop takes both as interfaces
// (stepRunner, feed), so a test wraps the real ones instead of switching production code.

// runWith is Run with the test's step and feed: stepFor, when set, builds the step runner for the
// session (else the session's own step), and wrap, when set, wraps the training feed.
func runWith(t *testing.T, cfg config.Config, opts RunOptions, stepFor func(*session) stepRunner, wrap func(feed) feed) (Result, error) {
	t.Helper()
	start := time.Now()
	s, err := newSession(cfg)
	if err != nil {
		return Result{}, err
	}
	var step stepRunner
	if stepFor != nil {
		step = stepFor(s)
	} else {
		st, err := s.newStep()
		if err != nil {
			return Result{}, err
		}
		defer st.Finalize()
		step = st
	}
	f, err := s.newTrainFeed()
	if err != nil {
		return Result{}, err
	}
	var fd feed = f
	if wrap != nil {
		fd = wrap(f)
	}
	return s.train(opts, step, fd, start)
}

// oneDeviceStep builds, for a session of R replicas, the step of the same config on one device,
// which the replicas' shards reach joined into the global batch (joinedShards). It is what XLA's
// partitioner computes over R devices (the seed's theorem), on a backend that has one.
func oneDeviceStep(t *testing.T) func(*session) stepRunner {
	return func(s *session) stepRunner {
		cfg := s.cfg
		cfg.Replicas = 1
		step, err := trainstep.New(s.backend, s.ctx, cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(step.Finalize)
		return joinedShards{step}
	}
}

// joinedShards runs the replicas' shards, concatenated in device order, as one batch on one device.
type joinedShards struct{ step *trainstep.Step }

func (j joinedShards) RunShards(images, labels []*tensors.Tensor, sc trainstep.Scalars) (trainstep.Result, error) {
	x, err := concatRows(images)
	if err != nil {
		return trainstep.Result{}, err
	}
	defer x.FinalizeAll()
	y, err := concatRows(labels)
	if err != nil {
		return trainstep.Result{}, err
	}
	defer y.FinalizeAll()
	return j.step.Run(x, y, sc)
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

// watchedFeed calls see with every micro-batch the loop takes, and its global position: optimizer
// step (1-based) and place in the accumulation group of k.
type watchedFeed struct {
	feed
	k   int
	see func(step, micro int, batch shards)
}

func (f watchedFeed) iterate(epoch, batch int) feedIterator {
	return &watchedIterator{feedIterator: f.feed.iterate(epoch, batch), f: f, at: epoch*f.batchesPerEpoch() + batch}
}

type watchedIterator struct {
	feedIterator
	f  watchedFeed
	at int // micro-batches before the next one
}

func (it *watchedIterator) next() (shards, bool) {
	sh, ok := it.feedIterator.next()
	if ok {
		it.f.see(it.at/it.f.k+1, it.at%it.f.k, sh)
		it.at++
	}
	return sh, ok
}

// poisoned makes one pixel of every shard of micro-batch (step, micro) NaN, which makes that batch's
// loss and every gradient non-finite.
func poisoned(t *testing.T, k, step, micro int) func(feed) feed {
	return func(f feed) feed {
		return watchedFeed{feed: f, k: k, see: func(s, m int, sh shards) {
			if s != step || m != micro {
				return
			}
			for _, images := range sh.images {
				if images.DType() != dtypes.Float32 {
					t.Fatalf("poisoning step %d: %s images", step, images.DType())
				}
				tensors.MustMutableFlatData(images, func(flat []float32) { flat[0] = float32(math.NaN()) })
			}
		}}
	}
}

// runPoisoned is Run with micro-batch (step, micro) poisoned.
func runPoisoned(t *testing.T, cfg config.Config, opts RunOptions, step, micro int) (Result, error) {
	t.Helper()
	return runWith(t, cfg, opts, nil, poisoned(t, max(cfg.Optimizer.AccumulateSteps, 1), step, micro))
}
