package trainer

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/schedule"
)

// LoopBench is what BenchLoop measured: the recipe's step on one batch kept on the device, and the
// whole loop fed by the recipe's data, with where the loop's time went.
type LoopBench struct {
	Net       string  `json:"net"`
	Batch     int     `json:"batch"` // images per micro-batch (data.batch_size)
	Size      int     `json:"size"`
	Precision string  `json:"precision"`
	Source    string  `json:"source"`  // data.source
	Workers   int     `json:"workers"` // decode workers per loader (data.workers; 0 there means one per core)
	CompileS  float64 `json:"compile_s"`
	// The same compiled step, dispatched Micro times on one batch already on the device and drained
	// once: the device's rate with no feed.
	ResidentImagesPS float64 `json:"resident_images_per_s"`
	ResidentMS       float64 `json:"resident_ms_per_micro_batch"`
	// The loop from the recipe's feed (decode, augment, prefetch to the device, dispatch, drains), over
	// Micro micro-batches after the first (whose wait is the pipeline's start, StartupS).
	FedImagesPS float64 `json:"fed_images_per_s"`
	FedMS       float64 `json:"fed_ms_per_micro_batch"`
	Ratio       float64 `json:"fed_over_resident"`
	Micro       int     `json:"micro_batches"`
	StartupS    float64 `json:"startup_s"`
	// Where the fed loop's wall time went, in seconds: waiting for the next batch from the feed (the host
	// pipeline too slow), in the step's dispatch (the execution itself on a backend that runs it
	// synchronously, as the pure-Go backend and go-xla v0.1.4 do), reading results (drains), and the
	// rest of the host's loop. TransferS is the prefetcher's host-to-device copying, overlapped with
	// the steps.
	WallS      float64 `json:"wall_s"`
	FeedWaitS  float64 `json:"feed_wait_s"`
	DispatchS  float64 `json:"dispatch_s"`
	DrainS     float64 `json:"drain_s"`
	HostOtherS float64 `json:"host_other_s"`
	TransferS  float64 `json:"transfer_s"`
	// The loop that reads every micro-batch and prefetches nothing (RunOptions.SyncEveryStep), timed
	// the same way after the other, with the same compiled step.
	SyncFedImagesPS float64 `json:"sync_fed_images_per_s"`
	SyncFeedWaitS   float64 `json:"sync_feed_wait_s"`
}

