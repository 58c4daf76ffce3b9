package trainer

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/pjrt"
)

// Data parallelism (docs/distributed.md). With replicas R > 1 the train step is compiled once with
// GoMLX's AutoSharding strategy over a 1-D mesh of R devices (pjrt.DataParallel): it is written for the
// global batch data.batch_size, whose batch axis is sharded over the mesh while every variable is
// replicated, and XLA's partitioner adds the collectives (gradient all-reduce, and the cross-replica
// sums that make BatchNorm's batch statistics those of the global batch). Replica r's loader yields
// rows [r·n, (r+1)·n) of each global batch, n = data.batch_size/R, and the host feeds shard r to
// device r. So data.batch_size, the learning-rate scaling (optimizer.lr_base_batch) and the losses
// keep their single-device meaning: the run is one device's run at that batch.

// sessionOn is newSession on a backend already open: it checks the backend has the devices the
// replicas need.
func sessionOn(cfg config.Config, backend backends.Backend) (*session, error) {
	spec, err := graphs.Get(cfg.Net.Name)
	if err != nil {
		return nil, err
	}
	if !replicaSimulation {
		if err := pjrt.CheckDevices(backend, cfg.Replicas); err != nil {
			return nil, err
		}
	}
	// The graph RNG (dropout and drop-path masks) starts from the run's seed; its state is a variable,
	// so checkpoints carry it and a resumed run draws the same masks.
	ctx := context.New()
	ctx.SetParam(context.ParamInitialSeed, int64(cfg.Seed))
	netOpts, err := cfg.Net.Options(cfg.Seed)
	if err != nil {
		return nil, err
	}
	netOpts.BNMicroBatches = max(cfg.Optimizer.AccumulateSteps, 1) // BN decay compensated for accumulation
	return &session{cfg: cfg, spec: spec, backend: backend, ctx: ctx, netOpts: netOpts, emaFresh: true}, nil
}

// distribute makes a freshly built exec (not yet run) a data-parallel one over cfg.Replicas devices:
// batched inputs (the first `batched`) sharded over the mesh, the rest and every variable replicated.
// With one replica it changes nothing.
func (s *session) distribute(exec *context.Exec, batched int) error {
	if s.cfg.Replicas <= 1 {
		return nil
	}
	dp, err := pjrt.NewDataParallel(s.cfg.Replicas)
	if err != nil {
		return err
	}
	// Outputs (updated variables, metrics) replicated too: left free, the partitioner could return a
	// variable sharded, and the next step would gather it again.
	exec.AutoSharding(dp.Mesh).WithInputShardingSpecs(dp.InputSpecs(batched)...).WithOutputShardingSpecs(dp.Replicated)
	return exec.SetDefaultShardingSpec(dp.Replicated)
}

// scalarArgs are the train step's inputs after images and labels, in the order newTrainStep reads them.
func (ts *trainStep) scalarArgs(sc stepScalars) []any {
	args := []any{float32(sc.LR)}
	for _, h := range sc.Host {
		args = append(args, float32(h))
	}
	if ts.ema {
		args = append(args, float32(sc.EMADecay), flag(sc.EMAFresh))
	}
	if ts.accumulate > 1 {
		args = append(args, float32(sc.Keep), flag(sc.Apply))
	}
	return args
}

// replicaArgs lays out one data-parallel step's inputs device by device, as GoMLX's Exec takes them:
// replica r's images and labels, then the (replicated) scalars, for r = 0..R-1.
func (ts *trainStep) replicaArgs(images, labels []*tensors.Tensor, sc stepScalars) ([]any, error) {
	if len(images) != len(labels) || len(images) == 0 {
		return nil, fmt.Errorf("train step: %d image shards and %d label shards", len(images), len(labels))
	}
	for r, im := range images {
		// Every shard feeds the same program input: float32 images, or uint8 pixels under
		// data.device_normalize, never a mix.
		if im.DType() != images[0].DType() {
			return nil, fmt.Errorf("train step: image shard %d is %s, shard 0 %s", r, im.DType(), images[0].DType())
		}
	}
	if err := ts.checkScalars(sc); err != nil {
		return nil, err
	}
	scalars := ts.scalarArgs(sc)
	var args []any
	for r := range images {
		args = append(args, images[r], labels[r])
		args = append(args, scalars...)
	}
	return args, nil
}

// runReplicas executes one data-parallel (micro-)step, shard r of the global batch going to device r,
// and returns the global batch's mean loss and correct count.
func (ts *trainStep) runReplicas(images, labels []*tensors.Tensor, sc stepScalars) (loss, correct float64, err error) {
	args, err := ts.replicaArgs(images, labels, sc)
	if err != nil {
		return 0, 0, err
	}
	return ts.execute(args)
}

// EmitTrainStep returns the StableHLO text of cfg's whole train step (forward, loss, backward,
// accumulation, clipping, optimizer, EMA, as compiled for a run) at the global batch data.batch_size
// over cfg.Replicas devices, without any device or PJRT plugin (pjrt.EmitBackend).
func EmitTrainStep(cfg config.Config) (string, error) {
	backend, err := pjrt.NewEmitBackend(max(cfg.Replicas, 1))
	if err != nil {
		return "", err
	}
	defer backend.Finalize()
	s, err := sessionOn(cfg, backend)
	if err != nil {
		return "", err
	}
	opt, err := NewOptimizer(cfg.Optimizer)
	if err != nil {
		return "", err
	}
	ts, err := s.newTrainStep(opt)
	if err != nil {
		return "", err
	}
	if err := s.distribute(ts.exec, 2); err != nil {
		return "", err
	}
	shape := s.spec.InputShape
	if size := cfg.Net.ImageSize; size > 0 {
		shape[0], shape[1] = size, size
	}
	r, n := max(cfg.Replicas, 1), cfg.ReplicaBatch()
	images, labels := make([]*tensors.Tensor, r), make([]*tensors.Tensor, r)
	pixels := dtypes.Float32
	if cfg.NormalizeOnDevice(true) {
		pixels = dtypes.Uint8 // the batch crosses as uint8 and the step normalises it
	}
	for i := range r {
		images[i] = tensors.FromShape(shapes.Make(pixels, n, shape[0], shape[1], shape[2]))
		if cfg.Data.Augment.Mixing() {
			labels[i] = tensors.FromShape(shapes.Make(dtypes.Float32, n, s.numClasses()))
		} else {
			labels[i] = tensors.FromShape(shapes.Make(dtypes.Int32, n))
		}
	}
	sc := stepScalars{LR: cfg.PeakLR(), Host: opt.HostScalars(1), Apply: true, EMADecay: cfg.EMA.Decay}
	args, err := ts.replicaArgs(images, labels, sc)
	if err != nil {
		return "", err
	}
	_, err = ts.exec.Exec(args...)
	if !errors.Is(err, pjrt.ErrEmitted) {
		if err == nil {
			err = errors.New("the emit backend ran the step")
		}
		return "", fmt.Errorf("emitting the train step of %s: %w", cfg.Net.Name, err)
	}
	mods := backend.Modules()
	if len(mods) != 1 {
		return "", fmt.Errorf("emitting the train step of %s: %d modules, expected 1", cfg.Net.Name, len(mods))
	}
	return mods[0].Text, nil
}
