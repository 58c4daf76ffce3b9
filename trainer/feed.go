package trainer

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/data"
)

// feed is the loop's training input: the micro-batches of an epoch, each as one shard per replica,
// already the step's input tensors. trainFeed is the production one; tests wrap it.
type feed interface {
	// batchesPerEpoch is the number of (global) micro-batches of an epoch.
	batchesPerEpoch() int
	// iterate starts at micro-batch batch of epoch epoch.
	iterate(epoch, batch int) feedIterator
}

// feedIterator yields one epoch's micro-batches.
type feedIterator interface {
	// next returns the next micro-batch's shards, or false at the end of the epoch or on an error
	// (err). The caller finalizes the tensors.
	next() (shards, bool)
	err() error
	close()
}

// shards is one micro-batch: replica r's images (float32, or uint8 pixels under
// data.device_normalize) and labels (or soft targets under mixup/cutmix) at index r.
type shards struct{ images, labels []*tensors.Tensor }

func (sh shards) finalize() {
	for r := range sh.images {
		sh.images[r].FinalizeAll()
		sh.labels[r].FinalizeAll()
	}
}

// trainFeed is the training input: one loader, or with replicas R > 1 one loader per replica,
// iterated in lockstep (replica r's batch is rows [r·n, (r+1)·n) of the global batch).
type trainFeed struct{ loaders []*data.Loader }

// newTrainFeed opens the training split once per replica; an epoch must hold at least one batch.
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
	workers := 0
	for _, l := range f.loaders {
		workers += l.Workers()
	}
	if busy := feedForeignCallers(s.backendConfig, s.cfg.Data.Source, workers); busy > 0 {
		data.SpareProcForDecode(busy)
	}
	if f.batchesPerEpoch() == 0 {
		return f, fmt.Errorf("data.batch_size %d is larger than the training split (%d examples)",
			s.cfg.Data.BatchSize, f.loaders[0].Source().Len())
	}
	return f, nil
}

// feedForeignCallers is the number of goroutines of a training run that spend their time in foreign
// calls, for which GOMAXPROCS keeps a P spare (data.SpareProcForDecode), or 0 to leave GOMAXPROCS as
// it is. On the xla backends the Go scheduler runs little else than the decode workers, which call
// libjpeg-turbo for the JPEG sources, and the step, which calls the device's library. The pure-Go
// backend's kernels split their work by GOMAXPROCS (so do the bits of their sums), and the other
// sources decode in Go.
func feedForeignCallers(backendConfig, source string, workers int) int {
	spec, err := backend.ParseConfig(backendConfig)
	if err != nil || spec.Backend != "xla" || (source != "imagefolder" && source != "shards") {
		return 0
	}
	return workers + 1
}

// batchesPerEpoch implements feed; every replica has as many.
func (f trainFeed) batchesPerEpoch() int { return f.loaders[0].StepsPerEpoch() }

// iterate implements feed, starting every replica's loader at (epoch, batch).
func (f trainFeed) iterate(epoch, batch int) feedIterator {
	it := &loaderIterator{loaders: f.loaders, its: make([]*data.Iterator, len(f.loaders))}
	for i, l := range f.loaders {
		it.its[i] = l.Iterate(epoch, batch)
	}
	return it
}

// loaderIterator is trainFeed's iterator: the replicas' loaders in lockstep.
type loaderIterator struct {
	loaders []*data.Loader
	its     []*data.Iterator
}

// next implements feedIterator: the batches are copied into tensors (the loaders reuse their
// buffers at the following call).
func (it *loaderIterator) next() (shards, bool) {
	sh := shards{images: make([]*tensors.Tensor, len(it.its)), labels: make([]*tensors.Tensor, len(it.its))}
	for i, r := range it.its {
		b, ok := r.Next()
		if !ok {
			sh.images, sh.labels = sh.images[:i], sh.labels[:i]
			sh.finalize()
			return shards{}, false
		}
		sh.images[i] = imagesTensor(it.loaders[i], b)
		sh.labels[i] = targetsTensor(b) // soft targets [batch, classes] under mixup/cutmix
	}
	return sh, true
}

func (it *loaderIterator) err() error {
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

func (it *loaderIterator) close() {
	for _, r := range it.its {
		r.Close()
	}
}

// prefetcher is a feedIterator that takes the feed's micro-batches on its own goroutine and moves
// each to the devices its shards feed (toDevice) while the step before it runs, so the loop finds
// the next batch already there. It holds one batch ready at most: with the one the step is using,
// two batches on the device.
type prefetcher struct {
	it     feedIterator
	out    chan shards
	quit   chan struct{}
	done   chan struct{}
	failed error // toDevice's, read after done
	closed bool
}

// prefetch starts taking it's batches, limit of them at most (the run's end need not decode more);
// close stops it and closes it.
func prefetch(it feedIterator, toDevice func(shards) error, limit int) *prefetcher {
	p := &prefetcher{it: it, out: make(chan shards), quit: make(chan struct{}), done: make(chan struct{})}
	go p.run(toDevice, limit)
	return p
}

func (p *prefetcher) run(toDevice func(shards) error, limit int) {
	defer close(p.done)
	defer close(p.out)
	for range limit {
		batch, ok := p.it.next()
		if !ok {
			return
		}
		if toDevice != nil {
			if err := toDevice(batch); err != nil {
				batch.finalize()
				p.failed = fmt.Errorf("moving a batch to the device: %w", err)
				return
			}
		}
		select {
		case p.out <- batch:
		case <-p.quit:
			batch.finalize()
			return
		}
	}
}

// next implements feedIterator.
func (p *prefetcher) next() (shards, bool) {
	batch, ok := <-p.out
	return batch, ok
}

// err implements feedIterator; call it after close.
func (p *prefetcher) err() error { return errors.Join(p.failed, p.it.err()) }

// close implements feedIterator: it stops the goroutine, frees the batch it held and closes the
// feed's iterator.
func (p *prefetcher) close() {
	if p.closed {
		return
	}
	p.closed = true
	close(p.quit)
	<-p.done
	p.it.close()
}

// toDevice moves a micro-batch's shards to their devices (shard r to device r, where the step takes
// it) and frees their host copies.
func (s *session) toDevice(b shards) error {
	for r := range b.images {
		for _, t := range []*tensors.Tensor{b.images[r], b.labels[r]} {
			if err := t.MaterializeOnDevice(s.backend, false, backends.DeviceNum(r)); err != nil {
				return err
			}
			t.FinalizeLocal()
		}
	}
	return nil
}