// BenchLoop compiles cfg's train step once, times it on a resident batch for steps optimizer steps,
// then runs the real loop (trainer.Run's, with no hooks: no log, checkpoint or eval) from cfg's data
// for steps+1 optimizer steps and reports both rates and where the loop's time went; then the loop
// that reads every micro-batch without prefetching (RunOptions.SyncEveryStep), for comparison.
func BenchLoop(cfg config.Config, steps int) (LoopBench, error) {
	if steps < 1 {
		return LoopBench{}, errors.New("bench: steps must be >= 1")
	}
	s, err := newSession(cfg)
	if err != nil {
		return LoopBench{}, err
	}
	defer s.backend.Finalize()
	step, err := s.newStep()
	if err != nil {
		return LoopBench{}, err
	}
	defer step.Finalize()
	feed, err := s.newTrainFeed()
	if err != nil {
		return LoopBench{}, err
	}
	k := max(cfg.Optimizer.AccumulateSteps, 1)
	rep := LoopBench{Net: cfg.Net.Label(), Batch: cfg.Data.BatchSize, Size: s.net.Spec.InputShape[0],
		Precision: cfg.Net.Precision, Source: cfg.Data.Source, Workers: cfg.Data.Workers, Micro: steps * k}
	if cfg.Net.ImageSize > 0 {
		rep.Size = cfg.Net.ImageSize
	}

	// Compile on the feed's first batch, then time the step on that batch left on the device.
	it := feed.iterate(0, 0)
	batch, ok := it.next()
	it.close()
	if !ok {
		return rep, fmt.Errorf("bench: no batch from data.source %s: %v", cfg.Data.Source, it.err())
	}
	defer batch.finalize()
	if err := s.toDevice(batch); err != nil {
		return rep, err
	}
	step.StartCarry(1, true)
	total, perEpoch, err := schedule.Length(cfg, feed.batchesPerEpoch())
	if err != nil {
		return rep, err
	}
	micro := 0
	run := func() error {
		sc := scalarsFor(cfg, micro/k, micro%k, k, total, perEpoch)
		micro++
		return step.Dispatch(batch.images, batch.labels, sc)
	}
	start := time.Now()
	if err := run(); err != nil {
		return rep, err
	}
	step.Drain()
	rep.CompileS = time.Since(start).Seconds()
	start = time.Now()
	for range rep.Micro {
		if err := run(); err != nil {
			return rep, err
		}
	}
	step.Drain() // the device's work ends when its results can be read
	resident := time.Since(start)
	rep.ResidentMS = resident.Seconds() * 1000 / float64(rep.Micro)
	rep.ResidentImagesPS = float64(rep.Micro*rep.Batch) / resident.Seconds()

	async, err := timeLoop(s, step, feed, steps, false)
	if err != nil {
		return rep, err
	}
	rep.StartupS = async.timing.firstWait.Seconds()
	rep.Micro = async.timing.micro - 1
	rep.WallS = async.timed.Seconds()
	rep.FedMS = rep.WallS * 1000 / float64(rep.Micro)
	rep.FedImagesPS = float64(rep.Micro*rep.Batch) / rep.WallS
	rep.Ratio = rep.FedImagesPS / rep.ResidentImagesPS
	rep.FeedWaitS = (async.timing.feedWait - async.timing.firstWait).Seconds()
	rep.DispatchS = (async.timing.dispatch - async.timing.firstDispatch).Seconds()
	rep.DrainS = async.timing.drain.Seconds()
	rep.HostOtherS = rep.WallS - rep.FeedWaitS - rep.DispatchS - rep.DrainS
	rep.TransferS = async.transfer.Seconds()
	synced, err := timeLoop(s, step, feed, steps, true)
	if err != nil {
		return rep, err
	}
	rep.SyncFedImagesPS = float64((synced.timing.micro-1)*rep.Batch) / synced.timed.Seconds()
	rep.SyncFeedWaitS = (synced.timing.feedWait - synced.timing.firstWait).Seconds()
	return rep, nil
}

// loopRun is one timed run of the loop.
type loopRun struct {
	timing   loopTiming
	timed    time.Duration // the wall time after the first micro-batch's wait and dispatch
	transfer time.Duration // the prefetcher's host-to-device copies
}

// timeLoop runs the loop (no hooks) from the feed's start for steps+1 optimizer steps, the first
// micro-batch's wait being the pipeline's start.
func timeLoop(s *session, step stepRunner, feed feed, steps int, syncEveryStep bool) (loopRun, error) {
	var run loopRun
	var mu sync.Mutex
	toDevice := func(b shards) error {
		t0 := time.Now()
		err := s.toDevice(b)
		mu.Lock()
		run.transfer += time.Since(t0)
		mu.Unlock()
		return err
	}
	cfg, k := s.cfg, max(s.cfg.Optimizer.AccumulateSteps, 1)
	st := &loopState{cfg: cfg, total: steps + 1, k: k, batchesPerEpoch: feed.batchesPerEpoch(),
		perEpoch: float64(feed.batchesPerEpoch()) / float64(k), lrScale: 1, emaFresh: true, window: window{start: time.Now()}}
	l := loop{step: step, feed: feed, toDevice: toDevice, sync: syncEveryStep, timing: &run.timing}
	start := time.Now()
	err := l.run(st)
	run.timed = time.Since(start) - run.timing.firstWait - run.timing.firstDispatch
	mu.Lock() // the prefetcher has ended: run.transfer is final
	defer mu.Unlock()
	return run, err
}
