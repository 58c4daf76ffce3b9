package trainer

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
)

// What tests put between the loop and its step or feed: the loop takes both as interfaces
// (stepRunner, feed), so a test wraps the real ones instead of switching production code.

// runWith is Run with the test's feed: wrap, when set, wraps the training feed.
func runWith(t *testing.T, cfg config.Config, opts RunOptions, wrap func(feed) feed) (Result, error) {
	t.Helper()
	return run(cfg, opts, wrap)
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
	return runWith(t, cfg, opts, poisoned(t, max(cfg.Optimizer.AccumulateSteps, 1), step, micro))
}
